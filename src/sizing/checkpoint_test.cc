#include "sizing/checkpoint.h"

#include <gtest/gtest.h>

#include <chrono>

#include "sizing/estimate.h"
#include "sizing/loader.h"
#include "sizing/test_files.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

// A tiny Llama: hidden 64, 2 layers, 4 heads (head_dim 16), 2 KV heads, MLP 128, vocab 256.
const char* kTinyConfig = R"({"architectures":["LlamaForCausalLM"],"model_type":"llama",
  "hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
  "intermediate_size":128,"vocab_size":256,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})";

std::vector<StTensor> TinyLayer(int layer, const std::string& dtype, int bytes_per) {
  std::string p = "model.layers." + std::to_string(layer) + ".";
  auto t = [&](std::string name, std::int64_t a, std::int64_t b) {
    return StTensor{p + name, dtype, {a, b}, static_cast<std::uint64_t>(a * b * bytes_per)};
  };
  return {
      t("self_attn.q_proj.weight", 64, 64),
      t("self_attn.k_proj.weight", 32, 64),
      t("self_attn.v_proj.weight", 32, 64),
      t("self_attn.o_proj.weight", 64, 64),
      t("mlp.gate_proj.weight", 128, 64),
      t("mlp.up_proj.weight", 128, 64),
      t("mlp.down_proj.weight", 64, 128),
      StTensor{
          p + "input_layernorm.weight", dtype, {64}, static_cast<std::uint64_t>(64 * bytes_per)},
      StTensor{p + "post_attention_layernorm.weight",
               dtype,
               {64},
               static_cast<std::uint64_t>(64 * bytes_per)}};
}

constexpr double kTinyParams =
    2 * 256 * 64 + 2 * (4 * 64 * 64 - 2 * 32 * 64 + 3 * 64 * 128 + 128) + 64;

TEST(Safetensors, ShardedCheckpointMatchesTheConfig) {
  TempDir dir;
  dir.Write("config.json", kTinyConfig);
  auto shard1 = TinyLayer(0, "BF16", 2);
  shard1.push_back({"model.embed_tokens.weight", "BF16", {256, 64}, 256 * 64 * 2});
  auto shard2 = TinyLayer(1, "BF16", 2);
  shard2.push_back({"lm_head.weight", "BF16", {256, 64}, 256 * 64 * 2});
  shard2.push_back({"model.norm.weight", "BF16", {64}, 128});
  dir.Write("model-00001-of-00002.safetensors", MakeSafetensors(shard1, R"({"format":"pt"})"));
  dir.Write("model-00002-of-00002.safetensors", MakeSafetensors(shard2));
  std::string index =
      R"({"metadata":{"total_size":)" + std::to_string(kTinyParams * 2) +
      R"(},"weight_map":{"model.embed_tokens.weight":"model-00001-of-00002.safetensors",
                      "lm_head.weight":"model-00002-of-00002.safetensors"}})";
  dir.Write("model.safetensors.index.json", index);

  auto m = LoadModel(dir.path(), kDataDir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->checkpoint.has_value());
  const CheckpointSummary& c = *m->checkpoint;
  EXPECT_EQ(c.format, "safetensors");
  EXPECT_EQ(c.files.size(), 2u);
  EXPECT_DOUBLE_EQ(c.params, kTinyParams);
  EXPECT_DOUBLE_EQ(c.bytes, kTinyParams * 2);
  EXPECT_DOUBLE_EQ(m->total_params, kTinyParams);
  ASSERT_EQ(c.by_dtype.size(), 1u);
  EXPECT_EQ(c.by_dtype[0].dtype, "BF16");
  EXPECT_TRUE(m->notes.empty()) << m->notes[0];  // config and headers agree

  // A shard named by the index but absent is an incomplete download.
  std::filesystem::remove(dir.path() + "/model-00002-of-00002.safetensors");
  auto missing = LoadModel(dir.path(), kDataDir);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
}

TEST(Safetensors, QuantizedLayoutsCountTheWeightsTheyPack) {
  // GPTQ int4, group 32: qweight int32 [in/8, out], scales fp16 [in/32, out], qzeros [in/32,
  // out/8].
  std::vector<StTensor> gptq = {
      {"l.qweight", "I32", {64 / 8, 128}, 64 / 8 * 128 * 4},
      {"l.scales", "F16", {2, 128}, 2 * 128 * 2},
      {"l.qzeros", "I32", {2, 16}, 2 * 16 * 4},
      {"l.g_idx", "I32", {64}, 64 * 4},
      {"norm.weight", "F16", {64}, 128},
  };
  std::string file = MakeSafetensors(gptq);
  auto h = ParseSafetensorsHeader(file, file.size(), "gptq.safetensors");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  CheckpointSummary s;
  AddSafetensorsToSummary(*h, "gptq.safetensors", 4, s);
  FinishSummary(s);
  EXPECT_DOUBLE_EQ(s.params, 64 * 128 + 64);
  EXPECT_DOUBLE_EQ(s.quantization_bytes, 2 * 128 * 2 + 2 * 16 * 4 + 64 * 4);
  EXPECT_EQ(s.quantization, "gptq/awq int4");

  // bitsandbytes nf4: uint8 [n/2, 1] plus absmax and quant state.
  std::vector<StTensor> nf4 = {
      {"l.weight", "U8", {64 * 128 / 2, 1}, 64 * 128 / 2},
      {"l.weight.absmax", "F32", {128}, 512},
      {"l.weight.quant_map", "F32", {16}, 64},
      {"l.weight.quant_state.bitsandbytes__nf4", "U8", {100}, 100},
  };
  file = MakeSafetensors(nf4);
  h = ParseSafetensorsHeader(file, file.size(), "nf4.safetensors");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  CheckpointSummary n;
  AddSafetensorsToSummary(*h, "nf4.safetensors", 0, n);
  EXPECT_DOUBLE_EQ(n.params, 64 * 128);
  EXPECT_EQ(n.quantization, "bnb nf4");

  // MXFP4 (gpt-oss): U8 blocks of 16 bytes hold 32 fp4 values; scales are one byte per block.
  std::vector<StTensor> mx = {
      {"e.gate_up_proj_blocks", "U8", {4, 64, 2, 16}, 4 * 64 * 2 * 16},
      {"e.gate_up_proj_scales", "U8", {4, 64, 2}, 4 * 64 * 2},
  };
  file = MakeSafetensors(mx);
  h = ParseSafetensorsHeader(file, file.size(), "mx.safetensors");
  ASSERT_TRUE(h.ok());
  CheckpointSummary x;
  AddSafetensorsToSummary(*h, "mx.safetensors", 0, x);
  EXPECT_DOUBLE_EQ(x.params, 4 * 64 * 64);
  EXPECT_EQ(x.quantization, "mxfp4");
}

TEST(Safetensors, CorruptFilesGetClearErrors) {
  std::string good = MakeSafetensors({{"a", "F32", {2, 2}, 16}, {"b", "BF16", {4}, 8}});
  auto header_of = [](const std::string& json, std::uint64_t data) {
    std::string out;
    PutLe(out, json.size(), 8);
    return out + json + std::string(data, '\0');
  };
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  std::string absurd;
  PutLe(absurd, 1ull << 40, 8);
  absurd += "{}";
  const Case cases[] = {
      {"empty", "", "truncated"},
      {"truncated data", good.substr(0, good.size() - 4), "run past"},
      {"truncated header", good.substr(0, 20), "runs past the end"},
      {"absurd header length", absurd, "absurd"},
      {"not json", header_of("{nope", 0), "not valid JSON"},
      {"unknown dtype", header_of(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", 1),
       "unknown dtype"},
      {"size mismatch", header_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "needs 12"},
      {"overlap",
       header_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
                               "b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                 12),
       "overlaps"},
      {"gap", header_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "gap"},
      {"trailing bytes", header_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8),
       "cover"},
      {"end before begin",
       header_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8), "end before"},
      {"negative shape", header_of(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
       "shape"},
      {"missing offsets", header_of(R"({"a":{"dtype":"F32","shape":[1]}})", 4), "data_offsets"},
  };
  for (const auto& c : cases) {
    auto h = ParseSafetensorsHeader(c.bytes, c.bytes.size(), "bad.safetensors");
    ASSERT_FALSE(h.ok()) << c.what;
    EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(h.status().message().find(c.expected), std::string::npos)
        << c.what << ": " << h.status().message();
    EXPECT_EQ(h.status().message().rfind("bad.safetensors: ", 0), 0u) << c.what;
  }
  auto ok = ParseSafetensorsHeader(good, good.size(), "good.safetensors");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->tensors.size(), 2u);
}

TEST(Safetensors, IndexNamesOnlyPlainShardFiles) {
  EXPECT_FALSE(ParseSafetensorsIndex(R"({"weight_map":{"a":"../etc/passwd"}})", "i").ok());
  EXPECT_FALSE(ParseSafetensorsIndex(R"({"weight_map":{}})", "i").ok());
  EXPECT_FALSE(ParseSafetensorsIndex(R"({"weight_map":{"a":3}})", "i").ok());
  auto ok =
      ParseSafetensorsIndex(R"({"weight_map":{"a":"x.safetensors","b":"x.safetensors"}})", "i");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->shards.size(), 1u);
}

std::vector<GgufKv> TinyGgufMeta() {
  return {{"general.architecture", 8, 0, "llama"},  {"llama.block_count", 4, 1, ""},
          {"llama.embedding_length", 4, 256, ""},   {"llama.feed_forward_length", 4, 512, ""},
          {"llama.attention.head_count", 4, 4, ""}, {"llama.attention.head_count_kv", 4, 2, ""},
          {"llama.context_length", 4, 8192, ""},    {"general.file_type", 4, 15, ""},
          {"tokenizer.ggml.tokens", 9, 1000, ""}};
}

std::vector<GgufT> TinyGgufTensors() {
  // Q4_K: 256 elements per 144-byte block; Q6_K: 210 bytes; F32: 4 bytes per element.
  return {{"token_embd.weight", 12, {256, 1000}, 1000 * 144},
          {"blk.0.attn_q.weight", 12, {256, 256}, 256 * 144},
          {"blk.0.attn_k.weight", 12, {256, 128}, 128 * 144},
          {"blk.0.attn_v.weight", 14, {256, 128}, 128 * 210},
          {"blk.0.attn_output.weight", 12, {256, 256}, 256 * 144},
          {"blk.0.ffn_gate.weight", 12, {256, 512}, 512 * 144},
          {"blk.0.ffn_up.weight", 12, {256, 512}, 512 * 144},
          {"blk.0.ffn_down.weight", 14, {512, 256}, 256 * 2 * 210},
          {"blk.0.attn_norm.weight", 0, {256}, 1024},
          {"blk.0.ffn_norm.weight", 0, {256}, 1024},
          {"output_norm.weight", 0, {256}, 1024},
          {"output.weight", 14, {256, 1000}, 1000 * 210}};
}

TEST(Gguf, HeaderGivesExactBytesPerTensorAndTheShape) {
  std::string file = MakeGguf(TinyGgufMeta(), TinyGgufTensors());
  auto g = ParseGgufHeader(file, file.size(), "tiny.gguf");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->version, 3u);
  ASSERT_EQ(g->tensors.size(), 12u);
  EXPECT_EQ(g->tensors[1].bytes, 256u * 144);  // 256x256 Q4_K = 256 blocks x 144 B
  EXPECT_EQ(g->tensors[3].bytes, 128u * 210);  // Q6_K
  CheckpointSummary s;
  AddGgufToSummary(*g, "tiny.gguf", s);
  FinishSummary(s);
  EXPECT_EQ(s.quantization, "Q4_K_M");
  EXPECT_EQ(s.by_dtype.front().dtype, "Q4_K");
  double expected_bytes = 0, expected_params = 0;
  for (const auto& t : TinyGgufTensors()) {
    expected_bytes += static_cast<double>(t.bytes);
    double n = 1;
    for (auto d : t.dims) n *= static_cast<double>(d);
    expected_params += n;
  }
  EXPECT_DOUBLE_EQ(s.bytes, expected_bytes);
  EXPECT_DOUBLE_EQ(s.params, expected_params);

  auto shape = ShapeFromGguf(*g, "tiny");
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->layers, 1);
  EXPECT_EQ(shape->hidden, 256);
  EXPECT_EQ(shape->kv_heads, 2);
  EXPECT_EQ(shape->head_dim, 64);
  EXPECT_EQ(shape->vocab, 1000);
  EXPECT_DOUBLE_EQ(shape->kv_elements_per_token_per_layer, 2.0 * 2 * 64);
  EXPECT_DOUBLE_EQ(shape->total_params, expected_params);
  EXPECT_FALSE(shape->tied_embeddings);

  TempDir dir;
  std::string path = dir.Write("tiny-Q4_K_M.gguf", file);
  auto loaded = LoadModel(path, kDataDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(loaded->checkpoint.has_value());
  EXPECT_DOUBLE_EQ(loaded->checkpoint->bytes, expected_bytes);
  auto folder = LoadModel(dir.path(), kDataDir);
  ASSERT_TRUE(folder.ok()) << folder.status().ToString();

  // Sized as stored: the weights are the GGUF's tensor bytes, not params x 2 B.
  Workload w;
  w.weights_as_stored = true;
  w.context_tokens = 1024;
  auto e = EstimateMemory(*loaded, w);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->profile, Profile::kDetailed);
  EXPECT_DOUBLE_EQ(e->components[0].bytes, expected_bytes);
  EXPECT_NE(e->components[0].formula.find("Q4_K_M"), std::string::npos);
  // Asking for int4 (the checkpoint's own precision class) uses the stored bytes too.
  w.weights_as_stored = false;
  w.precision = Precision::kInt4;
  EXPECT_DOUBLE_EQ(EstimateMemory(*loaded, w)->components[0].bytes, expected_bytes);
  w.precision = Precision::kBf16;
  EXPECT_DOUBLE_EQ(EstimateMemory(*loaded, w)->components[0].bytes, 2 * expected_params);

  // A config.json beside the GGUF gives the architecture; the GGUF still gives the tensor bytes.
  dir.Write("config.json", R"({"model_type":"llama","hidden_size":256,"num_hidden_layers":1,
      "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":512,"vocab_size":1000})");
  auto with_config = LoadModel(dir.path(), kDataDir);
  ASSERT_TRUE(with_config.ok()) << with_config.status().ToString();
  EXPECT_EQ(with_config->model_type, "llama");
  ASSERT_TRUE(with_config->checkpoint.has_value());
  EXPECT_EQ(with_config->checkpoint->format, "gguf");
  EXPECT_DOUBLE_EQ(with_config->total_params, expected_params);
}

TEST(Gguf, CorruptFilesGetClearErrors) {
  std::string good = MakeGguf(TinyGgufMeta(), TinyGgufTensors());
  auto patched = [&](std::size_t at, std::uint64_t v, int bytes) {
    std::string f = good;
    std::string le;
    PutLe(le, v, bytes);
    f.replace(at, bytes, le);
    return f;
  };
  std::vector<GgufT> bad_type = TinyGgufTensors();
  bad_type[1].type = 4;  // Q4_2, removed from ggml
  std::vector<GgufT> bad_block = {{"t", 12, {100, 2}, 288}};
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  const Case cases[] = {
      {"empty", "", "truncated"},
      {"bad magic", "GGUX" + good.substr(4), "magic"},
      {"version 1", patched(4, 1, 4), "version 1"},
      {"big-endian", patched(4, 0x03000000, 4), "big-endian"},
      {"absurd tensor count", patched(8, 1ull << 40, 8), "absurd"},
      {"absurd kv count", patched(16, 1ull << 40, 8), "absurd"},
      {"truncated metadata", good.substr(0, 100), "truncated"},
      {"truncated data", good.substr(0, good.size() - 1000), "past the end"},
      {"unknown type", MakeGguf(TinyGgufMeta(), bad_type), "ggml type 4"},
      {"bad block", MakeGguf(TinyGgufMeta(), bad_block), "block size"},
  };
  for (const auto& c : cases) {
    auto g = ParseGgufHeader(c.bytes, c.bytes.size(), "bad.gguf");
    ASSERT_FALSE(g.ok()) << c.what;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.expected), std::string::npos)
        << c.what << ": " << g.status().message();
  }
}

TEST(Gguf, OverlappingAndMisalignedTensorsAreRefused) {
  std::string file = MakeGguf(TinyGgufMeta(), TinyGgufTensors());
  auto g = ParseGgufHeader(file, file.size(), "x.gguf");
  ASSERT_TRUE(g.ok());
  // Find the offset field of the second tensor and point it at the first one's data.
  std::string name = "blk.0.attn_q.weight";
  std::size_t pos = file.find(name);
  ASSERT_NE(pos, std::string::npos);
  std::size_t offset_field = pos + name.size() + 4 + 2 * 8 + 4;
  std::string overlap = file, misaligned = file;
  std::string le;
  PutLe(le, 32, 8);
  overlap.replace(offset_field, 8, le);
  auto o = ParseGgufHeader(overlap, overlap.size(), "x.gguf");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("overlap"), std::string::npos) << o.status().message();
  le.clear();
  PutLe(le, g->tensors[1].offset + 3, 8);
  misaligned.replace(offset_field, 8, le);
  auto m = ParseGgufHeader(misaligned, misaligned.size(), "x.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("aligned"), std::string::npos);
}

TEST(Gguf, ReadsOnlyTheHeaderOfABigFile) {
  // A sparse 8 GB file: the header is read, the data never is.
  TempDir dir;
  std::uint64_t data = 0;
  std::string head = MakeGguf(
      TinyGgufMeta(), {{"token_embd.weight", 0, {256, 8'000'000}, 8'192'000'000ull}}, 32, &data);
  std::string path = dir.Write("big.gguf", head);
  std::filesystem::resize_file(path, head.size() + data);
  auto start = std::chrono::steady_clock::now();
  auto c = ReadCheckpoint(path);
  auto ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->bytes, 8'192'000'000.0);
  EXPECT_LT(ms, 500);
}

TEST(GgmlTypes, BlockSizes) {
  struct Case {
    std::uint32_t type;
    const char* name;
    std::uint64_t elements, bytes;
  };
  const Case cases[] = {{0, "F32", 1, 4},       {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
                        {8, "Q8_0", 32, 34},    {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
                        {14, "Q6_K", 256, 210}, {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},
                        {30, "BF16", 1, 2},     {23, "IQ4_XS", 256, 136}, {39, "MXFP4", 32, 17}};
  for (const auto& c : cases) {
    std::string_view name;
    std::uint64_t e = 0, b = 0;
    ASSERT_TRUE(GgmlTypeInfo(c.type, &name, &e, &b)) << c.name;
    EXPECT_EQ(name, c.name);
    EXPECT_EQ(e, c.elements) << c.name;
    EXPECT_EQ(b, c.bytes) << c.name;
  }
  EXPECT_FALSE(GgmlTypeInfo(4, nullptr, nullptr, nullptr));
  EXPECT_FALSE(GgmlTypeInfo(1000, nullptr, nullptr, nullptr));
}

}  // namespace
}  // namespace gpuhub::sizing
