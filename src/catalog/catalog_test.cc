#include "catalog/catalog.h"

#include <gtest/gtest.h>

#include <string>

#include "core/money.h"

namespace gpuhub::catalog {
namespace {

const Catalog& Fleet() {
  static const Catalog fleet = [] {
    auto c = LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      return Catalog{};
    }
    return *c;
  }();
  return fleet;
}

std::int64_t Usd(std::int64_t dollars, std::int64_t cents = 0) {
  return dollars * 1'000'000 + cents * 10'000;
}

struct TermRow {
  const char* name;
  double vram_gb;
  double bandwidth;
  bool fp8;
  Stack stack;
  ShardedTraining sharded;
  int free_now;
  std::int64_t monthly;
  std::int64_t weekly;
  bool weekly_derived;
};

// spec §5, the term fleet row by row (derived weekly = monthly x 2373/8420, to the cent).
const TermRow kTermRows[] = {
    {"MI300X", 192, 5300, true, Stack::kRocm, ShardedTraining::kEightWayOnly, 8, Usd(1590),
     Usd(450), false},
    {"B200", 180, 8000, true, Stack::kCuda, ShardedTraining::kUpTo8, 0, Usd(3890), Usd(1096, 31),
     true},
    {"H200 SXM", 141, 4800, true, Stack::kCuda, ShardedTraining::kUpTo8, 19, Usd(2290), Usd(640),
     false},
    {"H100 SXM", 80, 3350, true, Stack::kCuda, ShardedTraining::kUpTo8, 63, Usd(1690), Usd(475),
     false},
    {"H100 PCIe", 80, 2000, true, Stack::kCuda, ShardedTraining::kPairs, 0, Usd(1490), Usd(419, 93),
     true},
    {"A100 SXM", 80, 2040, false, Stack::kCuda, ShardedTraining::kUpTo8, 78, Usd(990), Usd(280),
     false},
    {"L40S", 48, 864, true, Stack::kCuda, ShardedTraining::kDataParallelOnly, 74, Usd(520),
     Usd(148), false},
    {"RTX 6000 Ada", 48, 960, true, Stack::kCuda, ShardedTraining::kDataParallelOnly, 0, Usd(460),
     Usd(129, 64), true},
    {"RTX A6000", 48, 768, false, Stack::kCuda, ShardedTraining::kPairs, 65, Usd(290), Usd(82),
     false},
    {"A40", 48, 696, false, Stack::kCuda, ShardedTraining::kPairs, 0, Usd(240), Usd(68), false},
    {"RTX 5090", 32, 1790, true, Stack::kCuda, ShardedTraining::kSingleCard, 0, Usd(540),
     Usd(152, 19), true},
    {"RTX 4090", 24, 1010, true, Stack::kCuda, ShardedTraining::kSingleCard, 0, Usd(390), Usd(110),
     false},
    {"L4", 24, 300, true, Stack::kCuda, ShardedTraining::kDataParallelOnly, 0, Usd(250),
     Usd(70, 46), true},
    {"RTX 3090", 24, 936, false, Stack::kCuda, ShardedTraining::kPairs, 186, Usd(230), Usd(65),
     false},
    {"RTX A5000", 24, 768, false, Stack::kCuda, ShardedTraining::kPairs, 51, Usd(190), Usd(55),
     false},
};

TEST(Catalog, TermFleetMatchesSpec) {
  const Catalog& c = Fleet();
  ASSERT_EQ(c.term.size(), std::size(kTermRows));
  for (std::size_t i = 0; i < std::size(kTermRows); ++i) {
    const TermRow& row = kTermRows[i];
    SCOPED_TRACE(row.name);
    const TermGpu& g = c.term[i];
    EXPECT_EQ(g.name, row.name);
    EXPECT_EQ(g.vram_gb, row.vram_gb);
    EXPECT_EQ(g.bandwidth_gb_per_s, row.bandwidth);
    EXPECT_EQ(g.fp8, row.fp8);
    EXPECT_EQ(g.stack, row.stack);
    EXPECT_EQ(g.sharded_training, row.sharded);
    EXPECT_EQ(g.free_now, row.free_now);
    EXPECT_EQ(g.monthly_micros, row.monthly);
    EXPECT_EQ(g.weekly_micros, row.weekly);
    EXPECT_EQ(g.weekly_derived, row.weekly_derived);
    EXPECT_EQ(g.hourly_micros, *MulDivHalfEven(row.monthly, 1, 720));
    EXPECT_EQ(c.FindTerm(row.name), &g);
  }
  EXPECT_EQ(c.weekly_ratio_numerator_micros, Usd(2373));
  EXPECT_EQ(c.weekly_ratio_denominator_micros, Usd(8420));
}

TEST(Catalog, CountsRegionsLinks) {
  const Catalog& c = Fleet();
  EXPECT_EQ(c.FindTerm("B200")->counts, (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(c.FindTerm("A40")->counts, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(c.FindTerm("MI300X")->regions, (std::vector<std::string>{"DFW-1"}));
  EXPECT_EQ(c.FindTerm("H100 SXM")->regions, (std::vector<std::string>{"DFW-1", "IAD-1", "PDX-1"}));
  EXPECT_TRUE(c.FindTerm("H100 SXM")->InRegion("iad-1"));
  EXPECT_FALSE(c.FindTerm("MI300X")->InRegion("PDX-1"));
  EXPECT_EQ(c.FindRegion("pdx-1")->city, "Hillsboro");
  EXPECT_EQ(c.FindTerm("MI300X")->interconnect, Interconnect::kInfinityFabric);
  EXPECT_EQ(c.FindTerm("H100 PCIe")->interconnect, Interconnect::kNvLinkBridge);
  EXPECT_TRUE(c.FindTerm("H100 PCIe")->link_optional);
  EXPECT_FALSE(c.FindTerm("RTX 4090")->link_gb_per_s.has_value());  // not published
  EXPECT_EQ(*c.FindTerm("L40S")->link_gb_per_s, 32);
  EXPECT_EQ(*c.FindTerm("L4")->power_w, 72);
  EXPECT_EQ(*c.FindTerm("H200 SXM")->local_nvme_tb, "2");
  EXPECT_EQ(*c.FindTerm("RTX A6000")->local_nvme_tb, "0.5");
  EXPECT_FALSE(c.FindTerm("A40")->local_nvme_tb.has_value());
  // Lookups forgive case, spaces and dashes.
  EXPECT_EQ(c.FindTerm("h100-sxm"), c.FindTerm("H100 SXM"));
  EXPECT_EQ(c.FindTerm("rtx_a5000"), c.FindTerm("RTX A5000"));
  EXPECT_EQ(c.FindTerm("H100"), nullptr);
}

struct ShardRow {
  ShardedTraining limit;
  int count;
  bool allowed;
};

TEST(Catalog, ShardedTrainingLimits) {
  const ShardRow rows[] = {
      {ShardedTraining::kUpTo8, 2, true},         {ShardedTraining::kUpTo8, 8, true},
      {ShardedTraining::kEightWayOnly, 2, false}, {ShardedTraining::kEightWayOnly, 4, false},
      {ShardedTraining::kEightWayOnly, 8, true},  {ShardedTraining::kPairs, 2, true},
      {ShardedTraining::kPairs, 4, false},        {ShardedTraining::kDataParallelOnly, 2, false},
      {ShardedTraining::kSingleCard, 2, false},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(AllowsShardedTraining(row.limit, row.count), row.allowed)
        << ShardedTrainingName(row.limit) << " x" << row.count;
  }
}

struct PriceRow {
  const char* gpu;
  int count;
  Term term;
  std::int64_t micros;
};

TEST(Catalog, SetPrices) {
  const Catalog& c = Fleet();
  const PriceRow rows[] = {
      {"A100 SXM", 4, Term::kMonthly, Usd(3643, 20)},  // spec §6: 990 x 4 x 0.92
      {"A100 SXM", 4, Term::kWeekly, Usd(1030, 40)},   // 280 x 4 x 0.92
      {"A100 SXM", 4, Term::kHourly, Usd(5, 6)},       // 3643.20 / 720
      {"RTX A5000", 1, Term::kMonthly, Usd(190)},
      {"RTX A5000", 1, Term::kHourly, 263'889},     // 190 / 720 = 0.2638888.. half-even
      {"H100 SXM", 2, Term::kMonthly, Usd(3211)},   // 1690 x 2 x 0.95
      {"H100 SXM", 8, Term::kMonthly, Usd(12168)},  // 1690 x 8 x 0.90
      {"B200", 2, Term::kWeekly, 2'082'989'000},    // 1096.31 x 2 x 0.95 = 2082.989
  };
  for (const auto& row : rows) {
    auto price = SetPriceMicros(c, *c.FindTerm(row.gpu), row.count, row.term);
    ASSERT_TRUE(price.ok()) << price.status().ToString();
    EXPECT_EQ(*price, row.micros) << row.gpu << " x" << row.count << " " << TermName(row.term);
  }
  auto single_b200 = SetPriceMicros(c, *c.FindTerm("B200"), 1, Term::kMonthly);
  EXPECT_FALSE(single_b200.ok());
  EXPECT_EQ(single_b200.status().message(), "B200 is rented in sets of 2, 4, 8, not 1");
  EXPECT_EQ(c.DiscountPpm(2), 50'000);
  EXPECT_EQ(c.DiscountPpm(4), 80'000);
  EXPECT_EQ(c.DiscountPpm(8), 100'000);
  EXPECT_EQ(c.DiscountPpm(1), 0);
}

TEST(Catalog, CostViews) {
  const Catalog& c = Fleet();
  EXPECT_NEAR(UsdPerGbMonth(*c.FindTerm("RTX A5000")), 190.0 / 24, 1e-12);
  EXPECT_NEAR(GbPerSecondPerUsdMonth(*c.FindTerm("H100 SXM")), 3350.0 / 1690, 1e-12);
  EXPECT_NEAR(BreakEvenHours(Usd(1690), Usd(2, 88)), 1690 / 2.88, 1e-9);
  EXPECT_EQ(BreakEvenHours(Usd(1690), 0), 0);
  EXPECT_EQ(FormatUsd(Usd(3643, 20)), "3,643.20");
  EXPECT_EQ(FormatUsd(Usd(190)), "190.00");
  EXPECT_EQ(FormatUsd(263'889), "0.26");
  EXPECT_EQ(FormatUsd(Usd(1234567, 5)), "1,234,567.05");
  EXPECT_EQ(FormatUsd(5'000), "0.00");  // half a cent rounds to even
  EXPECT_EQ(FormatUsd(15'000), "0.02");
}

struct SpotRow {
  const char* name;
  bool bandwidth_published;
  bool tflops_published;
  std::int64_t ask;
  std::int64_t largest_1;
  std::int64_t largest_8;
  const char* term;
};

// spec §5: 80% of memory / 16 B per param, floored; 8 GPUs floored to a multiple of 5 B.
TEST(Catalog, SpotCards) {
  const SpotRow rows[] = {
      {"B300", false, true, Usd(8, 99), 14, 115, ""},
      {"B200", false, true, Usd(7, 99), 9, 70, "B200"},
      {"MI325X", true, true, Usd(4, 82), 12, 100, ""},
      {"MI300X", true, true, Usd(4, 16), 9, 75, "MI300X"},
      {"H200", true, true, Usd(4, 19), 7, 55, "H200 SXM"},
      {"H100 NVL", true, true, Usd(3, 19), 4, 35, ""},
      {"H100 SXM", true, true, Usd(2, 88), 4, 30, "H100 SXM"},
      {"A100 SXM", true, true, Usd(1, 79), 4, 30, "A100 SXM"},
      {"A100 PCIe", true, true, Usd(1, 79), 4, 30, ""},
  };
  const Catalog& c = Fleet();
  ASSERT_EQ(c.spot.size(), std::size(rows));
  for (std::size_t i = 0; i < std::size(rows); ++i) {
    const SpotRow& row = rows[i];
    const SpotGpu& g = c.spot[i];
    SCOPED_TRACE(row.name);
    EXPECT_EQ(g.name, row.name);
    EXPECT_EQ(g.bandwidth_gb_per_s.has_value(), row.bandwidth_published);
    EXPECT_EQ(g.bf16_dense_tflops.has_value(), row.tflops_published);
    EXPECT_EQ(g.opening_ask_micros_per_hour, row.ask);
    EXPECT_EQ(g.largest_full_train_b_1gpu, row.largest_1);
    EXPECT_EQ(g.largest_full_train_b_8gpu, row.largest_8);
    EXPECT_EQ(g.term_name.value_or(""), row.term);
  }
  EXPECT_EQ(*c.FindSpot("MI325X")->bf16_dense_tflops, 1307);
  // Every card of both fleets carries its published dense tensor throughput and where it is from.
  for (const SpotGpu& g : c.spot) {
    SCOPED_TRACE(g.name);
    EXPECT_EQ(g.compute.bf16_dense_tflops, g.bf16_dense_tflops);
    EXPECT_FALSE(g.compute.source.empty());
    EXPECT_NE(g.compute.architecture, Architecture::kUnknown);
  }
  for (const TermGpu& g : c.term) {
    SCOPED_TRACE(g.name);
    EXPECT_TRUE(g.compute.bf16_dense_tflops.has_value());
    EXPECT_EQ(g.compute.fp8_dense_tflops.has_value(), g.fp8);
    EXPECT_NE(g.compute.source.find("FLOPS"), std::string::npos);
    EXPECT_NE(g.compute.architecture, Architecture::kUnknown);
  }
  EXPECT_EQ(*c.FindTerm("H100 SXM")->compute.bf16_dense_tflops, 989);
  EXPECT_EQ(*c.FindTerm("H100 SXM")->compute.fp8_dense_tflops, 1979);
  EXPECT_EQ(c.FindTerm("H100 SXM")->compute.architecture, Architecture::kHopper);
  EXPECT_EQ(*c.FindTerm("RTX 4090")->compute.bf16_dense_tflops, 165);
  EXPECT_EQ(c.FindTerm("MI300X")->compute.architecture, Architecture::kCdna3);
  EXPECT_EQ(*c.FindSpot("B200")->compute.fp8_dense_tflops, 4500);
  EXPECT_EQ(ArchitectureName(Architecture::kBlackwell), "blackwell");
}

// A minimal valid catalog that the malformed cases below break one field at a time.
std::string MiniCatalog(const std::string& term_extra = "", const std::string& term_override = "",
                        const std::string& spot = "") {
  std::string term = term_override.empty() ? R"(name = "X1"
vram_gb = 24
memory = "GDDR6"
bandwidth_gb_per_s = 768
fp8 = false
stack = "cuda"
link = "NVLink bridge"
interconnect = "nvlink-bridge"
link_gb_per_s = 112
sharded_training = "pairs"
monthly_usd = "190"
weekly_usd = "55"
)"
                                           : term_override;
  return "[[multi_card_discount]]\ncount = 2\npercent = \"5\"\n\n"
         "[[region]]\ncode = \"DFW-1\"\ncity = \"Dallas\"\n\n"
         "[[term]]\n" +
         term + term_extra + "\n" + spot;
}

TEST(CatalogLoad, MiniCatalogLoads) {
  auto c = ParseCatalog(MiniCatalog(), "mini.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->term[0].counts, (std::vector<int>{1, 2}));
  EXPECT_EQ(c->term[0].source_line, 9);
}

struct BadRow {
  const char* what;
  std::string text;
  std::string message;  // exact
};

TEST(CatalogLoad, MalformedFilesNameFileLineAndField) {
  const std::string ok_term = MiniCatalog();
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = ok_term;
    auto pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  };
  const BadRow rows[] = {
      {"toml syntax", replace("vram_gb = 24", "vram_gb = = 24"), "bad.toml:11:11: "},
      {"vram string", replace("vram_gb = 24", "vram_gb = \"24GB\""),
       "bad.toml:11: [[term]] \"X1\" field 'vram_gb': must be a positive number, got the string "
       "\"24GB\""},
      {"vram zero", replace("vram_gb = 24", "vram_gb = 0"),
       "bad.toml:11: [[term]] \"X1\" field 'vram_gb': must be a positive number up to 100000, got "
       "the integer 0"},
      {"price float", replace("monthly_usd = \"190\"", "monthly_usd = 190.5"),
       "bad.toml:20: [[term]] \"X1\" field 'monthly_usd': write prices as decimal strings "
       "(\"190.50\") so they stay exact, not as a TOML float"},
      {"price text", replace("monthly_usd = \"190\"", "monthly_usd = \"$190\""),
       "bad.toml:20: [[term]] \"X1\" field 'monthly_usd': amount '$190' must be a plain decimal "
       "number like 12.50"},
      {"missing price", replace("monthly_usd = \"190\"\n", ""),
       "bad.toml:9: [[term]] \"X1\" field 'monthly_usd': is missing (a price like \"1490.50\")"},
      {"unknown field", replace("fp8 = false", "fp8 = false\nvram = 3"),
       "bad.toml:15: [[term]] \"X1\" field 'vram': unknown field (known fields: "},
      {"bad stack", replace("stack = \"cuda\"", "stack = \"metal\""),
       "bad.toml:15: [[term]] \"X1\" field 'stack': must be cuda or rocm, got \"metal\""},
      {"bad fp8", replace("fp8 = false", "fp8 = \"no\""),
       "bad.toml:14: [[term]] \"X1\" field 'fp8': must be true or false, got the string \"no\""},
      {"bad sharded", replace("\"pairs\"", "\"quads\""),
       "bad.toml:19: [[term]] \"X1\" field 'sharded_training': must be up-to-8, 8-way-only, "
       "pairs, data-parallel-only or single-card, got \"quads\""},
      {"count without discount", replace("fp8 = false", "fp8 = false\ncounts = [1, 2, 4]"),
       "bad.toml:15: [[term]] \"X1\" field 'counts': 4 cards has no [[multi_card_discount]] "
       "entry"},
      {"unknown region", replace("fp8 = false", "fp8 = false\nregions = [\"LHR-1\"]"),
       "bad.toml:15: [[term]] \"X1\" field 'regions': unknown region \"LHR-1\" (regions: DFW-1)"},
      {"negative stock", replace("fp8 = false", "fp8 = false\nfree_now = -1"),
       "bad.toml:15: [[term]] \"X1\" field 'free_now': must be between 0 and 10000000, got -1"},
      {"missing name", replace("name = \"X1\"\n", ""),
       "bad.toml:9: [[term]] #1 field 'name': is missing"},
      {"weekly above monthly", replace("weekly_usd = \"55\"", "weekly_usd = \"550\""),
       "bad.toml:21: [[term]] \"X1\" field 'weekly_usd': is above the monthly price"},
      {"pcie sharding", replace("interconnect = \"nvlink-bridge\"", "interconnect = \"pcie\""),
       "bad.toml:19: [[term]] \"X1\" field 'sharded_training': a PCIe-linked card cannot shard "
       "training; use data-parallel-only or single-card"},
      {"unknown top level", "fleet = 1\n" + ok_term,
       "bad.toml:1: field 'fleet': unknown top-level field"},
      {"spot bandwidth",
       MiniCatalog("", "",
                   "[[spot]]\nname = \"S\"\nvram_gb = 80\nmemory = \"HBM3\"\n"
                   "bandwidth_gb_per_s = \"n/a\"\nbf16_dense_tflops = 1\n"
                   "opening_ask_usd_per_hour = \"1\"\n"),
       "bad.toml:27: [[spot]] \"S\" field 'bandwidth_gb_per_s': must be a positive number (a "
       "positive number or \"not published\"), got the string \"n/a\""},
      {"spot term",
       MiniCatalog("", "",
                   "[[spot]]\nname = \"S\"\nvram_gb = 80\nmemory = \"HBM3\"\n"
                   "bandwidth_gb_per_s = 1\nbf16_dense_tflops = 1\ntflops_source = \"sheet\"\n"
                   "opening_ask_usd_per_hour = \"not published\"\nterm = \"Y\"\n"),
       "bad.toml:31: [[spot]] \"S\" field 'term': must name a card of the term fleet (X1), got "
       "the string \"Y\""},
      {"tflops without source", replace("fp8 = false", "fp8 = false\nbf16_dense_tflops = 71"),
       "bad.toml:9: [[term]] \"X1\" field 'tflops_source': is missing: say where the TFLOPS "
       "figures come from (a datasheet)"},
      {"fp8 tflops without fp8",
       replace("fp8 = false", "fp8 = false\nfp8_dense_tflops = 2\ntflops_source = \"sheet\""),
       "bad.toml:15: [[term]] \"X1\" field 'fp8_dense_tflops': is given for a card without FP8 "
       "(fp8 = false)"},
      {"unknown architecture", replace("fp8 = false", "fp8 = false\narchitecture = \"volta\""),
       "bad.toml:15: [[term]] \"X1\" field 'architecture': must be ampere, ada, hopper, "
       "blackwell or cdna3, got \"volta\""},
      {"tflops zero", replace("fp8 = false", "fp8 = false\nbf16_dense_tflops = 0"),
       "bad.toml:15: [[term]] \"X1\" field 'bf16_dense_tflops': must be a positive number up to "
       "1000000, got the integer 0"},
  };
  for (const auto& row : rows) {
    auto c = ParseCatalog(row.text, "bad.toml");
    ASSERT_FALSE(c.ok()) << row.what;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << row.what;
    EXPECT_EQ(c.status().message().substr(0, row.message.size()), row.message)
        << row.what << "\n"
        << c.status().message();
  }
}

TEST(CatalogLoad, DerivedWeeklyIsMarkedAndUsesFleetRatio) {
  std::string second = R"(
[[term]]
name = "X2"
vram_gb = 48
memory = "GDDR6"
bandwidth_gb_per_s = 768
fp8 = true
stack = "cuda"
link = "PCIe"
interconnect = "pcie"
link_gb_per_s = "not published"
sharded_training = "single-card"
monthly_usd = "380"
)";
  auto c = ParseCatalog(MiniCatalog() + second, "mini.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->term[0].weekly_derived);
  EXPECT_TRUE(c->term[1].weekly_derived);
  EXPECT_EQ(c->term[1].weekly_micros, Usd(110));  // 380 x 55/190
  // Nothing to derive from: an error naming the card.
  std::string lonely = MiniCatalog("", std::string(R"(name = "X3"
vram_gb = 24
memory = "GDDR6"
bandwidth_gb_per_s = 768
fp8 = false
stack = "cuda"
link = "PCIe"
interconnect = "pcie"
link_gb_per_s = 1
sharded_training = "single-card"
monthly_usd = "190"
)"));
  auto bad = ParseCatalog(lonely, "lonely.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "lonely.toml:9: [[term]] \"X3\" field 'weekly_usd': is missing and no card publishes a "
            "weekly price to derive it from");
}

TEST(CatalogLoad, MissingFileIsNotFound) {
  auto c = LoadCatalog("/nonexistent/catalog.toml");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuhub::catalog
