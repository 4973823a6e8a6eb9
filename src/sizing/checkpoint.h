// Checkpoint headers: safetensors and GGUF, parsed from bytes the caller read (headers only; the
// tensor data is never touched, so a 140 GB checkpoint is sized from a few MB of headers).
//
// Every parser here takes untrusted bytes: sizes are bounded by the named limits in
// sizing/limits.h, every offset is checked against the file size, and malformed input is
// invalid_argument naming the file and what is wrong — never a crash (these functions are fuzzed,
// see tests/fuzz/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sizing/model.h"

namespace gpuhub::sizing {

// ---------------------------------------------------------------------------------------------
// safetensors: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data buffer. Offsets are relative to the buffer; tensors must tile it exactly.

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F8_E4M3", "I32", "U8", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // within the data buffer
  std::uint64_t end = 0;
  double elements() const;
};

struct SafetensorsHeader {
  std::uint64_t header_bytes = 0;  // N
  std::uint64_t data_bytes = 0;    // file size - 8 - N
  std::vector<SafetensorsTensor> tensors;
};

// The JSON header length N from the file's first 8 bytes, checked against the file size and
// kMaxSafetensorsHeaderBytes. The caller then reads 8 + N bytes.
Result<std::uint64_t> SafetensorsHeaderLength(std::string_view first_bytes, std::uint64_t file_size,
                                              std::string_view file_name);

// Parses a header; `head` holds (at least) the first 8 + N bytes of a file of `file_size` bytes.
// Checks dtypes, shapes, that byte ranges match shape x dtype size, do not overlap, leave no gap
// and end exactly at the end of the file (a truncated download is caught here).
Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view head, std::uint64_t file_size,
                                                 std::string_view file_name);

// model.safetensors.index.json → the shard file names it maps tensors to (sorted, unique; plain
// names in the same folder only). `total_size` is metadata.total_size when present, else 0.
struct SafetensorsIndex {
  std::vector<std::string> shards;
  std::map<std::string, std::string> weight_map;  // tensor -> shard
  double total_size = 0;
};
Result<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json_text,
                                               std::string_view file_name);

// Adds a shard's tensors to `summary`, recognising quantized layouts: GPTQ/AWQ `qweight` (int32
// packing 32/bits weights; `bits` is quantization_config.bits, 4 when 0), bitsandbytes 4-bit
// `weight` (uint8 packing 2) and 8-bit, MXFP4 `_blocks`, FP8 with `weight_scale_inv`; their
// scales/zeros/absmax/g_idx are counted as quantization bytes, not params.
void AddSafetensorsToSummary(const SafetensorsHeader& header, std::string_view file_name, int bits,
                             CheckpointSummary& summary);

// ---------------------------------------------------------------------------------------------
// GGUF (llama.cpp), versions 2 and 3, little-endian: magic "GGUF", version, tensor count, metadata
// key/values, tensor infos (name, dims, ggml type, offset), alignment padding, data.

struct GgufValue {
  enum class Kind { kInt, kFloat, kBool, kString, kArray } kind = Kind::kInt;
  std::int64_t i = 0;
  double f = 0;
  std::string s;  // strings (truncated to 256 bytes)
  std::uint64_t array_length = 0;
  std::vector<double> numbers;  // numeric arrays up to 65,536 entries (per-layer values)
};

struct GgufTensor {
  std::string name;
  std::uint32_t type = 0;  // ggml_type
  std::vector<std::uint64_t> dims;
  std::uint64_t offset = 0;  // relative to the data section
  std::uint64_t bytes = 0;
  double elements = 0;
};

struct GgufFile {
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;  // where the data section starts in the file
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensor> tensors;
};

// Parses the header from `head`, the first bytes of a file of `file_size` bytes. When `head` ends
// before the header does and the file is longer, returns invalid_argument and sets *more_bytes to
// how many bytes to read next (at least twice as many); a caller retries with more. Checks every
// tensor's type (block sizes), dims, alignment, that its data lies inside the file and that no two
// tensors overlap.
Result<GgufFile> ParseGgufHeader(std::string_view head, std::uint64_t file_size,
                                 std::string_view file_name, std::uint64_t* more_bytes = nullptr);

// ggml type name ("Q4_K") and bytes per block / elements per block; false for unknown types.
bool GgmlTypeInfo(std::uint32_t type, std::string_view* name, std::uint64_t* block_elements,
                  std::uint64_t* block_bytes);

void AddGgufToSummary(const GgufFile& file, std::string_view file_name, CheckpointSummary& summary);

// The model's shape from GGUF metadata (general.architecture and its keys: block_count,
// embedding_length, feed_forward_length, attention.head_count[_kv], key_length, expert_count,
// attention.sliding_window, MLA's kv_lora_rank...), with the parameter inventory from the tensors.
Result<ModelShape> ShapeFromGguf(const GgufFile& file, std::string id);

// Sorts by_dtype, names the quantization mix ("Q4_K 71%, Q6_K 20%, F32 ...") and fills
// `quantization` from the dominant low-bit type.
void FinishSummary(CheckpointSummary& summary);

}  // namespace gpuhub::sizing
