// Named limits of the sizing engine. Inputs outside them are refused with invalid_argument
// (they are typos or attacks, not workloads).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuhub::sizing {

inline constexpr std::int64_t kMaxContextTokens = 10'000'000;  // 10M tokens
inline constexpr std::int64_t kMaxSequenceTokens = 10'000'000;
inline constexpr std::int64_t kMaxBatch = 65'536;
inline constexpr int kMaxLoraRank = 65'536;
inline constexpr int kMaxGradAccumSteps = 65'536;  // micro-batches per optimizer step
inline constexpr int kMaxGpus = 1'024;
inline constexpr double kMaxParams = 1e14;  // 100T parameters
inline constexpr int kMaxLayers = 100'000;
inline constexpr int kMaxExperts = 100'000;
inline constexpr std::int64_t kMaxDimension = 10'000'000;  // hidden, vocab, intermediate

// Files read by the model loader (config.json, checkpoint headers). Larger inputs are refused with
// invalid_argument before they are parsed.
inline constexpr std::size_t kMaxConfigJsonBytes = 4 * 1024 * 1024;  // real ones are < 100 KB
inline constexpr int kMaxJsonDepth = 64;                             // real ones nest 3 deep
// safetensors: the format itself caps the JSON header at 100 MB (safetensors MAX_HEADER_SIZE).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
inline constexpr std::size_t kMaxSafetensorsIndexBytes = 64 * 1024 * 1024;
inline constexpr std::int64_t kMaxTensorsPerFile = 1'000'000;
inline constexpr int kMaxTensorDims = 8;
inline constexpr std::size_t kMaxCheckpointFiles = 4'096;  // shards in one folder
// GGUF: metadata (tokenizer vocabularies and merges included) plus tensor infos.
inline constexpr std::uint64_t kMaxGgufHeaderBytes = 256ull * 1024 * 1024;
inline constexpr std::uint64_t kMaxGgufMetadataEntries = 100'000;
inline constexpr std::uint64_t kMaxGgufArrayElements = 16'000'000;
inline constexpr std::uint64_t kMaxGgufStringBytes = 64ull * 1024 * 1024;
inline constexpr std::uint64_t kMaxGgufTensors = 1'000'000;
inline constexpr std::size_t kMaxBundledModels = 10'000;

// Diffusion models (sizing/diffusion.h): images (videos) per prompt, and the bundled files.
inline constexpr std::int64_t kMaxDiffusionBatch = 64;
inline constexpr std::size_t kMaxDiffusionModelBytes = 64 * 1024;
inline constexpr std::size_t kMaxDiffusionModels = 1'000;
inline constexpr int kMaxDiffusionPixels = 16'384;  // width or height
inline constexpr int kMaxDiffusionFrames = 1'024;

}  // namespace gpuhub::sizing
