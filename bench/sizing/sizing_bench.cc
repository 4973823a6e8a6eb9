// Sizing hot paths: config.json parsing, checkpoint header sizing (a real-sized sharded safetensors
// checkpoint and a GGUF with a 128k-token vocabulary, as sparse files: headers only on disk), and
// EstimateMemory in both profiles.
#include <benchmark/benchmark.h>

#include <filesystem>

#include "core/file.h"
#include "sizing/checkpoint.h"
#include "sizing/estimate.h"
#include "sizing/hf_config.h"
#include "sizing/loader.h"
#include "sizing/test_files.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

void BM_ParseHfConfig(benchmark::State& state, const char* file) {
  std::string text = ReadSourceFile(std::string("data/models/") + file);
  for (auto _ : state) {
    auto shape = ParseHfConfig(text, "bench");
    benchmark::DoNotOptimize(shape);
  }
}
BENCHMARK_CAPTURE(BM_ParseHfConfig, llama_3_1_8b, "meta-llama--Llama-3.1-8B.json");
BENCHMARK_CAPTURE(BM_ParseHfConfig, deepseek_v3, "deepseek-ai--DeepSeek-V3.json");
BENCHMARK_CAPTURE(BM_ParseHfConfig, gemma_3_27b, "google--gemma-3-27b-it.json");

// Llama-3.1-70B laid out as its real checkpoint: 30 shards, 723 bf16 tensors, 141 GB on disk
// (sparse files: only the headers are written).
class Checkpoint70b {
 public:
  Checkpoint70b() {
    dir_.Write("config.json", ReadSourceFile("data/models/meta-llama--Llama-3.1-70B.json"));
    const int shards = 30;
    std::vector<std::vector<StTensor>> files(shards);
    auto add = [&](int layer, std::string name, std::vector<std::int64_t> shape) {
      std::uint64_t bytes = 2;
      for (auto d : shape) bytes *= static_cast<std::uint64_t>(d);
      files[layer < 0 ? 0 : layer * shards / 80].push_back({name, "BF16", shape, bytes});
    };
    add(-1, "model.embed_tokens.weight", {128256, 8192});
    for (int l = 0; l < 80; ++l) {
      std::string p = "model.layers." + std::to_string(l) + ".";
      add(l, p + "self_attn.q_proj.weight", {8192, 8192});
      add(l, p + "self_attn.k_proj.weight", {1024, 8192});
      add(l, p + "self_attn.v_proj.weight", {1024, 8192});
      add(l, p + "self_attn.o_proj.weight", {8192, 8192});
      add(l, p + "mlp.gate_proj.weight", {28672, 8192});
      add(l, p + "mlp.up_proj.weight", {28672, 8192});
      add(l, p + "mlp.down_proj.weight", {8192, 28672});
      add(l, p + "input_layernorm.weight", {8192});
      add(l, p + "post_attention_layernorm.weight", {8192});
    }
    files[shards - 1].push_back({"model.norm.weight", "BF16", {8192}, 16384});
    files[shards - 1].push_back({"lm_head.weight", "BF16", {128256, 8192}, 128256ull * 8192 * 2});
    std::string index = "{\"metadata\":{},\"weight_map\":{";
    for (int s = 0; s < shards; ++s) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
      std::string full = MakeSafetensorsHeaderOnly(files[s]);
      std::string path = dir_.Write(name, full);
      std::filesystem::resize_file(path, full.size() + DataBytes(files[s]));
      for (const auto& t : files[s]) index += "\"" + t.name + "\":\"" + name + "\",";
    }
    index.back() = '}';
    index += "}";
    dir_.Write("model.safetensors.index.json", index);
  }
  const std::string& path() const { return dir_.path(); }

 private:
  static std::uint64_t DataBytes(const std::vector<StTensor>& ts) {
    std::uint64_t n = 0;
    for (const auto& t : ts) n += t.bytes;
    return n;
  }
  // MakeSafetensors without the (here 5 GB) zero data section.
  static std::string MakeSafetensorsHeaderOnly(const std::vector<StTensor>& ts) {
    std::string json = "{";
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto& t = ts[i];
      json += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
      for (std::size_t d = 0; d < t.shape.size(); ++d)
        json += (d ? "," : "") + std::to_string(t.shape[d]);
      json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes) + "]}";
      offset += t.bytes;
      if (i + 1 < ts.size()) json += ",";
    }
    json += "}";
    std::string out;
    PutLe(out, json.size(), 8);
    return out + json;
  }
  TempDir dir_;
};

void BM_LoadCheckpoint70b(benchmark::State& state) {
  static Checkpoint70b checkpoint;
  for (auto _ : state) {
    auto shape = LoadModel(checkpoint.path(), kDataDir);
    if (!shape.ok()) state.SkipWithError(shape.status().message().c_str());
    benchmark::DoNotOptimize(shape);
  }
}
BENCHMARK(BM_LoadCheckpoint70b)->Unit(benchmark::kMillisecond);

void BM_ParseGgufHeader(benchmark::State& state) {
  // Llama-3-8B-like metadata: a 128,256-entry token list, then 291 tensor infos.
  std::vector<GgufKv> kv = {
      {"general.architecture", 8, 0, "llama"},     {"llama.block_count", 4, 32, ""},
      {"llama.embedding_length", 4, 4096, ""},     {"llama.attention.head_count", 4, 32, ""},
      {"llama.attention.head_count_kv", 4, 8, ""}, {"tokenizer.ggml.tokens", 9, 128256, ""}};
  std::vector<GgufT> tensors;
  for (int i = 0; i < 291; ++i)
    tensors.push_back({"blk." + std::to_string(i) + ".w", 12, {4096, 4096}, 4096ull * 16 * 144});
  std::uint64_t data = 0;
  std::string head = MakeGguf(kv, tensors, 32, &data);
  for (auto _ : state) {
    auto g = ParseGgufHeader(head, head.size() + data, "bench.gguf");
    if (!g.ok()) state.SkipWithError(g.status().message().c_str());
    benchmark::DoNotOptimize(g);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * head.size()));
}
BENCHMARK(BM_ParseGgufHeader)->Unit(benchmark::kMicrosecond);

void BM_EstimateMemory(benchmark::State& state, const char* model, Method method, Profile profile) {
  auto shape = LoadModel(model, kDataDir);
  Workload w;
  w.method = method;
  w.profile = profile;
  for (auto _ : state) {
    auto e = EstimateMemory(*shape, w);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK_CAPTURE(BM_EstimateMemory, guide_70b_infer, "70b", Method::kInference, Profile::kGuide);
BENCHMARK_CAPTURE(BM_EstimateMemory, guide_70b_full, "70b", Method::kFullFineTune, Profile::kGuide);
BENCHMARK_CAPTURE(BM_EstimateMemory, detailed_llama8b_infer, "meta-llama/Llama-3.1-8B",
                  Method::kInference, Profile::kDetailed);
BENCHMARK_CAPTURE(BM_EstimateMemory, detailed_llama8b_qlora, "meta-llama/Llama-3.1-8B",
                  Method::kQlora, Profile::kDetailed);
BENCHMARK_CAPTURE(BM_EstimateMemory, detailed_deepseek_v3_full, "deepseek-ai/DeepSeek-V3",
                  Method::kFullFineTune, Profile::kDetailed);

}  // namespace
}  // namespace gpuhub::sizing

BENCHMARK_MAIN();
