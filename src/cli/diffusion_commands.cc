// The diffusion half of `gpuhub size` (cli/diffusion_size.h) and `gpuhub diffusion-models`, the
// bundled diffusion models --model accepts.
#include <CLI/CLI.hpp>
#include <iostream>
#include <tuple>

#include "cli/command_registry.h"
#include "cli/diffusion_size.h"
#include "core/strings.h"
#include "fit/diffusion_report.h"
#include "sizing/diffusion.h"

namespace gpuhub::cli {
namespace {

void RunDiffusionModels(bool json) {
  auto models = sizing::ListDiffusionModels(DataDir());
  if (!models.ok()) return Fail(models.status().message());
  if (json) {
    std::cout << fit::DiffusionModelsJson(*models) << "\n";
  } else {
    for (const auto& m : *models) {
      std::string names;
      for (const auto& n : m.names) names += (names.empty() ? "" : ", ") + n;
      std::cout << m.id << "  (" << m.task << "; --model " << names << "; "
                << FormatFixed(sizing::DenoiserParams(m.denoiser) / 1e9, 2)
                << "B-parameter denoiser; default " << m.default_width << "x" << m.default_height
                << (m.task == "video" ? ", " + std::to_string(m.default_frames) + " frames" : "")
                << ")\n";
    }
  }
  SetExitCode(kExitOk);
}

void AddDiffusionCommands(CLI::App& app) {
  static bool json = false;
  CLI::App* cmd = app.add_subcommand(
      "diffusion-models", "the bundled diffusion models (image and video) gpuhub size accepts");
  cmd->add_flag("--json", json, "print JSON instead of lines");
  cmd->callback([] { RunDiffusionModels(json); });
}

const bool kRegistered = RegisterCommands(&AddDiffusionCommands);

}  // namespace

std::string DiffusionFlags::FirstGiven() const {
  for (const auto& [name, option] : options) {
    if (option->count() > 0) return name;
  }
  return "";
}

void AddDiffusionFlags(CLI::App* size, DiffusionFlags& f) {
  auto text = [&](const std::string& name, std::string& target, const std::string& help) {
    f.options[name] = size->add_option(name, target, help);
  };
  text("--resolution", f.resolution, "diffusion: image or video size WIDTHxHEIGHT (1024x1024)");
  text("--width", f.width, "diffusion: width in pixels");
  text("--height", f.height, "diffusion: height in pixels");
  text("--frames", f.frames, "diffusion video: frames (Wan2.1: 4n + 1, default 81)");
  text("--offload", f.offload,
       "diffusion: none (default), stages (a stage's model leaves the GPU after it) or model "
       "(only the running stage's model on the GPU)");
  text("--text-encoder-precision", f.text_encoder_precision,
       "diffusion: the text encoders' weights (default: the pipeline's)");
  f.options["--text-encoder-cpu"] =
      size->add_flag("--text-encoder-cpu", f.text_encoder_cpu,
                     "diffusion: run the text encoders on the CPU (Wan2.1 --t5_cpu)");
}

bool IsDiffusionModel(const std::string& model) {
  return !model.empty() && sizing::IsDiffusionModelName(model, DataDir());
}

void RunDiffusionSize(const DiffusionFlags& f, const std::string& model,
                      const std::string& precision, const std::string& batch,
                      const std::vector<std::string>& llm_flags_given, bool explain, bool json) {
  if (!llm_flags_given.empty()) {
    return FailBadInput(llm_flags_given.front() + " applies to language models; " + model +
                        " is a diffusion model (its flags: --resolution, --frames, --batch, "
                        "--precision, --text-encoder-precision, --offload, --text-encoder-cpu)");
  }
  auto found = sizing::FindDiffusionModel(model, DataDir());
  // The name was found a moment ago (IsDiffusionModel): a failure now is a broken data folder.
  if (!found.ok()) return Fail(found.status().message());
  fit::DiffusionRequest r;
  r.model = std::move(*found);
  r.explain = explain;
  sizing::DiffusionWorkload& w = r.workload;
  auto given = [&](const char* name) { return f.options.at(name)->count() > 0; };
  if (given("--resolution")) {
    if (given("--width") || given("--height")) {
      return FailBadInput("give --resolution or --width and --height, not both");
    }
    Status s = fit::ParseResolution(f.resolution, w);
    if (!s.ok()) return FailBadInput("--" + s.message());
  }
  for (auto [name, text, target] :
       {std::tuple{"--width", &f.width, &w.width}, std::tuple{"--height", &f.height, &w.height},
        std::tuple{"--frames", &f.frames, &w.frames}}) {
    if (!given(name)) continue;
    auto v = ParseInt64(*text, name);
    if (!v.ok() || *v < 1 || *v > 100'000) {
      return FailBadInput(std::string(name) + " must be a positive integer, got '" +
                          text->substr(0, 40) + "'");
    }
    *target = static_cast<int>(*v);
  }
  if (!batch.empty()) {
    auto v = ParseInt64(batch, "--batch");
    if (!v.ok()) return FailBadInput(v.status().message());
    w.batch = *v;
  }
  for (auto [name, text, target] :
       {std::tuple{"--precision", &precision, &w.precision},
        std::tuple{"--text-encoder-precision", &f.text_encoder_precision,
                   &w.text_encoder_precision}}) {
    if (text->empty()) continue;
    auto p = sizing::ParsePrecision(*text);
    if (!p.ok()) return FailBadInput(std::string(name) + ": " + p.status().message());
    *target = *p;
  }
  if (given("--offload")) {
    auto o = sizing::ParseOffload(f.offload);
    if (!o.ok()) return FailBadInput("--" + o.status().message());
    w.offload = *o;
  }
  w.text_encoder_cpu = f.text_encoder_cpu;
  auto e = sizing::EstimateDiffusionMemory(r.model, w);
  if (!e.ok()) return FailBadInput(e.status().message());
  std::cout << (json ? fit::DiffusionReportJson(r, *e) + "\n" : fit::DiffusionReportText(r, *e));
  SetExitCode(kExitOk);
}

}  // namespace gpuhub::cli
