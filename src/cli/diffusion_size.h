// `gpuhub size --model sdxl ...`: the size verb's diffusion models (sizing/diffusion.h). The verb
// dispatches on --model: a bundled diffusion model (sdxl, flux-dev, wan-14b, ...) is sized here,
// with the flags below, and the language-model flags (--workload, --context, ...) are refused.
//
//   --resolution WxH (or --width/--height), --frames N (video), --batch N (images per prompt),
//   --precision P (the denoiser's weights), --text-encoder-precision P,
//   --offload none|stages|model, --text-encoder-cpu, --explain, --json
#pragma once

#include <map>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace gpuhub::cli {

struct DiffusionFlags {
  std::string resolution, width, height, frames, offload, text_encoder_precision;
  bool text_encoder_cpu = false;
  std::map<std::string, CLI::Option*> options;
  // The first diffusion flag given ("--resolution"), or "" when none was.
  std::string FirstGiven() const;
};

void AddDiffusionFlags(CLI::App* size, DiffusionFlags& flags);
bool IsDiffusionModel(const std::string& model);

// `llm_flags_given`: the language-model flags of `size` that were given besides --model,
// --precision and --batch (refused). `precision` and `batch` are as typed ("" when not given).
void RunDiffusionSize(const DiffusionFlags& flags, const std::string& model,
                      const std::string& precision, const std::string& batch,
                      const std::vector<std::string>& llm_flags_given, bool explain, bool json);

}  // namespace gpuhub::cli
