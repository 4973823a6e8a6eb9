#include "fit/quote.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace gpuhub::fit {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";
constexpr TimestampMicros kNow = 1'751'360'400'000'000;  // 2025-07-01T09:00:00Z

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet = *catalog::LoadCatalog(kDataDir + "/catalog.toml");
  return fleet;
}

Result<QuoteJob> Quote(std::string_view body) {
  return ResolveQuoteJob(body, kDataDir, Fleet(), kNow);
}

TEST(QuoteJob, TheGuides405BFullFineTuneIsFiveNodesOfMi300x) {
  auto q = Quote(R"({"model": "405b", "workload": "full"})");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  // Spec §2: 405e9 x 16 B x 1.15 = 7,452 GB.
  EXPECT_DOUBLE_EQ(q->required_bytes, 405e9 * 16 * 1.15);
  ASSERT_FALSE(q->nodes.empty());
  const NodeOption& best = q->nodes.front();
  EXPECT_EQ(best.gpu, "MI300X");
  EXPECT_EQ(best.nodes, 5);  // 7,452 / 1,536 = 4.85
  EXPECT_EQ(best.cards, 40);
  // 1,590 x 8 x 0.90 = 11,448 a node; x 5.
  EXPECT_EQ(best.monthly_micros_per_node, 11'448'000'000);
  EXPECT_EQ(best.monthly_micros, 57'240'000'000);
  EXPECT_FALSE(q->fits_one_node);
  EXPECT_EQ(q->summary, "405b full: 7,452 GB; 5 nodes of 8x MI300X (7,680 GB)");
  // Full fine-tuning shards: only cards whose link shards 8 ways are offered (no L40S: PCIe).
  for (const NodeOption& o : q->nodes) EXPECT_NE(o.gpu, "L40S");
  auto a100 = std::find_if(q->nodes.begin(), q->nodes.end(),
                           [](const NodeOption& o) { return o.gpu == "A100 SXM"; });
  ASSERT_NE(a100, q->nodes.end());
  EXPECT_EQ(a100->nodes, 12);  // 7,452 / 640 = 11.6
  EXPECT_EQ(a100->formula,
            "7452.00 GB / (8 x 80 GB) = 11.64 -> 12 nodes; 12 x $7,128.00/month (8-card set, "
            "list) = $85,536.00/month");
  // The stored recomputation says who made it and carries the size report with its formulas.
  auto sizing = nlohmann::json::parse(q->sizing_json);
  EXPECT_EQ(sizing["recomputed_by"], "server");
  EXPECT_EQ(sizing["required_gb"], 7452.0);
  EXPECT_EQ(sizing["nodes"][0]["configuration"], "5 x 8x MI300X");
  EXPECT_EQ(sizing["size"]["total_gb"], 7452.0);
  EXPECT_FALSE(sizing["size"]["components"][0]["formula"].get<std::string>().empty());
  EXPECT_EQ(q->job_json, R"({"model":"405b","workload":"full"})");
}

TEST(QuoteJob, InferenceMayUsePcieCardsAndASmallJobFitsOneNode) {
  auto q = Quote(R"({"model": "70b", "workload": "infer", "precision": "fp8"})");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(q->fits_one_node);
  EXPECT_TRUE(std::any_of(q->nodes.begin(), q->nodes.end(),
                          [](const NodeOption& o) { return o.gpu == "L40S"; }));
}

TEST(QuoteJob, BadJobsNameTheirField) {
  EXPECT_EQ(Quote(R"({"workload": "full"})").status().field(), "model");
  EXPECT_EQ(Quote(R"({"model": "405b", "workload": "full", "precision": "fp7"})").status().field(),
            "precision");
  EXPECT_EQ(Quote(R"({"model": "405b", "workload": "full", "colour": "red"})").status().field(),
            "colour");
  EXPECT_EQ(Quote(R"({"model": "405b", "workload": "full", "tokens": 0})").status().field(),
            "tokens");
  EXPECT_EQ(Quote(R"({"config": {"hidden_size": 8}, "workload": "full"})").status().field(),
            "config");
  EXPECT_EQ(Quote(R"({"model": "no-such-model", "workload": "full"})").status().code(),
            StatusCode::kNotFound);
  // The plan's fields are checked as the plan checks them.
  auto planned = Quote(R"({"model": "405b", "workload": "full", "tokens": 1000000000})");
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_EQ(planned->nodes.front().nodes, 5);
}

}  // namespace
}  // namespace gpuhub::fit
