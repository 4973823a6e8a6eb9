#include "catalog/catalog.h"

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <set>

#include "catalog/limits.h"
#include "catalog/toml_fields.h"
#include "core/file.h"
#include "core/money.h"
#include "core/strings.h"

namespace gpuhub::catalog {

std::string_view StackName(Stack stack) { return stack == Stack::kCuda ? "CUDA" : "ROCm"; }

std::string_view InterconnectName(Interconnect interconnect) {
  switch (interconnect) {
    case Interconnect::kNvSwitch:
      return "nvswitch";
    case Interconnect::kNvLinkBridge:
      return "nvlink-bridge";
    case Interconnect::kInfinityFabric:
      return "infinity-fabric";
    case Interconnect::kPcie:
      return "pcie";
  }
  return "?";
}

std::string_view ShardedTrainingName(ShardedTraining limit) {
  switch (limit) {
    case ShardedTraining::kUpTo8:
      return "up-to-8";
    case ShardedTraining::kEightWayOnly:
      return "8-way-only";
    case ShardedTraining::kPairs:
      return "pairs";
    case ShardedTraining::kDataParallelOnly:
      return "data-parallel-only";
    case ShardedTraining::kSingleCard:
      return "single-card";
  }
  return "?";
}

bool AllowsShardedTraining(ShardedTraining limit, int count) {
  switch (limit) {
    case ShardedTraining::kUpTo8:
      return count >= 2 && count <= 8;
    case ShardedTraining::kEightWayOnly:
      return count == 8;
    case ShardedTraining::kPairs:
      return count == 2;
    case ShardedTraining::kDataParallelOnly:
    case ShardedTraining::kSingleCard:
      return false;
  }
  return false;
}

std::string_view ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kAmpere:
      return "ampere";
    case Architecture::kAda:
      return "ada";
    case Architecture::kHopper:
      return "hopper";
    case Architecture::kBlackwell:
      return "blackwell";
    case Architecture::kCdna3:
      return "cdna3";
    case Architecture::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view TermName(Term term) {
  switch (term) {
    case Term::kMonthly:
      return "monthly";
    case Term::kWeekly:
      return "weekly";
    case Term::kHourly:
      return "hourly";
  }
  return "?";
}

bool TermGpu::AllowsCount(int count) const {
  return std::find(counts.begin(), counts.end(), count) != counts.end();
}

bool TermGpu::InRegion(std::string_view region_code) const {
  std::string wanted = ToLower(region_code);
  for (const auto& r : regions) {
    if (ToLower(r) == wanted) return true;
  }
  return false;
}

namespace {

// "H100 SXM", "h100-sxm", "h100_sxm", "H100SXM" all name the same card.
std::string NormalizeName(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

Status ParseDiscounts(const toml::table& root, std::string_view source, Catalog& c) {
  return ForEachTable(
      root, "multi_card_discount", source, kMaxCardsPerSet,
      [&](const toml::table& t, std::size_t i) -> Status {
        Where where(source, "[[multi_card_discount]] #" + std::to_string(i + 1), LineOf(t));
        Fields f(t, where);
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t count, f.Integer("count", true, 2, kMaxCardsPerSet));
        const toml::node* percent_node = f.Find("percent");
        if (percent_node == nullptr)
          return where.Error(nullptr, "percent", "is missing (like \"5\")");
        std::string text;
        if (percent_node->is_integer()) {
          text = std::to_string(percent_node->as_integer()->get());
        } else if (auto s = percent_node->value<std::string>()) {
          text = *s;
        } else {
          return where.Error(
              percent_node, "percent",
              "must be a decimal string like \"5\" or \"7.5\", got " + Describe(*percent_node));
        }
        // Percent with up to 4 decimals -> parts per million (5% = 50'000 ppm).
        auto micros_of_percent = ParseDecimalMicros(text, 4);
        if (!micros_of_percent.ok()) {
          return where.Error(percent_node, "percent", micros_of_percent.status().message());
        }
        std::int64_t ppm = *micros_of_percent / 100;
        if (ppm >= kPpm) return where.Error(percent_node, "percent", "must be below 100");
        for (const auto& d : c.discounts) {
          if (d.count == count) {
            return where.Error(
                f.Find("count"), "count",
                "a discount for " + std::to_string(count) + " cards is already listed");
          }
        }
        GPUHUB_RETURN_IF_ERROR(f.UnknownKeys());
        c.discounts.push_back({static_cast<int>(count), ppm});
        return Status::Ok();
      });
}

Status ParseRegions(const toml::table& root, std::string_view source, Catalog& c) {
  return ForEachTable(
      root, "region", source, kMaxRegions, [&](const toml::table& t, std::size_t i) -> Status {
        Where where(source, "[[region]] #" + std::to_string(i + 1), LineOf(t));
        Fields f(t, where);
        GPUHUB_ASSIGN_OR_RETURN(std::string code, f.String("code"));
        GPUHUB_ASSIGN_OR_RETURN(std::string city, f.String("city"));
        if (c.FindRegion(code) != nullptr) {
          return where.Error(f.Find("code"), "code", "region " + Quote(code) + " is listed twice");
        }
        GPUHUB_RETURN_IF_ERROR(f.UnknownKeys());
        c.regions.push_back({std::move(code), std::move(city)});
        return Status::Ok();
      });
}

Result<std::vector<int>> ParseCounts(Fields& f, const Where& where, const Catalog& c) {
  const toml::node* node = f.Find("counts");
  std::vector<int> counts;
  if (node == nullptr) {
    counts.push_back(1);
    for (const auto& d : c.discounts) counts.push_back(d.count);
    return counts;
  }
  const toml::array* array = node->as_array();
  if (array == nullptr || array->empty()) {
    return where.Error(node, "counts",
                       "must be a non-empty array of card counts like [1, 2, 4, 8]");
  }
  for (const auto& element : *array) {
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t n, f.IntegerValue(&element, "counts", 1, kMaxCardsPerSet));
    if (n > 1 && std::none_of(c.discounts.begin(), c.discounts.end(),
                              [&](const Discount& d) { return d.count == n; })) {
      return where.Error(&element, "counts",
                         std::to_string(n) + " cards has no [[multi_card_discount]] entry");
    }
    if (!counts.empty() && n <= counts.back()) {
      return where.Error(&element, "counts", "must be ascending without repeats");
    }
    counts.push_back(static_cast<int>(n));
  }
  return counts;
}

Result<ShardedTraining> ParseShardedTraining(const toml::node* node, const Where& where,
                                             const std::string& text) {
  for (ShardedTraining s :
       {ShardedTraining::kUpTo8, ShardedTraining::kEightWayOnly, ShardedTraining::kPairs,
        ShardedTraining::kDataParallelOnly, ShardedTraining::kSingleCard}) {
    if (text == ShardedTrainingName(s)) return s;
  }
  return where.Error(
      node, "sharded_training",
      "must be up-to-8, 8-way-only, pairs, data-parallel-only or single-card, got " + Quote(text));
}

// The keys a [[term]] and a [[spot]] card both start with: its name (which then stands for the
// card's number in `where`), refused when `find` already knows it, vram_gb and memory.
template <typename Card>
Status ParseCardHead(const toml::table& t, std::string_view section,
                     const Card* (Catalog::*find)(std::string_view) const, const Catalog& c,
                     Fields& f, Where& where, Card& g) {
  g.source_line = LineOf(t);
  GPUHUB_ASSIGN_OR_RETURN(g.name, f.String("name"));
  where.set_what(std::string(section) + " " + Quote(g.name));
  if ((c.*find)(g.name) != nullptr) {
    return where.Error(f.Find("name"), "name", "card " + Quote(g.name) + " is listed twice");
  }
  GPUHUB_ASSIGN_OR_RETURN(auto vram, f.Number("vram_gb", kMaxVramGb, false));
  g.vram_gb = *vram;
  GPUHUB_ASSIGN_OR_RETURN(g.memory, f.String("memory"));
  return Status::Ok();
}

// fp8_dense_tflops (absent: no FP8 figure), tflops_source (required once a figure is given) and
// architecture (absent: unknown). `bf16` is the card's bf16_dense_tflops, read by the caller.
Status ParseCompute(Fields& f, const Where& where, std::optional<double> bf16,
                    TensorThroughput& out) {
  out.bf16_dense_tflops = bf16;
  if (f.Find("fp8_dense_tflops") != nullptr) {
    GPUHUB_ASSIGN_OR_RETURN(out.fp8_dense_tflops, f.Number("fp8_dense_tflops", kMaxTflops, true));
  }
  GPUHUB_ASSIGN_OR_RETURN(out.source, f.String("tflops_source", false));
  if ((out.bf16_dense_tflops || out.fp8_dense_tflops) && out.source.empty()) {
    return where.Error(nullptr, "tflops_source",
                       "is missing: say where the TFLOPS figures come from (a datasheet)");
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string arch, f.String("architecture", false));
  if (!arch.empty()) {
    bool known = false;
    for (Architecture a : {Architecture::kAmpere, Architecture::kAda, Architecture::kHopper,
                           Architecture::kBlackwell, Architecture::kCdna3}) {
      if (arch == ArchitectureName(a)) {
        out.architecture = a;
        known = true;
      }
    }
    if (!known) {
      return where.Error(f.Find("architecture"), "architecture",
                         "must be ampere, ada, hopper, blackwell or cdna3, got " + Quote(arch));
    }
  }
  return Status::Ok();
}

Status ParseTermGpu(const toml::table& t, std::size_t i, std::string_view source, Catalog& c) {
  Where where(source, "[[term]] #" + std::to_string(i + 1), LineOf(t));
  Fields f(t, where);
  TermGpu g;
  GPUHUB_RETURN_IF_ERROR(ParseCardHead(t, "[[term]]", &Catalog::FindTerm, c, f, where, g));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t power, f.Integer("power_w", false, 1, kMaxPowerW));
  if (power > 0) g.power_w = static_cast<int>(power);
  GPUHUB_ASSIGN_OR_RETURN(auto bandwidth,
                          f.Number("bandwidth_gb_per_s", kMaxBandwidthGbPerS, false));
  g.bandwidth_gb_per_s = *bandwidth;
  GPUHUB_ASSIGN_OR_RETURN(g.fp8, f.Bool("fp8", true));
  std::optional<double> bf16;
  if (f.Find("bf16_dense_tflops") != nullptr) {
    GPUHUB_ASSIGN_OR_RETURN(bf16, f.Number("bf16_dense_tflops", kMaxTflops, true));
  }
  GPUHUB_RETURN_IF_ERROR(ParseCompute(f, where, bf16, g.compute));
  if (g.compute.fp8_dense_tflops && !g.fp8) {
    return where.Error(f.Find("fp8_dense_tflops"), "fp8_dense_tflops",
                       "is given for a card without FP8 (fp8 = false)");
  }

  GPUHUB_ASSIGN_OR_RETURN(std::string stack, f.String("stack"));
  if (stack == "cuda") {
    g.stack = Stack::kCuda;
  } else if (stack == "rocm") {
    g.stack = Stack::kRocm;
  } else {
    return where.Error(f.Find("stack"), "stack", "must be cuda or rocm, got " + Quote(stack));
  }
  GPUHUB_ASSIGN_OR_RETURN(g.link, f.String("link"));
  GPUHUB_ASSIGN_OR_RETURN(std::string interconnect, f.String("interconnect"));
  bool interconnect_ok = false;
  for (Interconnect k : {Interconnect::kNvSwitch, Interconnect::kNvLinkBridge,
                         Interconnect::kInfinityFabric, Interconnect::kPcie}) {
    if (interconnect == InterconnectName(k)) {
      g.interconnect = k;
      interconnect_ok = true;
    }
  }
  if (!interconnect_ok) {
    return where.Error(
        f.Find("interconnect"), "interconnect",
        "must be nvswitch, nvlink-bridge, infinity-fabric or pcie, got " + Quote(interconnect));
  }
  GPUHUB_ASSIGN_OR_RETURN(g.link_gb_per_s, f.Number("link_gb_per_s", kMaxBandwidthGbPerS, true));
  GPUHUB_ASSIGN_OR_RETURN(g.link_optional, f.Bool("link_optional", false));
  GPUHUB_ASSIGN_OR_RETURN(std::string sharded, f.String("sharded_training"));
  GPUHUB_ASSIGN_OR_RETURN(g.sharded_training,
                          ParseShardedTraining(f.Find("sharded_training"), where, sharded));
  if (g.interconnect == Interconnect::kPcie &&
      (g.sharded_training != ShardedTraining::kDataParallelOnly &&
       g.sharded_training != ShardedTraining::kSingleCard)) {
    // Spec §6: sharded full fine-tuning needs NVLink, NVSwitch or Infinity Fabric.
    return where.Error(f.Find("sharded_training"), "sharded_training",
                       "a PCIe-linked card cannot shard training; use data-parallel-only or "
                       "single-card");
  }

  GPUHUB_ASSIGN_OR_RETURN(g.counts, ParseCounts(f, where, c));
  if (g.sharded_training == ShardedTraining::kEightWayOnly && !g.AllowsCount(8)) {
    return where.Error(f.Find("counts"), "counts", "8-way-only sharded training needs 8 in counts");
  }
  if (g.sharded_training == ShardedTraining::kPairs && !g.AllowsCount(2)) {
    return where.Error(f.Find("counts"), "counts", "sharded training in pairs needs 2 in counts");
  }

  if (const toml::node* regions = f.Find("regions")) {
    const toml::array* array = regions->as_array();
    if (array == nullptr || array->empty()) {
      return where.Error(regions, "regions", "must be a non-empty array of region codes");
    }
    for (const auto& element : *array) {
      auto code = element.value<std::string>();
      if (!code) return where.Error(&element, "regions", "must hold region codes (strings)");
      const Region* region = c.FindRegion(*code);
      if (region == nullptr) {
        return where.Error(
            &element, "regions",
            "unknown region " + Quote(*code) + " (regions: " + c.RegionCodes() + ")");
      }
      g.regions.push_back(region->code);
    }
  } else {
    for (const auto& r : c.regions) g.regions.push_back(r.code);
  }
  if (g.regions.empty()) {
    return where.Error(nullptr, "regions", "no region is listed ([[region]]) for this card");
  }

  GPUHUB_ASSIGN_OR_RETURN(std::int64_t free_now, f.Integer("free_now", false, 0, kMaxFreeNow));
  g.free_now = static_cast<int>(free_now);
  if (const toml::node* nvme = f.Find("local_nvme_tb")) {
    auto text = nvme->value<std::string>();
    if (!text || !ParseDecimalMicros(*text, 3).ok()) {
      return where.Error(nvme, "local_nvme_tb",
                         "must be a decimal string like \"0.5\", got " + Describe(*nvme));
    }
    g.local_nvme_tb = *text;
  }
  GPUHUB_ASSIGN_OR_RETURN(auto monthly, f.Usd("monthly_usd", true, false));
  g.monthly_micros = *monthly;
  GPUHUB_ASSIGN_OR_RETURN(auto weekly, f.Usd("weekly_usd", false, false));
  if (weekly) {
    g.weekly_micros = *weekly;
    if (g.weekly_micros > g.monthly_micros) {
      return where.Error(f.Find("weekly_usd"), "weekly_usd", "is above the monthly price");
    }
  } else {
    g.weekly_derived = true;  // priced below, once the fleet's ratio is known
  }
  GPUHUB_RETURN_IF_ERROR(f.UnknownKeys());
  c.term.push_back(std::move(g));
  return Status::Ok();
}

// spec §5: 80% of memory / 16 B per param, floored; the 8-GPU figure floored to a multiple of 5 B.
// Integer arithmetic on MB of memory so 80 GB gives exactly 4 B, not 3.9999.
void LargestFullTrain(SpotGpu& g) {
  std::int64_t vram_mb = static_cast<std::int64_t>(std::llround(g.vram_gb * 1000));
  // params (B) = vram_mb * 1e6 * 0.8 / 16 / 1e9 = vram_mb / 20'000
  g.largest_full_train_b_1gpu = vram_mb / 20'000;
  std::int64_t eight = vram_mb * 8 / 20'000;
  g.largest_full_train_b_8gpu = eight - eight % 5;
}

Status ParseSpotGpu(const toml::table& t, std::size_t i, std::string_view source, Catalog& c) {
  Where where(source, "[[spot]] #" + std::to_string(i + 1), LineOf(t));
  Fields f(t, where);
  SpotGpu g;
  GPUHUB_RETURN_IF_ERROR(ParseCardHead(t, "[[spot]]", &Catalog::FindSpot, c, f, where, g));
  GPUHUB_ASSIGN_OR_RETURN(g.bandwidth_gb_per_s,
                          f.Number("bandwidth_gb_per_s", kMaxBandwidthGbPerS, true));
  GPUHUB_ASSIGN_OR_RETURN(g.bf16_dense_tflops, f.Number("bf16_dense_tflops", kMaxTflops, true));
  GPUHUB_RETURN_IF_ERROR(ParseCompute(f, where, g.bf16_dense_tflops, g.compute));
  GPUHUB_ASSIGN_OR_RETURN(g.opening_ask_micros_per_hour,
                          f.Usd("opening_ask_usd_per_hour", true, true));
  if (const toml::node* term = f.Find("term")) {
    auto name = term->value<std::string>();
    const TermGpu* match = name ? c.FindTerm(*name) : nullptr;
    if (match == nullptr) {
      return where.Error(
          term, "term",
          "must name a card of the term fleet (" + c.TermNames() + "), got " + Describe(*term));
    }
    g.term_name = match->name;
  }
  LargestFullTrain(g);
  GPUHUB_RETURN_IF_ERROR(f.UnknownKeys());
  c.spot.push_back(std::move(g));
  return Status::Ok();
}

// Prices every card without a published weekly price from the fleet's weekly/monthly ratio.
Status DeriveWeeklyPrices(std::string_view source, Catalog& c) {
  std::int64_t weekly_sum = 0, monthly_sum = 0;
  for (const auto& g : c.term) {
    if (g.weekly_derived) continue;
    if (!CheckedAdd(weekly_sum, g.weekly_micros, &weekly_sum) ||
        !CheckedAdd(monthly_sum, g.monthly_micros, &monthly_sum)) {
      return Status::InvalidArgument(std::string(source) + ": prices overflow when summed");
    }
  }
  c.weekly_ratio_numerator_micros = weekly_sum;
  c.weekly_ratio_denominator_micros = monthly_sum;
  for (auto& g : c.term) {
    g.hourly_micros = *MulDivHalfEven(g.monthly_micros, 1, kHoursPerMonth);
    if (!g.weekly_derived) continue;
    if (monthly_sum == 0) {
      return Status::InvalidArgument(std::string(source) + ":" + std::to_string(g.source_line) +
                                     ": [[term]] " + Quote(g.name) +
                                     " field 'weekly_usd': is missing and no card publishes a "
                                     "weekly price to derive it from");
    }
    // One rounding, half-even to the cent: monthly x ratio / 10'000 micros per cent.
    std::int64_t divisor = 0;
    if (!CheckedMul(monthly_sum, 10'000, &divisor)) {
      return Status::InvalidArgument(std::string(source) + ": prices overflow when summed");
    }
    auto cents = MulDivHalfEven(g.monthly_micros, weekly_sum, divisor);
    if (!cents.ok()) return cents.status().WithContext(source);
    g.weekly_micros = *cents * 10'000;
  }
  return Status::Ok();
}

}  // namespace

const TermGpu* Catalog::FindTerm(std::string_view name) const {
  std::string wanted = NormalizeName(name);
  for (const auto& g : term) {
    if (NormalizeName(g.name) == wanted) return &g;
  }
  return nullptr;
}

const SpotGpu* Catalog::FindSpot(std::string_view name) const {
  std::string wanted = NormalizeName(name);
  for (const auto& g : spot) {
    if (NormalizeName(g.name) == wanted) return &g;
  }
  return nullptr;
}

const Region* Catalog::FindRegion(std::string_view code) const {
  std::string wanted = ToLower(code);
  for (const auto& r : regions) {
    if (ToLower(r.code) == wanted) return &r;
  }
  return nullptr;
}

std::int64_t Catalog::DiscountPpm(int count) const {
  for (const auto& d : discounts) {
    if (d.count == count) return d.ppm;
  }
  return 0;
}

std::string Catalog::TermNames() const {
  std::string out;
  for (const auto& g : term) out += (out.empty() ? "" : ", ") + g.name;
  return out;
}

std::string Catalog::RegionCodes() const {
  std::string out;
  for (const auto& r : regions) out += (out.empty() ? "" : ", ") + r.code;
  return out;
}

Result<Catalog> ParseCatalog(std::string_view toml_text, std::string_view source_name) {
  std::string source(source_name.empty() ? "catalog" : source_name);
  if (toml_text.size() > kMaxCatalogBytes) {
    return Status::InvalidArgument(source + ": larger than " + std::to_string(kMaxCatalogBytes) +
                                   " bytes");
  }
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(source + ":" + std::to_string(e.source().begin.line) + ":" +
                                   std::to_string(e.source().begin.column) + ": " +
                                   std::string(e.description()));
  }
  Catalog c;
  c.source = source;
  for (const auto& [key, node] : root) {
    std::string_view k = key.str();
    if (k != "multi_card_discount" && k != "region" && k != "term" && k != "spot" &&
        k != "card_specs") {
      return Where(source, "", LineOf(node))
          .Error(&node, k,
                 "unknown top-level field (expected [[multi_card_discount]], "
                 "[[region]], [[term]], [[spot]], [[card_specs]])");
    }
  }
  GPUHUB_RETURN_IF_ERROR(ParseDiscounts(root, source, c));
  std::sort(c.discounts.begin(), c.discounts.end(),
            [](const Discount& a, const Discount& b) { return a.count < b.count; });
  GPUHUB_RETURN_IF_ERROR(ParseRegions(root, source, c));
  if (c.regions.empty()) {
    return Status::InvalidArgument(source + ":1: no [[region]] is listed");
  }
  GPUHUB_RETURN_IF_ERROR(ForEachTable(
      root, "term", source, kMaxTermGpus,
      [&](const toml::table& t, std::size_t i) { return ParseTermGpu(t, i, source, c); }));
  if (c.term.empty()) return Status::InvalidArgument(source + ":1: no [[term]] card is listed");
  GPUHUB_RETURN_IF_ERROR(ForEachTable(
      root, "spot", source, kMaxSpotGpus,
      [&](const toml::table& t, std::size_t i) { return ParseSpotGpu(t, i, source, c); }));
  GPUHUB_RETURN_IF_ERROR(DeriveWeeklyPrices(source, c));
  GPUHUB_RETURN_IF_ERROR(ParseCardSpecs(root, source, c));
  return c;
}

Result<Catalog> LoadCatalog(const std::string& path) {
  GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxCatalogBytes));
  return ParseCatalog(text, path);
}

Result<std::int64_t> SetPriceMicros(const Catalog& catalog, const TermGpu& gpu, int count,
                                    Term term) {
  if (!gpu.AllowsCount(count)) {
    std::string allowed;
    for (int n : gpu.counts) allowed += (allowed.empty() ? "" : ", ") + std::to_string(n);
    return Status::InvalidArgument(gpu.name + " is rented in sets of " + allowed + ", not " +
                                   std::to_string(count));
  }
  std::int64_t list = term == Term::kWeekly ? gpu.weekly_micros : gpu.monthly_micros;
  std::int64_t gross = 0;
  if (!CheckedMul(list, count, &gross)) return Status::InvalidArgument("price overflows");
  std::int64_t keep_ppm = kPpm - catalog.DiscountPpm(count);
  // Hourly of a set: the set's monthly price / 720, rounded once.
  std::int64_t divisor = term == Term::kHourly ? kPpm * kHoursPerMonth : kPpm;
  return MulDivHalfEven(gross, keep_ppm, divisor);
}

double UsdPerGbMonth(const TermGpu& gpu) { return MicrosToUsd(gpu.monthly_micros) / gpu.vram_gb; }

double GbPerSecondPerUsdMonth(const TermGpu& gpu) {
  return gpu.bandwidth_gb_per_s / MicrosToUsd(gpu.monthly_micros);
}

double BreakEvenHours(std::int64_t monthly_micros, std::int64_t hourly_rate_micros) {
  if (hourly_rate_micros <= 0) return 0;
  return static_cast<double>(monthly_micros) / static_cast<double>(hourly_rate_micros);
}

std::string FormatUsd(std::int64_t micros) {
  bool negative = micros < 0;
  auto cents = MulDivHalfEven(negative ? -micros : micros, 1, 10'000);
  std::int64_t c = cents.ok() ? *cents : 0;
  std::string whole = std::to_string(c / 100);
  std::string grouped;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) grouped += ',';
    grouped += whole[i];
  }
  std::string frac = std::to_string(c % 100);
  if (frac.size() < 2) frac.insert(0, "0");
  return (negative ? "-" : "") + grouped + "." + frac;
}

std::string FormatPercent(std::int64_t ppm) {
  std::string text = FormatMicros(ppm * 100, 4);
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + "%";
}

double MicrosToUsd(std::int64_t micros) {
  return static_cast<double>(micros) / static_cast<double>(kMicrosPerUnit);
}

}  // namespace gpuhub::catalog
