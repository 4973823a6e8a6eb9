#include "sizing/loader.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "sizing/test_files.h"

namespace gpuhub::sizing {
namespace {

namespace fs = std::filesystem;
const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

TEST(LoadModel, PresetsBundledIdsAndNames) {
  auto preset = LoadModel("70b", kDataDir);
  ASSERT_TRUE(preset.ok());
  EXPECT_TRUE(preset->nominal);
  EXPECT_DOUBLE_EQ(preset->total_params, 70e9);

  auto exact = LoadModel("meta-llama/Llama-3.1-8B", kDataDir);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->id, "meta-llama/Llama-3.1-8B");
  EXPECT_DOUBLE_EQ(exact->total_params, 8'030'261'248);

  auto lower = LoadModel("  meta-llama/llama-3.1-8b ", kDataDir);
  ASSERT_TRUE(lower.ok());
  EXPECT_EQ(lower->id, "meta-llama/Llama-3.1-8B");

  auto by_name = LoadModel("Mixtral-8x7B-v0.1", kDataDir);
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->id, "mistralai/Mixtral-8x7B-v0.1");
}

TEST(LoadModel, TunedAndQuantizedVariantsUseTheirBundledBasesShapes) {
  struct Case {
    const char* spec;
    const char* base;
    bool quantized;
  };
  const Case cases[] = {
      {"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", false},
      {"Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B", false},
      {"meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf", false},
      {"google/gemma-2-9b-it", "google/gemma-2-9b", false},
      {"google/gemma-3-27b", "google/gemma-3-27b-it", false},  // bundled only as its tuned release
      {"Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "Qwen/Qwen2.5-72B", true},
      {"qwen2.5-7b-instruct-awq", "Qwen/Qwen2.5-7B", true},
  };
  for (const Case& c : cases) {
    auto m = LoadModel(c.spec, kDataDir);
    ASSERT_TRUE(m.ok()) << c.spec << ": " << m.status().ToString();
    EXPECT_EQ(m->id, c.base) << c.spec;
    auto base = LoadModel(c.base, kDataDir);
    ASSERT_TRUE(base.ok());
    EXPECT_DOUBLE_EQ(m->total_params, base->total_params) << c.spec;
    // The answer says which shapes it used; a quantized checkpoint is flagged for the request,
    // which knows whether --precision already says how its weights are stored.
    bool named = false;
    for (const auto& n : m->notes) {
      named = named || n.find(std::string("bundled '") + c.base + "'") != std::string::npos;
    }
    EXPECT_TRUE(named) << c.spec;
    EXPECT_EQ(m->quantized_variant, c.quantized) << c.spec;
  }
  // An exact bundled id is never read as a variant, and an unknown base stays unknown.
  auto exact = LoadModel("mistralai/Mistral-7B-Instruct-v0.3", kDataDir);
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->notes.empty());
  EXPECT_EQ(LoadModel("meta-llama/Llama-9-1T-Instruct", kDataDir).status().code(),
            StatusCode::kNotFound);
}

TEST(LoadModel, UnknownModelSaysHowToList) {
  auto m = LoadModel("meta-llama/Llama-9-1T", kDataDir);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("gpuhub models"), std::string::npos);
  EXPECT_EQ(LoadModel("", kDataDir).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadModel(std::string(5000, 'a'), kDataDir).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ListBundledModels, AllBundledConfigsParse) {
  auto list = ListBundledModels(kDataDir);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_GE(list->size(), 20u);
  for (const auto& m : *list) {
    EXPECT_GT(m.shape.total_params, 1e8) << m.id;
    EXPECT_EQ(m.shape.id, m.id);
    EXPECT_EQ(BundledFileName(m.id), fs::path(m.path).filename().string());
  }
  EXPECT_EQ(BundledIdFromFileName("meta-llama--Llama-3.1-8B.json"), "meta-llama/Llama-3.1-8B");
  EXPECT_EQ(ListBundledModels("/nonexistent").status().code(), StatusCode::kNotFound);
}

TEST(LoadModel, ConfigFilePathAndFolderWithoutWeights) {
  TempDir dir;
  std::string config =
      dir.Write("config.json", ReadSourceFile("data/models/meta-llama--Llama-3.1-8B.json"));
  auto by_file = LoadModel(config, kDataDir);
  ASSERT_TRUE(by_file.ok()) << by_file.status().ToString();
  EXPECT_DOUBLE_EQ(by_file->total_params, 8'030'261'248);
  EXPECT_FALSE(by_file->checkpoint.has_value());

  auto by_dir = LoadModel(dir.path(), kDataDir);
  ASSERT_TRUE(by_dir.ok()) << by_dir.status().ToString();
  EXPECT_FALSE(by_dir->checkpoint.has_value());
  EXPECT_FALSE(by_dir->notes.empty());

  TempDir empty;
  auto none = LoadModel(empty.path(), kDataDir);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no config.json"), std::string::npos);

  TempDir bad;
  bad.Write("config.json", "{\"model_type\": \"llama\"}");
  auto malformed = LoadModel(bad.path(), kDataDir);
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(malformed.status().message().find("hidden_size"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::sizing
