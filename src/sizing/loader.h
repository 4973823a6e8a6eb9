// Where model shapes come from: presets, config.json files, checkpoint folders, GGUF files and the
// bundled configs of popular open models in data/models/. Used by the CLI (`gpuhub size --model`,
// `gpuhub models`) and the HTTP API.
//
// I/O: reads only the files named by `spec` (config.json, safetensors index and shard headers, GGUF
// headers — never tensor data) and data/models/. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sizing/model.h"

namespace gpuhub::sizing {

// `spec` is, in this order of precedence:
//  1. a preset of the guide: "7b", "13b", "34b", "70b", "405b";
//  2. an existing path:
//     - a config.json (any *.json that is not a safetensors index),
//     - a model.safetensors.index.json or a *.safetensors file (config.json beside it),
//     - a *.gguf file (shape from its metadata, sizes from its tensor infos),
//     - a checkpoint folder: config.json plus model.safetensors.index.json / *.safetensors shards,
//       or a folder holding one GGUF model (split files *-00001-of-0000N.gguf are read together);
//  3. a bundled model id ("meta-llama/Llama-3.1-8B", case-insensitive; the name alone,
//     "Llama-3.1-8B", works when unambiguous), read from <data_dir>/models/.
// Errors: not_found for an unknown model (the message says `gpuhub models` lists the bundled ones);
// invalid_argument for malformed or unsupported files, naming the file and the bad field.
// With checkpoint headers, total_params is the exact count the tensors represent (packed 4-bit
// weights counted as weights) and shape.checkpoint holds bytes per dtype.
Result<ModelShape> LoadModel(std::string_view spec, const std::string& data_dir);

// Reads the headers of a checkpoint folder or file only (safetensors or GGUF), no config.json.
Result<CheckpointSummary> ReadCheckpoint(const std::string& path, int quantization_bits = 0);

struct BundledModel {
  std::string id;    // "meta-llama/Llama-3.1-8B"
  std::string path;  // "<data_dir>/models/meta-llama--Llama-3.1-8B.json"
  ModelShape shape;
};

// Every bundled model, sorted by id. File name scheme: the id with "/" written as "--", plus
// ".json" (Hugging Face cache style). A malformed bundled file is an error naming it.
Result<std::vector<BundledModel>> ListBundledModels(const std::string& data_dir);

// "meta-llama/Llama-3.1-8B" -> "meta-llama--Llama-3.1-8B.json" and back.
std::string BundledFileName(std::string_view id);
std::string BundledIdFromFileName(std::string_view file_name);

}  // namespace gpuhub::sizing
