#include "fit/guide.h"

#include <gtest/gtest.h>

namespace gpuhub::fit {
namespace {

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet =
      *catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
  return fleet;
}

const Guide& TheGuide() {
  static const Guide guide = *BuildGuide(Fleet());
  return guide;
}

constexpr double kGb = 1e9;

struct KvRow {
  const char* preset;
  double per_token_bytes;  // 2 x layers x kv_heads x 128 x 2 B
};

TEST(Guide, KvCache) {
  const KvRow rows[] = {
      {"7b", 2.0 * 32 * 8 * 128 * 2},    {"13b", 2.0 * 40 * 40 * 128 * 2},
      {"34b", 2.0 * 60 * 8 * 128 * 2},   {"70b", 2.0 * 80 * 8 * 128 * 2},
      {"405b", 2.0 * 126 * 8 * 128 * 2},
  };
  const Guide& g = TheGuide();
  ASSERT_EQ(g.kv_cache.size(), std::size(rows));
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    EXPECT_EQ(g.kv_cache[i].preset, rows[i].preset);
    EXPECT_DOUBLE_EQ(g.kv_cache[i].per_token_bytes, rows[i].per_token_bytes);
    EXPECT_DOUBLE_EQ(g.kv_cache[i].bytes[0], rows[i].per_token_bytes * 8192);
    EXPECT_DOUBLE_EQ(g.kv_cache[i].bytes[1], rows[i].per_token_bytes * 32768);
    EXPECT_DOUBLE_EQ(g.kv_cache[i].bytes[2], rows[i].per_token_bytes * 131072);
  }
  // spec §1: KV per token 0.33 MB; at 128k tokens the cache alone is 42.9 GB (70B).
  EXPECT_NEAR(g.kv_cache[3].per_token_bytes / 1e6, 0.33, 0.005);
  EXPECT_NEAR(g.kv_cache[3].bytes[2] / kGb, 42.9, 0.05);
}

struct TotalsRow {
  const char* preset;
  double bf16, fp8, int4;                    // inference, GB
  double full, full_allowance, lora, qlora;  // training, GB
};

TEST(Guide, InferenceAndTrainingTotals) {
  // Inference: params x bytes + KV at 8192 tokens + 2 GB. Training: 16 B/param, x1.15, LoRA
  // params x 2.08 + 2 GB (bf16 base + 0.5% adapters x 16 B), QLoRA params x 0.58 + 2 GB.
  const TotalsRow rows[] = {
      {"7b", 17.073741824, 10.073741824, 6.573741824, 112, 128.8, 16.56, 6.06},
      {"13b", 34.7108864, 21.7108864, 15.2108864, 208, 239.2, 29.04, 9.54},
      {"34b", 72.01326592, 38.01326592, 21.01326592, 544, 625.6, 72.72, 21.72},
      {"70b", 144.68435456, 74.68435456, 39.68435456, 1120, 1288, 147.6, 42.6},
      {"405b", 816.227858432, 411.227858432, 208.727858432, 6480, 7452, 844.4, 236.9},
  };
  const Guide& g = TheGuide();
  ASSERT_EQ(g.inference.size(), std::size(rows));
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    SCOPED_TRACE(rows[i].preset);
    EXPECT_NEAR(g.inference[i].bf16_bytes / kGb, rows[i].bf16, 1e-9);
    EXPECT_NEAR(g.inference[i].fp8_bytes / kGb, rows[i].fp8, 1e-9);
    EXPECT_NEAR(g.inference[i].int4_bytes / kGb, rows[i].int4, 1e-9);
    EXPECT_NEAR(g.training[i].full_bytes / kGb, rows[i].full, 1e-9);
    EXPECT_NEAR(g.training[i].full_with_allowance_bytes / kGb, rows[i].full_allowance, 1e-9);
    EXPECT_NEAR(g.training[i].lora_bytes / kGb, rows[i].lora, 1e-9);
    EXPECT_NEAR(g.training[i].qlora_bytes / kGb, rows[i].qlora, 1e-9);
  }
}

struct CheapestRow {
  const char* preset;
  const char* cells[6];  // bf16, fp8, int4, qlora, lora, full: "configuration $monthly"
};

std::string Cell(const GuideCheapestCell& c) {
  if (!c.best) return "nothing fits";
  return ConfigurationName(c.best->gpu->name, c.best->count) + " $" +
         catalog::FormatUsd(c.best->monthly_micros);
}

// Worked by hand from spec §5-§6 (per card: share of weights and KV + 2 GB; sets only when no
// single card fits; full fine-tuning shards over NVSwitch/Infinity Fabric only).
TEST(Guide, CheapestConfigurations) {
  const CheapestRow rows[] = {
      {"7b",
       {"RTX A5000 $190.00", "L4 $250.00", "RTX A5000 $190.00", "RTX A5000 $190.00",
        "RTX A5000 $190.00", "MI300X $1,590.00"}},
      {"13b",
       {"A40 $240.00", "L4 $250.00", "RTX A5000 $190.00", "RTX A5000 $190.00", "A40 $240.00",
        "4x A100 SXM $3,643.20"}},
      {"34b",
       {"A100 SXM $990.00", "RTX 6000 Ada $460.00", "RTX A5000 $190.00", "RTX A5000 $190.00",
        "A100 SXM $990.00", "8x A100 SXM $7,128.00"}},
      {"70b",
       {"MI300X $1,590.00", "H100 PCIe $1,490.00", "A40 $240.00", "A40 $240.00", "MI300X $1,590.00",
        "8x MI300X $11,448.00"}},
      {"405b",
       {"8x MI300X $11,448.00", "4x MI300X $5,851.20", "8x A40 $1,728.00", "8x A40 $1,728.00",
        "8x MI300X $11,448.00", "nothing fits"}},
  };
  const Guide& g = TheGuide();
  ASSERT_EQ(g.cheapest.size(), std::size(rows) * 6);
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    for (int c = 0; c < 6; ++c) {
      const GuideCheapestCell& cell = g.cheapest[i * 6 + c];
      EXPECT_EQ(cell.preset, rows[i].preset);
      EXPECT_EQ(cell.column, kGuideCheapestColumns[c]);
      EXPECT_EQ(Cell(cell), rows[i].cells[c]) << rows[i].preset << " " << kGuideCheapestColumns[c];
    }
  }
  const GuideCheapestCell& none = g.cheapest[4 * 6 + 5];
  EXPECT_NE(none.reason.find("no configuration holds this job (7452.00 GB on one card)"),
            std::string::npos);
}

TEST(Guide, CostTable) {
  const Guide& g = TheGuide();
  ASSERT_EQ(g.cost.size(), Fleet().term.size());
  const GuideCostRow& h100 = g.cost[3];
  EXPECT_EQ(h100.gpu->name, "H100 SXM");
  EXPECT_DOUBLE_EQ(h100.usd_per_gb_month, 1690.0 / 80);
  EXPECT_DOUBLE_EQ(h100.gb_s_per_usd_month, 3350.0 / 1690);
  EXPECT_EQ(*h100.spot_name, "H100 SXM");
  EXPECT_EQ(*h100.spot_ask_micros, 2'880'000);
  EXPECT_DOUBLE_EQ(*h100.break_even_hours, 1690.0 / 2.88);
  const GuideCostRow& h200 = g.cost[2];
  EXPECT_EQ(*h200.spot_name, "H200");
  EXPECT_DOUBLE_EQ(*h200.break_even_hours, 2290.0 / 4.19);
  const GuideCostRow& a5000 = g.cost.back();
  EXPECT_EQ(a5000.gpu->name, "RTX A5000");
  EXPECT_FALSE(a5000.spot_name.has_value());
  EXPECT_FALSE(a5000.break_even_hours.has_value());
}

}  // namespace
}  // namespace gpuhub::fit
