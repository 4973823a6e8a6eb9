#include "sizing/hf_config.h"

#include <gtest/gtest.h>

#include "sizing/loader.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

ModelShape Bundled(const std::string& id) {
  auto m = LoadModel(id, kDataDir);
  EXPECT_TRUE(m.ok()) << id << ": " << m.status().ToString();
  return m.ok() ? *m : ModelShape{};
}

// Parameter counts computed from the shapes, against the counts the published checkpoints hold
// (safetensors headers of the Hugging Face repositories; model cards for the MoE active counts).
TEST(HfConfig, ParameterCountsOfRealModels) {
  struct Case {
    const char* id;
    double total;
    double active;
  };
  const Case cases[] = {
      {"meta-llama/Llama-3.1-8B", 8'030'261'248, 8'030'261'248},
      {"meta-llama/Meta-Llama-3-8B", 8'030'261'248, 8'030'261'248},
      {"meta-llama/Llama-2-7b-hf", 6'738'415'616, 6'738'415'616},
      {"meta-llama/Llama-2-13b-hf", 13'015'864'320, 13'015'864'320},
      {"meta-llama/Llama-2-70b-hf", 68'976'648'192, 68'976'648'192},
      {"meta-llama/Llama-3.1-70B", 70'553'706'496, 70'553'706'496},
      {"meta-llama/Llama-3.1-405B", 405'853'388'800, 405'853'388'800},
      {"meta-llama/Llama-3.2-1B", 1'235'814'400, 1'235'814'400},  // tied embeddings
      {"meta-llama/Llama-3.2-3B", 3'212'749'824, 3'212'749'824},
      {"mistralai/Mistral-7B-v0.1", 7'241'732'096, 7'241'732'096},
      {"mistralai/Mistral-7B-Instruct-v0.3", 7'248'023'552, 7'248'023'552},
      {"mistralai/Mixtral-8x7B-v0.1", 46'702'792'704, 12'879'925'248},
      {"Qwen/Qwen2.5-7B", 7'615'616'512, 7'615'616'512},  // q/k/v biases
      {"Qwen/Qwen2.5-0.5B", 494'032'768, 494'032'768},
      {"Qwen/Qwen3-8B", 8'190'735'360, 8'190'735'360},  // q/k norms
      {"Qwen/Qwen3-30B-A3B", 30'532'122'624, 3'353'032'704},
      // Qwen2.5: safetensors metadata totals (Hugging Face API); 1.5B-Instruct and 3B tie embeddings.
      {"Qwen/Qwen2.5-1.5B-Instruct", 1'543'714'304, 1'543'714'304},
      {"Qwen/Qwen2.5-3B", 3'085'938'688, 3'085'938'688},
      {"Qwen/Qwen2.5-14B", 14'770'033'664, 14'770'033'664},
      {"Qwen/Qwen2.5-32B", 32'763'876'352, 32'763'876'352},
      // Qwen3 dense: 0.6B/1.7B/4B tie embeddings. The 0.6B and 1.7B safetensors also store a
      // duplicate lm_head.weight (751'632'384 and 2'031'739'904 elements); unique parameters here.
      {"Qwen/Qwen3-0.6B", 596'049'920, 596'049'920},
      {"Qwen/Qwen3-1.7B", 1'720'574'976, 1'720'574'976},
      {"Qwen/Qwen3-4B", 4'022'468'096, 4'022'468'096},
      {"Qwen/Qwen3-14B", 14'768'307'200, 14'768'307'200},
      {"Qwen/Qwen3-32B", 32'762'123'264, 32'762'123'264},
      {"google/gemma-2-9b", 9'241'705'984, 9'241'705'984},  // 4 norms per layer, tied
      {"google/gemma-2-27b", 27'227'128'320, 27'227'128'320},
      {"google/gemma-2-2b", 2'614'341'888, 2'614'341'888},
      {"google/gemma-3-1b-it", 999'885'952, 999'885'952},
      {"google/gemma-3-27b-it", 27'432'406'640, 27'432'406'640},           // with the SigLIP tower
      {"microsoft/Phi-3-mini-4k-instruct", 3'821'079'552, 3'821'079'552},  // fused qkv
      {"microsoft/phi-4", 14'659'507'200, 14'659'507'200},                 // safetensors total
      // Nemo: head_dim 128 with hidden 5120 (32 heads); the Instruct checkpoint's safetensors
      // total, the same architecture as the base.
      {"mistralai/Mistral-Nemo-Base-2407", 12'247'782'400, 12'247'782'400},
      {"deepseek-ai/DeepSeek-V3", 671'026'419'200, 37'552'297'472},  // MLA, 1 shared + 256 routed
      {"deepseek-ai/DeepSeek-V2-Lite", 15'706'484'224, 2'661'150'208},
      {"openai/gpt-oss-20b", 20'914'757'184, 4'187'440'704},  // sinks, expert biases
      {"openai/gpt-oss-120b", 116'829'156'672, 5'711'982'912},
  };
  for (const auto& c : cases) {
    ModelShape m = Bundled(c.id);
    EXPECT_DOUBLE_EQ(m.total_params, c.total) << c.id;
    EXPECT_DOUBLE_EQ(m.active_params, c.active) << c.id;
    EXPECT_FALSE(m.nominal) << c.id;
  }
}

TEST(HfConfig, AttentionShapesAndKvWidth) {
  ModelShape llama = Bundled("meta-llama/Llama-3.1-8B");
  EXPECT_EQ(llama.layers, 32);
  EXPECT_EQ(llama.kv_heads, 8);
  EXPECT_EQ(llama.head_dim, 128);
  EXPECT_DOUBLE_EQ(llama.kv_elements_per_token_per_layer, 2.0 * 8 * 128);
  EXPECT_EQ(llama.sliding_window_layers, 0);

  // MLA caches the compressed latent plus the decoupled rope key: 512 + 64 per token per layer.
  ModelShape v3 = Bundled("deepseek-ai/DeepSeek-V3");
  EXPECT_DOUBLE_EQ(v3.kv_elements_per_token_per_layer, 576);
  EXPECT_EQ(v3.moe_layers, 58);  // first_k_dense_replace = 3 of 61
  EXPECT_EQ(v3.experts, 256);
  EXPECT_EQ(v3.experts_per_token, 8);

  // Gemma 2: every other layer slides over 4096 tokens; Gemma 3: 5 local : 1 global.
  ModelShape g2 = Bundled("google/gemma-2-9b");
  EXPECT_EQ(g2.sliding_window_layers, 21);
  EXPECT_EQ(g2.sliding_window, 4096);
  EXPECT_TRUE(g2.tied_embeddings);
  ModelShape g3 = Bundled("google/gemma-3-27b-it");
  EXPECT_EQ(g3.sliding_window_layers, 52);
  EXPECT_EQ(g3.sliding_window, 1024);
  EXPECT_EQ(g3.vocab, 262208);  // Gemma3TextConfig default, absent from the multimodal config

  ModelShape oss = Bundled("openai/gpt-oss-20b");
  EXPECT_EQ(oss.sliding_window_layers, 12);  // layer_types
  EXPECT_EQ(oss.sliding_window, 128);
  EXPECT_EQ(oss.quantization, "mxfp4");

  // Qwen2.5 declares a sliding window but does not use it.
  EXPECT_EQ(Bundled("Qwen/Qwen2.5-7B").sliding_window_layers, 0);
  // Mistral v0.1 slides on every layer.
  EXPECT_EQ(Bundled("mistralai/Mistral-7B-v0.1").sliding_window_layers, 32);
}

TEST(HfConfig, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* expected;
  };
  const Case cases[] = {
      {"", "not valid JSON"},
      {"[1,2]", "JSON object"},
      {"{\"hidden_size\": 4096}", "model_type"},
      {R"({"model_type":"llama","hidden_size":4096,"num_attention_heads":32,"vocab_size":32000,
          "intermediate_size":11008})",
       "missing num_hidden_layers"},
      {R"({"model_type":"llama","hidden_size":-4096,"num_hidden_layers":32,"num_attention_heads":32,
          "vocab_size":32000,"intermediate_size":11008})",
       "hidden_size must be between"},
      {R"({"model_type":"llama","hidden_size":"big","num_hidden_layers":32,"num_attention_heads":32,
          "vocab_size":32000,"intermediate_size":11008})",
       "hidden_size must be a number"},
      {R"({"model_type":"llama","hidden_size":4096.5,"num_hidden_layers":32,"num_attention_heads":32,
          "vocab_size":32000,"intermediate_size":11008})",
       "whole number"},
      {R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
          "num_key_value_heads":5,"vocab_size":32000,"intermediate_size":11008})",
       "multiple"},
      {R"({"model_type":"mixtral","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
          "vocab_size":32000,"intermediate_size":11008,"num_local_experts":8})",
       "num_experts_per_tok"},
      {R"({"model_type":"deepseek_v3","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
          "vocab_size":32000,"intermediate_size":11008})",
       "kv_lora_rank"},
      {R"({"model_type":"mamba","hidden_size":768})", "not a supported family"},
      {R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":1e30,"num_attention_heads":32,
          "vocab_size":32000,"intermediate_size":11008})",
       "num_hidden_layers must be between"},
  };
  for (const auto& c : cases) {
    auto m = ParseHfConfig(c.json, "test/model");
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(c.expected), std::string::npos) << m.status().message();
    EXPECT_NE(m.status().message().find("test/model"), std::string::npos);
  }
}

TEST(HfConfig, RefusesHostileInput) {
  std::string deep(10000, '[');
  auto m = ParseHfConfig(deep, "x");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nested"), std::string::npos);
  std::string huge(5 * 1024 * 1024, ' ');
  EXPECT_FALSE(ParseHfConfig(huge, "x").ok());
}

TEST(HfConfig, UnknownFamilyWithStandardFieldsIsSizedLikeLlama) {
  auto m = ParseHfConfig(R"({"model_type":"olmo2","architectures":["Olmo2ForCausalLM"],
      "hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"vocab_size":100352,
      "intermediate_size":11008})",
                         "allenai/OLMo-2-7B");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->architecture, "Olmo2ForCausalLM");
  ASSERT_FALSE(m->notes.empty());
  EXPECT_NE(m->notes.back().find("Llama-style"), std::string::npos);
  // 2 x 100352 x 4096 + 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 4096
  EXPECT_DOUBLE_EQ(
      m->total_params,
      2.0 * 100352 * 4096 + 32.0 * (4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2 * 4096) + 4096);
}

}  // namespace
}  // namespace gpuhub::sizing
