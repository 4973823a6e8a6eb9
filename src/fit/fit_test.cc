#include "fit/fit.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/money.h"
#include "sizing/loader.h"

namespace gpuhub::fit {
namespace {

using catalog::Catalog;
using sizing::Method;
using sizing::Precision;

const Catalog& Fleet() {
  static const Catalog fleet = [] {
    auto c = catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
    if (!c.ok()) {
      ADD_FAILURE() << c.status().ToString();
      return Catalog{};
    }
    return *c;
  }();
  return fleet;
}

sizing::ModelShape Preset(const std::string& name) { return *sizing::PresetModel(name); }

sizing::Workload Job(Method method, Precision precision = Precision::kBf16,
                     std::int64_t context = 8192) {
  sizing::Workload w;
  w.method = method;
  w.precision = method == Method::kQlora ? Precision::kNf4 : precision;
  w.context_tokens = context;
  return w;
}

FitResult MustFit(const std::string& preset, const sizing::Workload& w, const Filters& f = {}) {
  auto r = Fit(Fleet(), Preset(preset), w, f);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : FitResult{};
}

std::int64_t Usd(std::int64_t dollars, std::int64_t cents = 0) {
  return dollars * 1'000'000 + cents * 10'000;
}

struct ExampleRow {
  const char* what;
  const char* preset;
  sizing::Workload workload;
  Filters filters;
  double required_gb;  // to 0.01 GB
  const char* gpu;     // "" when nothing fits
  int count;
  std::int64_t monthly;
  bool tight;
};

// The worked examples of spec §6, and more answers worked out by hand from §1-§6.
TEST(Fit, WorkedExamples) {
  Filters cuda;
  cuda.cuda_only = true;
  Filters in_stock;
  in_stock.in_stock = true;
  Filters iad;
  iad.region = "IAD-1";
  Filters h100_sxm;
  h100_sxm.gpu = "H100 SXM";
  Filters budget_1500;
  budget_1500.max_monthly_micros = Usd(1500);
  sizing::Workload long_context = Job(Method::kInference, Precision::kBf16, 32768);
  const ExampleRow rows[] = {
      // spec §6: 7B at BF16 (17 GB) -> one RTX A5000, $190/month.
      {"7b bf16", "7b", Job(Method::kInference), {}, 17.07, "RTX A5000", 1, Usd(190), false},
      // spec §6: 70B at FP8 (75 GB) -> one H100 PCIe, $1,490 (A100 has no FP8).
      {"70b fp8",
       "70b",
       Job(Method::kInference, Precision::kFp8),
       {},
       74.68,
       "H100 PCIe",
       1,
       Usd(1490),
       false},
      // spec §6: 13B full fine-tune (239 GB) -> 4x A100 SXM, $3,643.20/month.
      {"13b full",
       "13b",
       Job(Method::kFullFineTune),
       {},
       239.20,
       "A100 SXM",
       4,
       Usd(3643, 20),
       false},
      // 70B FP8 in stock: the H100 PCIe has none free; the MI300X (192 GB, 8 free) is next.
      {"70b fp8 in stock", "70b", Job(Method::kInference, Precision::kFp8), in_stock, 74.68,
       "MI300X", 1, Usd(1590), false},
      {"70b fp8 under $1,500", "70b", Job(Method::kInference, Precision::kFp8), budget_1500, 74.68,
       "H100 PCIe", 1, Usd(1490), false},
      // 7B full fine-tune (128.8 GB): one MI300X; CUDA only -> one H200 SXM (141 GB).
      {"7b full", "7b", Job(Method::kFullFineTune), {}, 128.80, "MI300X", 1, Usd(1590), false},
      {"7b full cuda", "7b", Job(Method::kFullFineTune), cuda, 128.80, "H200 SXM", 1, Usd(2290),
       false},
      // MI300X is in DFW-1 only.
      {"7b full IAD-1", "7b", Job(Method::kFullFineTune), iad, 128.80, "H200 SXM", 1, Usd(2290),
       false},
      // 70B BF16 (144.68 GB) fits one MI300X; CUDA only, no single card holds it: layer split over
      // 4x A40 at (140 + 2.68) / 4 + 2 = 37.67 GB per card, 240 x 4 x 0.92 = $883.20.
      {"70b bf16", "70b", Job(Method::kInference), {}, 144.68, "MI300X", 1, Usd(1590), false},
      {"70b bf16 cuda", "70b", Job(Method::kInference), cuda, 144.68, "A40", 4, Usd(883, 20),
       false},
      // 34B full fine-tune (625.6 GB): 8-way over NVSwitch; 8x A100 SXM holds 78.2 GB per card of
      // 80 (tight: under 2 GB per card), 990 x 8 x 0.9 = $7,128.
      {"34b full", "34b", Job(Method::kFullFineTune), {}, 625.60, "A100 SXM", 8, Usd(7128), true},
      {"13b full on H100 SXM", "13b", Job(Method::kFullFineTune), h100_sxm, 239.20, "H100 SXM", 4,
       Usd(6219, 20), false},
      // 7B BF16 at 32k tokens: 14 + 4.29 + 2 = 20.29 GB, 3.71 GB spare on 24 GB: tight.
      {"7b bf16 32k", "7b", long_context, {}, 20.29, "RTX A5000", 1, Usd(190), true},
      // 70B QLoRA: 35 + 5.6 + 4.71 (activations at 2048 x 1) + 2 = 47.31 GB -> one A40 (48 GB),
      // 0.69 GB spare: tight.
      {"70b qlora", "70b", Job(Method::kQlora), {}, 47.31, "A40", 1, Usd(240), true},
      // 405B full fine-tune: 7,452 GB; even 8x MI300X (1,536 GB) is far off.
      {"405b full", "405b", Job(Method::kFullFineTune), {}, 7452.00, "", 0, 0, false},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    FitResult r = MustFit(row.preset, row.workload, row.filters);
    EXPECT_NEAR(r.required.per_gpu_bytes / 1e9, row.required_gb, 0.005);
    if (std::string(row.gpu).empty()) {
      EXPECT_TRUE(r.ranked.empty());
      EXPECT_FALSE(r.reason.empty());
      continue;
    }
    ASSERT_FALSE(r.ranked.empty()) << r.reason;
    const Candidate& best = r.ranked.front();
    EXPECT_EQ(best.gpu->name, row.gpu);
    EXPECT_EQ(best.count, row.count);
    EXPECT_EQ(best.monthly_micros, row.monthly);
    EXPECT_EQ(best.tight, row.tight);
  }
}

TEST(Fit, ThirteenBFullFineTuneDetails) {
  FitResult r = MustFit("13b", Job(Method::kFullFineTune));
  ASSERT_FALSE(r.ranked.empty());
  const Candidate& best = r.ranked.front();
  EXPECT_TRUE(r.considered_sets);
  EXPECT_EQ(best.discount_ppm, 80'000);
  EXPECT_EQ(best.weekly_micros, Usd(1030, 40));  // 280 x 4 x 0.92
  EXPECT_EQ(best.hourly_micros, Usd(5, 6));      // 3643.20 / 720
  EXPECT_NEAR(best.per_card_bytes, 59.8e9, 1);   // 239.2 / 4 (ZeRO-3 shards everything)
  EXPECT_NEAR(best.headroom_bytes_per_card, 20.2e9, 1);
  EXPECT_EQ(best.decode_ceiling_tokens_per_s, 0);  // training: no decode ceiling
  EXPECT_EQ(best.estimate->gpus, 4);
  // Runners-up, cheapest first: 2x H200 SXM (2290 x 2 x 0.95), 4x H100 SXM, 2x B200, 8x MI300X.
  ASSERT_GE(r.ranked.size(), 5u);
  EXPECT_EQ(ConfigurationName(r.ranked[1].gpu->name, r.ranked[1].count), "2x H200 SXM");
  EXPECT_EQ(r.ranked[1].monthly_micros, Usd(4351));
  EXPECT_EQ(ConfigurationName(r.ranked[2].gpu->name, r.ranked[2].count), "4x H100 SXM");
  EXPECT_EQ(ConfigurationName(r.ranked[3].gpu->name, r.ranked[3].count), "2x B200");
  EXPECT_EQ(ConfigurationName(r.ranked[4].gpu->name, r.ranked[4].count), "8x MI300X");
}

const Excluded* FindExcluded(const FitResult& r, const std::string& gpu, int count) {
  for (const auto& x : r.excluded) {
    if (x.gpu == gpu && x.count == count) return &x;
  }
  return nullptr;
}

struct WhyNotRow {
  const char* gpu;
  int count;
  Exclusion kind;
  const char* reason;
};

TEST(Fit, WhyNotThirteenBFullFineTune) {
  FitResult r = MustFit("13b", Job(Method::kFullFineTune));
  const WhyNotRow rows[] = {
      {"MI300X", 1, Exclusion::kDoesNotFit, "needs 239.20 GB, MI300X has 192 GB"},
      {"B200", 1, Exclusion::kCountNotRented, "B200 is rented in sets of 2, 4, 8 only"},
      {"MI300X", 2, Exclusion::kShardedTraining,
       "full fine-tuning across MI300X cards shards 8-way only (Infinity Fabric 896 GB/s)"},
      {"H100 PCIe", 2, Exclusion::kDoesNotFit, "needs 119.60 GB per card, H100 PCIe has 80 GB"},
      {"H100 PCIe", 4, Exclusion::kShardedTraining,
       "full fine-tuning shards across pairs of H100 PCIe only (optional NVLink bridge 600 GB/s)"},
      {"L40S", 2, Exclusion::kShardedTraining,
       "full fine-tuning cannot shard across L40S cards (PCIe Gen4 peer-to-peer ~32 GB/s: data "
       "parallel only)"},
      {"RTX 4090", 8, Exclusion::kShardedTraining,
       "full fine-tuning cannot shard across RTX 4090 cards (PCIe Gen4 peer-to-peer: single card "
       "only)"},
      {"A100 SXM", 2, Exclusion::kDoesNotFit, "needs 119.60 GB per card, A100 SXM has 80 GB"},
      {"A100 SXM", 8, Exclusion::kSmallerSetFits,
       "4x A100 SXM already holds the job; a larger set only costs more"},
  };
  for (const auto& row : rows) {
    const Excluded* x = FindExcluded(r, row.gpu, row.count);
    ASSERT_NE(x, nullptr) << row.gpu << " x" << row.count;
    EXPECT_EQ(x->kind, row.kind) << row.gpu << " x" << row.count;
    EXPECT_EQ(x->reason, row.reason);
  }
}

TEST(Fit, WhyNotFp8AndFilters) {
  FitResult r = MustFit("70b", Job(Method::kInference, Precision::kFp8));
  const Excluded* a100 = FindExcluded(r, "A100 SXM", 1);
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->kind, Exclusion::kNeedsFp8);
  EXPECT_EQ(a100->reason, "FP8 weights need an FP8 card; A100 SXM has no FP8");
  EXPECT_EQ(FindExcluded(r, "A100 SXM", 2)->kind, Exclusion::kSingleCardFits);
  EXPECT_FALSE(r.considered_sets);
  EXPECT_TRUE(r.needs_fp8);

  // FP8 KV cache alone also needs an FP8 card.
  sizing::Workload kv = Job(Method::kInference, Precision::kInt4);
  kv.kv_precision = Precision::kFp8;
  FitResult k = MustFit("7b", kv);
  EXPECT_EQ(FindExcluded(k, "RTX A5000", 1)->reason,
            "an FP8 KV cache need an FP8 card; RTX A5000 has no FP8");

  Filters f;
  f.cuda_only = true;
  f.region = "PDX-1";
  f.in_stock = true;
  f.max_monthly_micros = Usd(250);
  FitResult g = MustFit("7b", Job(Method::kInference), f);
  EXPECT_EQ(FindExcluded(g, "MI300X", 1)->reason, "MI300X runs ROCm, not CUDA");
  EXPECT_EQ(FindExcluded(g, "A40", 1)->reason, "0 A40 free now, the set needs 1");
  EXPECT_EQ(FindExcluded(g, "RTX A6000", 1)->reason, "$290.00/month is over the $250.00 budget");
  ASSERT_FALSE(g.ranked.empty());
  EXPECT_EQ(g.ranked.front().gpu->name, "RTX A5000");
  EXPECT_EQ(g.ranked[1].gpu->name, "RTX 3090");
  EXPECT_EQ(g.ranked.size(), 2u);

  Filters region;
  region.region = "IAD-1";
  region.gpu = "MI300X";
  FitResult m = MustFit("7b", Job(Method::kInference), region);
  EXPECT_EQ(FindExcluded(m, "MI300X", 1)->reason, "MI300X is offered in DFW-1 only, not IAD-1");
  EXPECT_TRUE(m.ranked.empty());
  EXPECT_EQ(m.reason, "no card passes the filters: MI300X is offered in DFW-1 only, not IAD-1");
}

TEST(Fit, NothingFitsReasons) {
  // A budget is a filter: when every single card that holds 70B FP8 is over $1,000, sets come in,
  // and 2x RTX 6000 Ada (460 x 2 x 0.95 = $874) holds (70 + 2.68) / 2 + 2 = 38.34 GB per card.
  Filters budget;
  budget.max_monthly_micros = Usd(1000);
  FitResult b = MustFit("70b", Job(Method::kInference, Precision::kFp8), budget);
  ASSERT_FALSE(b.ranked.empty());
  EXPECT_TRUE(b.considered_sets);
  EXPECT_EQ(ConfigurationName(b.ranked[0].gpu->name, b.ranked[0].count), "2x RTX 6000 Ada");
  EXPECT_EQ(b.ranked[0].monthly_micros, Usd(874));
  budget.max_monthly_micros = Usd(500);
  FitResult none = MustFit("70b", Job(Method::kInference, Precision::kFp8), budget);
  EXPECT_TRUE(none.ranked.empty());
  EXPECT_EQ(none.reason,
            "the cheapest configuration that holds it, 2x RTX 6000 Ada at $874.00/month, is over "
            "the $500.00 budget");
  FitResult full = MustFit("405b", Job(Method::kFullFineTune));
  EXPECT_EQ(full.reason.substr(0, 62),
            "no configuration holds this job (7452.00 GB on one card); the ");
  EXPECT_NE(full.reason.find("try --workload lora or qlora, or --offload-optimizer"),
            std::string::npos);

  Filters stock;
  stock.in_stock = true;
  stock.gpu = "B200";
  FitResult s = MustFit("13b", Job(Method::kFullFineTune), stock);
  EXPECT_EQ(s.reason,
            "every configuration that holds it is out of stock (2x B200: 0 B200 free now, the set "
            "needs 2); drop --in-stock to rent it when cards free up");
}

TEST(Fit, InputErrors) {
  struct Row {
    const char* what;
    sizing::Workload workload;
    Filters filters;
    const char* message;
  };
  sizing::Workload two_gpus = Job(Method::kInference);
  two_gpus.gpus = 2;
  sizing::Workload zero = Job(Method::kFullFineTune);
  zero.zero_stage = 3;
  Filters bad_gpu;
  bad_gpu.gpu = "H100";
  Filters a100;
  a100.gpu = "a100-sxm";
  Filters bad_region;
  bad_region.region = "LHR-1";
  Filters negative;
  negative.max_monthly_micros = -5;
  Filters rocm;
  rocm.gpu = "MI300X";
  rocm.cuda_only = true;
  sizing::Workload context0 = Job(Method::kInference);
  context0.context_tokens = 0;
  const Row rows[] = {
      {"gpus",
       two_gpus,
       {},
       "fit picks the number of GPUs itself; drop --gpus (use --gpu NAME to pick a card, or gpuhub "
       "size --gpus N to size a fixed set)"},
      {"zero",
       zero,
       {},
       "fit picks how a set shares the job (ZeRO-3 for full fine-tuning and for offloaded "
       "parameters, layers split otherwise); drop --zero"},
      {"unknown gpu", Job(Method::kInference), bad_gpu,
       "unknown GPU 'H100' (term fleet: MI300X, B200, H200 SXM, H100 SXM, H100 PCIe, A100 SXM, "
       "L40S, RTX 6000 Ada, RTX A6000, A40, RTX 5090, RTX 4090, L4, RTX 3090, RTX A5000)"},
      {"fp8 on A100", Job(Method::kInference, Precision::kFp8), a100,
       "A100 SXM has no FP8 support: FP8 weights need one of MI300X, B200, H200 SXM, H100 SXM, "
       "H100 PCIe, L40S, RTX 6000 Ada, RTX 5090, RTX 4090, L4 (or use --precision bf16 or int4 "
       "and --kv-precision fp16)"},
      {"region", Job(Method::kInference), bad_region,
       "unknown region 'LHR-1' (regions: DFW-1, IAD-1, PDX-1)"},
      {"budget", Job(Method::kInference), negative,
       "--max-monthly-usd must be a positive amount like 1500 or 1500.50"},
      {"rocm", Job(Method::kInference), rocm,
       "MI300X runs ROCm, not CUDA: drop --cuda-only or pick a CUDA card"},
      {"context", context0, {}, "context must be between 1 and 10000000 tokens, got 0"},
  };
  for (const auto& row : rows) {
    auto r = Fit(Fleet(), Preset("7b"), row.workload, row.filters);
    ASSERT_FALSE(r.ok()) << row.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << row.what;
    EXPECT_EQ(r.status().message(), row.message) << row.what;
  }
}

// Parameter offload runs ZeRO-3 even on one card (ZeRO-Infinity): fit sizes it that way instead of
// refusing the job.
TEST(Fit, OffloadedParametersUseZeroThreeOnEveryCount) {
  sizing::Workload w = Job(Method::kFullFineTune);
  w.profile = sizing::Profile::kDetailed;
  w.offload_params = true;
  w.offload_optimizer = true;
  FitResult r = MustFit("7b", w);
  ASSERT_FALSE(r.ranked.empty()) << r.reason;
  EXPECT_EQ(r.ranked.front().count, 1);
  EXPECT_LT(r.required.per_gpu_bytes, 112e9);  // weights and optimizer state live on the host
  EXPECT_GT(r.required.host_bytes, 0);
}

TEST(Fit, DecodeCeilingAndExplain) {
  FitResult r = MustFit("70b", Job(Method::kInference, Precision::kFp8));
  const Candidate& best = r.ranked.front();
  EXPECT_DOUBLE_EQ(best.decode_ceiling_tokens_per_s, 2000e9 / 70e9);
  std::vector<std::string> lines = ExplainCandidate(best);
  ASSERT_GE(lines.size(), 6u);
  EXPECT_EQ(lines[0], "weights: 70e9 params x 1.0 B/param (fp8) = 70.00 GB");
  EXPECT_EQ(lines[3], "required: 74.68 GB");
  EXPECT_EQ(lines[4], "headroom: 80 GB - 74.68 GB = 5.32 GB");
  EXPECT_EQ(lines[5],
            "price: $1,490.00/month (list); weekly $419.93 (derived); hourly = monthly / 720 = "
            "$2.07");
  EXPECT_EQ(lines[6],
            "decode ceiling: 2000 GB/s / 70.00 GB of weights read per token = 28.6 tok/s");

  // Layer split across cards does not raise the ceiling: one card's bandwidth over all weights.
  Filters cuda;
  cuda.cuda_only = true;
  FitResult set = MustFit("70b", Job(Method::kInference), cuda);
  const Candidate& a40s = set.ranked.front();
  EXPECT_EQ(a40s.count, 4);
  EXPECT_DOUBLE_EQ(a40s.decode_ceiling_tokens_per_s, 696e9 / 140e9);
  EXPECT_NEAR(a40s.per_card_bytes, (140e9 + 2.68435456e9) / 4 + 2e9, 1);
  std::vector<std::string> set_lines = ExplainCandidate(a40s);
  EXPECT_EQ(set_lines[set_lines.size() - 2],
            "price: $240.00/month x 4 cards x (1 - 8%) = $883.20/month; weekly $250.24; hourly = "
            "monthly / 720 = $1.23");
}

// ---- Property: fit never returns a configuration that breaks a rule. ----

// Presets (guide profile) and a few real models (detailed profile: dense, MoE, sliding window).
const sizing::ModelShape& Model(const std::string& id) {
  static std::map<std::string, sizing::ModelShape> cache;
  auto it = cache.find(id);
  if (it == cache.end()) {
    auto shape = sizing::LoadModel(id, std::string(GPUHUB_SOURCE_DIR) + "/data");
    EXPECT_TRUE(shape.ok()) << shape.status().ToString();
    it = cache.emplace(id, shape.ok() ? *shape : sizing::ModelShape{}).first;
  }
  return it->second;
}

struct Scenario {
  std::string preset;
  sizing::Workload workload;
  Filters filters;
  std::string Describe() const {
    std::string s = preset + " " + std::string(sizing::MethodName(workload.method)) + " " +
                    std::string(sizing::PrecisionName(workload.precision)) + " kv " +
                    std::string(sizing::PrecisionName(workload.kv_precision)) + " ctx " +
                    std::to_string(workload.context_tokens);
    if (filters.cuda_only) s += " cuda";
    if (filters.region) s += " " + *filters.region;
    if (filters.in_stock) s += " in-stock";
    if (filters.max_monthly_micros) s += " budget " + std::to_string(*filters.max_monthly_micros);
    if (filters.gpu) s += " gpu " + *filters.gpu;
    return s;
  }
};

std::vector<Scenario> AllScenarios() {
  std::vector<sizing::Workload> workloads;
  for (Precision p :
       {Precision::kFp32, Precision::kBf16, Precision::kFp8, Precision::kInt8, Precision::kInt4}) {
    for (Precision kv : {Precision::kFp16, Precision::kFp8}) {
      for (std::int64_t context : {1, 8192, 32768, 131072, 1'000'000}) {
        sizing::Workload w = Job(Method::kInference, p, context);
        w.kv_precision = kv;
        workloads.push_back(w);
      }
    }
  }
  for (Precision p : {Precision::kBf16, Precision::kFp32}) {
    workloads.push_back(Job(Method::kFullFineTune, p));
    sizing::Workload offload = Job(Method::kFullFineTune, p);
    offload.offload_optimizer = true;
    workloads.push_back(offload);
  }
  for (Precision p : {Precision::kBf16, Precision::kFp8, Precision::kFp32}) {
    workloads.push_back(Job(Method::kLora, p));
  }
  workloads.push_back(Job(Method::kQlora));
  sizing::Workload rank256 = Job(Method::kQlora);
  rank256.lora_rank = 256;
  workloads.push_back(rank256);

  std::vector<Filters> filters(1);
  {
    Filters f;
    f.cuda_only = true;
    filters.push_back(f);
    f = {};
    f.region = "PDX-1";
    filters.push_back(f);
    f = {};
    f.in_stock = true;
    filters.push_back(f);
    f = {};
    f.max_monthly_micros = Usd(2000);
    filters.push_back(f);
    f = {};
    f.gpu = "H100 SXM";
    filters.push_back(f);
    f = {};
    f.gpu = "RTX 4090";
    filters.push_back(f);
    f = {};
    f.cuda_only = true;
    f.in_stock = true;
    f.region = "IAD-1";
    f.max_monthly_micros = Usd(5000);
    filters.push_back(f);
  }
  std::vector<std::string> models = sizing::PresetNames();
  for (const char* real : {"meta-llama/Llama-3.1-8B", "mistralai/Mixtral-8x7B-v0.1",
                           "google/gemma-2-9b", "meta-llama/Llama-3.1-70B"}) {
    models.push_back(real);
  }
  std::vector<Scenario> out;
  for (const auto& preset : models) {
    for (const auto& w : workloads) {
      for (const auto& f : filters) {
        if (f.gpu && NeedsFp8(w) && !Fleet().FindTerm(*f.gpu)->fp8) continue;  // an input error
        out.push_back({preset, w, f});
      }
    }
  }
  return out;
}

TEST(FitProperties, NoReturnedConfigurationBreaksARule) {
  const Catalog& c = Fleet();
  int checked = 0;
  for (const Scenario& s : AllScenarios()) {
    SCOPED_TRACE(s.Describe());
    auto fit = Fit(c, Model(s.preset), s.workload, s.filters);
    ASSERT_TRUE(fit.ok()) << fit.status().ToString();
    const FitResult& r = *fit;
    bool fp8 = NeedsFp8(s.workload);
    bool full = s.workload.method == Method::kFullFineTune;
    bool any_single = false, any_set = false;
    std::set<std::pair<std::string, int>> seen;
    for (std::size_t i = 0; i < r.ranked.size(); ++i) {
      const Candidate& x = r.ranked[i];
      const catalog::TermGpu& g = *x.gpu;
      ++checked;
      seen.insert({g.name, x.count});
      (x.count == 1 ? any_single : any_set) = true;
      // Rented in that count.
      EXPECT_TRUE(g.AllowsCount(x.count)) << g.name << " x" << x.count;
      // Filters.
      if (s.filters.cuda_only) {
        EXPECT_EQ(g.stack, catalog::Stack::kCuda);
      }
      if (s.filters.region) {
        EXPECT_TRUE(g.InRegion(*s.filters.region));
      }
      if (s.filters.in_stock) {
        EXPECT_GE(g.free_now, x.count);
      }
      if (s.filters.gpu) {
        EXPECT_EQ(g.name, *s.filters.gpu);
      }
      if (s.filters.max_monthly_micros) {
        EXPECT_LE(x.monthly_micros, *s.filters.max_monthly_micros);
      }
      EXPECT_EQ(x.in_stock, g.free_now >= x.count);
      // FP8 needs an FP8 card.
      if (fp8) {
        EXPECT_TRUE(g.fp8) << g.name;
      }
      // Full fine-tuning across cards: fast link, within the sharded-training limit.
      if (full && x.count > 1) {
        EXPECT_NE(g.interconnect, catalog::Interconnect::kPcie) << g.name;
        EXPECT_TRUE(catalog::AllowsShardedTraining(g.sharded_training, x.count))
            << g.name << " x" << x.count;
      }
      // Fits: each card holds its share, recomputed independently.
      sizing::Workload per = s.workload;
      per.gpus = x.count;
      if (full && x.count > 1) per.zero_stage = 3;
      auto e = sizing::EstimateMemory(Model(s.preset), per);
      ASSERT_TRUE(e.ok());
      // A card holds the framework's peak and what lies outside its allocator (CUDA context).
      EXPECT_DOUBLE_EQ(x.per_card_bytes, e->per_gpu_bytes + e->outside_allocator.bytes);
      EXPECT_LE(x.per_card_bytes, g.vram_gb * 1e9) << g.name << " x" << x.count;
      if (x.count == 1) {
        EXPECT_LE(r.required.card_bytes(), g.vram_gb * 1e9);
      }
      EXPECT_DOUBLE_EQ(x.headroom_bytes_per_card, g.vram_gb * 1e9 - x.per_card_bytes);
      EXPECT_EQ(x.tight, x.headroom_bytes_per_card < (x.count == 1 ? 5e9 : 2e9));
      // Price = monthly x count x (1 - discount), exact.
      std::int64_t keep_ppm = 1'000'000 - c.DiscountPpm(x.count);
      EXPECT_EQ(x.monthly_micros, *MulDivHalfEven(g.monthly_micros * x.count, keep_ppm, 1'000'000));
      EXPECT_EQ(x.weekly_micros, *MulDivHalfEven(g.weekly_micros * x.count, keep_ppm, 1'000'000));
      EXPECT_EQ(x.hourly_micros,
                *MulDivHalfEven(g.monthly_micros * x.count, keep_ppm, 1'000'000LL * 720));
      EXPECT_EQ(x.discount_ppm, x.count == 1 ? 0 : c.DiscountPpm(x.count));
      // Cheapest first.
      if (i > 0) {
        EXPECT_GE(x.monthly_micros, r.ranked[i - 1].monthly_micros);
      }
      // Decode ceiling for inference only: one card's bandwidth / weight bytes read per token.
      if (s.workload.method == Method::kInference) {
        EXPECT_DOUBLE_EQ(x.decode_ceiling_tokens_per_s,
                         g.bandwidth_gb_per_s * 1e9 / e->decode_weight_bytes);
      } else {
        EXPECT_EQ(x.decode_ceiling_tokens_per_s, 0);
      }
    }
    // Sets only when no single card is left standing, and never mixed with single cards.
    EXPECT_FALSE(any_single && any_set);
    EXPECT_EQ(r.considered_sets, !any_single);
    // Every candidate is accounted for exactly once: ranked or excluded with a reason.
    for (const auto& x : r.excluded) {
      EXPECT_FALSE(x.reason.empty());
      EXPECT_TRUE(seen.insert({x.gpu, x.count}).second) << x.gpu << " x" << x.count << " twice";
      if (x.count > 1 && any_single) {
        EXPECT_EQ(x.kind, Exclusion::kSingleCardFits);
      }
      // Nothing cheaper is left out without cause: every exclusion is checked on its own terms.
      const catalog::TermGpu& g = *c.FindTerm(x.gpu);
      SCOPED_TRACE(x.gpu + " x" + std::to_string(x.count) + ": " + x.reason);
      switch (x.kind) {
        case Exclusion::kGpuFilter:
          EXPECT_TRUE(s.filters.gpu && *s.filters.gpu != g.name);
          break;
        case Exclusion::kCountNotRented:
          EXPECT_FALSE(g.AllowsCount(x.count));
          break;
        case Exclusion::kNotCuda:
          EXPECT_TRUE(s.filters.cuda_only && g.stack != catalog::Stack::kCuda);
          break;
        case Exclusion::kRegion:
          EXPECT_TRUE(s.filters.region && !g.InRegion(*s.filters.region));
          break;
        case Exclusion::kNeedsFp8:
          EXPECT_TRUE(fp8 && !g.fp8);
          break;
        case Exclusion::kSingleCardFits:
          EXPECT_TRUE(any_single && x.count > 1);
          break;
        case Exclusion::kShardedTraining:
          EXPECT_TRUE(full && x.count > 1 &&
                      !catalog::AllowsShardedTraining(g.sharded_training, x.count));
          break;
        case Exclusion::kCannotSize:
          EXPECT_GT(x.count, 1);
          break;
        case Exclusion::kDoesNotFit: {
          sizing::Workload per = s.workload;
          per.gpus = x.count;
          if (full && x.count > 1) per.zero_stage = 3;
          auto e = sizing::EstimateMemory(Model(s.preset), per);
          ASSERT_TRUE(e.ok());
          EXPECT_GT(e->card_bytes(), g.vram_gb * 1e9);
          break;
        }
        case Exclusion::kSmallerSetFits: {
          bool smaller_fits = false;
          for (const auto& kept : r.ranked) {
            smaller_fits |= kept.gpu == &g && kept.count < x.count;
          }
          for (const auto& other : r.excluded) {
            smaller_fits |=
                other.gpu == x.gpu && other.count < x.count &&
                (other.kind == Exclusion::kOutOfStock || other.kind == Exclusion::kOverBudget);
          }
          EXPECT_TRUE(smaller_fits);
          break;
        }
        case Exclusion::kOutOfStock:
          EXPECT_TRUE(s.filters.in_stock && g.free_now < x.count);
          break;
        case Exclusion::kOverBudget: {
          auto price = catalog::SetPriceMicros(c, g, x.count, catalog::Term::kMonthly);
          ASSERT_TRUE(price.ok());
          EXPECT_TRUE(s.filters.max_monthly_micros && *price > *s.filters.max_monthly_micros);
          break;
        }
      }
    }
    EXPECT_EQ(seen.size(), c.term.size() * 4) << "every card x {1, 2, 4, 8}";
    if (r.ranked.empty()) {
      EXPECT_FALSE(r.reason.empty());
    }
  }
  EXPECT_GT(checked, 1000);
}

// Fit is deterministic and never claims a cheaper configuration was excluded by memory alone.
TEST(FitProperties, NoCheaperFittingCandidateLeftOut) {
  const Catalog& c = Fleet();
  for (const Scenario& s : AllScenarios()) {
    auto r = Fit(c, Model(s.preset), s.workload, s.filters);
    ASSERT_TRUE(r.ok());
    if (r->ranked.empty()) continue;
    for (const auto& x : r->excluded) {
      if (x.kind != Exclusion::kSmallerSetFits) continue;
      // A larger set is always dearer than the smaller set of the same card.
      const catalog::TermGpu* g = c.FindTerm(x.gpu);
      auto price = catalog::SetPriceMicros(c, *g, x.count, catalog::Term::kMonthly);
      ASSERT_TRUE(price.ok());
      for (const auto& kept : r->ranked) {
        if (kept.gpu == g) {
          EXPECT_GT(*price, kept.monthly_micros) << s.Describe();
        }
      }
    }
  }
}

// Without the exclusions (POST /v1/fit without why_not) the answer is the same: the same
// ranking, and when nothing fits the same reason and the same exclusions with their sentences
// (the reason quotes them); otherwise no exclusions are listed.
TEST(FitProperties, ExclusionsOnlyWhenAskedOrNothingFits) {
  const Catalog& c = Fleet();
  int without = 0, nothing_fits = 0;
  for (const Scenario& s : AllScenarios()) {
    SCOPED_TRACE(s.Describe());
    auto full = Fit(c, Model(s.preset), s.workload, s.filters);
    auto lean = Fit(c, Model(s.preset), s.workload, s.filters, {.exclusions = false});
    ASSERT_TRUE(full.ok() && lean.ok());
    ASSERT_EQ(lean->ranked.size(), full->ranked.size());
    for (std::size_t i = 0; i < full->ranked.size(); ++i) {
      EXPECT_EQ(lean->ranked[i].gpu, full->ranked[i].gpu);
      EXPECT_EQ(lean->ranked[i].count, full->ranked[i].count);
      EXPECT_EQ(lean->ranked[i].monthly_micros, full->ranked[i].monthly_micros);
    }
    EXPECT_EQ(lean->reason, full->reason);
    EXPECT_EQ(lean->considered_sets, full->considered_sets);
    EXPECT_FALSE(full->excluded.empty());
    for (const Excluded& x : full->excluded) EXPECT_FALSE(x.reason.empty());
    if (!full->ranked.empty()) {
      EXPECT_TRUE(lean->excluded.empty());
      without += 1;
      continue;
    }
    nothing_fits += 1;
    ASSERT_EQ(lean->excluded.size(), full->excluded.size());
    for (std::size_t i = 0; i < full->excluded.size(); ++i) {
      const Excluded& a = lean->excluded[i];
      const Excluded& b = full->excluded[i];
      EXPECT_EQ(a.gpu, b.gpu);
      EXPECT_EQ(a.count, b.count);
      EXPECT_EQ(a.kind, b.kind);
      EXPECT_EQ(a.reason, b.reason);
    }
  }
  EXPECT_GT(without, 100);
  EXPECT_GT(nothing_fits, 10);
}

TEST(Fit, ExclusionNames) {
  EXPECT_EQ(ExclusionName(Exclusion::kDoesNotFit), "does_not_fit");
  EXPECT_EQ(ExclusionName(Exclusion::kOverBudget), "over_budget");
  EXPECT_EQ(ExclusionName(Exclusion::kSingleCardFits), "single_card_fits");
  EXPECT_EQ(ConfigurationName("A100 SXM", 4), "4x A100 SXM");
  EXPECT_EQ(ConfigurationName("A100 SXM", 1), "A100 SXM");
}

}  // namespace
}  // namespace gpuhub::fit
