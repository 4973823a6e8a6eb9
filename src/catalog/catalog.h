// The fleet catalog: what the platform rents (term fleet: weekly/monthly rentals) and what trades
// on the spot exchange, loaded from data/catalog.toml (spec/sizing.md §5). Data, not code: adding a
// card is an edit of the TOML file.
//
// Contract:
//  - LoadCatalog/ParseCatalog validate everything up front; a malformed file is invalid_argument
//  with
//    "<file>:<line>: <field>: <what is wrong>" (line of the offending value, or of its table when
//    the field is missing). A Catalog that loaded is internally consistent: every price is
//    positive, every region referenced exists, every card count has a discount entry (1 has none).
//  - Money is integer micro-USD, parsed from the decimal text of the file (never a double).
//    Derived figures and their rounding:
//      hourly  = monthly / 720, half-even to the micro-dollar;
//      weekly  = published, or monthly x (sum of published weekly / sum of the monthly prices of
//      the
//                same cards), half-even to the cent, marked derived (weekly_derived = true);
//      price of a set = list x count x (1 - discount(count)), half-even to the micro-dollar.
//  - Display-only ratios (USD per GB-month, GB/s per USD-month, break-even hours) are doubles
//    computed from the exact integers; nothing that moves money reads them.
//  - A Catalog is an immutable value after loading; share it freely across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuhub::catalog {

enum class Stack { kCuda, kRocm };
std::string_view StackName(Stack stack);  // "CUDA", "ROCm"

// The class of link between the cards of one machine.
enum class Interconnect { kNvSwitch, kNvLinkBridge, kInfinityFabric, kPcie };
std::string_view InterconnectName(Interconnect interconnect);  // "nvswitch", "nvlink-bridge", ...

// How many cards a full fine-tune may shard across (ZeRO-3 all-reduces every step, so it needs
// NVLink/NVSwitch/Infinity Fabric between every card of the set).
enum class ShardedTraining { kUpTo8, kEightWayOnly, kPairs, kDataParallelOnly, kSingleCard };
std::string_view ShardedTrainingName(ShardedTraining limit);  // "up-to-8", "8-way-only", ...
// Whether a full fine-tune may shard across `count` cards of this class (count >= 2).
bool AllowsShardedTraining(ShardedTraining limit, int count);

// The chip generation of a card: the throughput model's utilisation factors are per generation
// (docs/sizing-model.md §6). kUnknown when the catalog does not say.
enum class Architecture { kUnknown, kAmpere, kAda, kHopper, kBlackwell, kCdna3 };
std::string_view ArchitectureName(Architecture a);  // "ampere", "ada", ..., "unknown"

// Dense tensor throughput (no 2:4 sparsity) as the vendor publishes it, with where the figure
// comes from; nullopt where it is not published or the card has no such format (no FP8).
struct TensorThroughput {
  std::optional<double> bf16_dense_tflops;
  std::optional<double> fp8_dense_tflops;
  std::string source;  // "NVIDIA H100 datasheet: ..."; empty when neither figure is given
  Architecture architecture = Architecture::kUnknown;
};

// What a card does besides tensor math, for the use-case views of image and video generation,
// 3D rendering and VFX, and scientific computing ([[card_specs]] in the catalog, each entry with
// the datasheet it is copied from). nullopt where the cited source does not publish the figure.
struct GeneralSpecs {
  std::optional<double> fp32_tflops;         // non-tensor FP32 (CUDA cores / vector units)
  std::optional<double> fp64_tflops;         // FP64 vector
  std::optional<double> fp64_tensor_tflops;  // FP64 tensor / matrix units
  std::optional<bool> ecc;                   // ECC on the card's memory
  std::optional<int> rt_cores;               // ray-tracing cores (0: the card has none)
  std::optional<double> rt_tflops;           // RT core TFLOPS as published
  std::string source;                        // the datasheet's URL; empty: no [[card_specs]] entry
  std::string note;                          // what it says, in short
};

struct Region {
  std::string code;  // "DFW-1"
  std::string city;  // "Dallas"
};

// A multi-card discount: `count` cards get `ppm` parts-per-million off (5% = 50'000).
struct Discount {
  int count = 0;
  std::int64_t ppm = 0;
};

enum class Term { kMonthly, kWeekly, kHourly };
std::string_view TermName(Term term);  // "monthly", "weekly", "hourly"

struct TermGpu {
  std::string name;    // "H100 SXM"
  double vram_gb = 0;  // GB = 1e9 bytes
  std::string memory;  // "HBM3"
  std::optional<int> power_w;
  double bandwidth_gb_per_s = 0;
  bool fp8 = false;
  Stack stack = Stack::kCuda;
  std::string link;  // as published: "NVLink + NVSwitch 900 GB/s"
  Interconnect interconnect = Interconnect::kPcie;
  std::optional<double> link_gb_per_s;  // nullopt: not published
  bool link_optional = false;           // the link is an option of the machine (H100 PCIe bridge)
  ShardedTraining sharded_training = ShardedTraining::kSingleCard;
  std::vector<int> counts;           // allowed card counts, ascending
  std::vector<std::string> regions;  // region codes
  int free_now = 0;
  std::optional<std::string> local_nvme_tb;  // included local NVMe per card, as published ("0.5")
  std::int64_t monthly_micros = 0;
  std::int64_t weekly_micros = 0;
  bool weekly_derived = false;
  std::int64_t hourly_micros = 0;  // monthly / 720
  TensorThroughput compute;        // bf16_dense_tflops, fp8_dense_tflops, tflops_source, architecture
  GeneralSpecs general;            // [[card_specs]] of its name
  int source_line = 0;

  bool AllowsCount(int count) const;
  bool InRegion(std::string_view region_code) const;
};

struct SpotGpu {
  std::string name;  // "H100 SXM"
  double vram_gb = 0;
  std::string memory;
  std::optional<double> bandwidth_gb_per_s;                 // nullopt: not published
  std::optional<double> bf16_dense_tflops;                  // nullopt: not published
  std::optional<std::int64_t> opening_ask_micros_per_hour;  // nullopt: not published
  // fp8_dense_tflops, tflops_source and architecture; its bf16 figure mirrors bf16_dense_tflops.
  TensorThroughput compute;
  std::optional<std::string> term_name;                     // the same card in the term fleet
  // Largest model (billions of params) it can fully train: 80% of memory / 16 B per param, floored;
  // the 8-GPU figure is also floored to a multiple of 5 B (spec §5).
  std::int64_t largest_full_train_b_1gpu = 0;
  std::int64_t largest_full_train_b_8gpu = 0;
  GeneralSpecs general;  // [[card_specs]] of its name, else of its term card
  int source_line = 0;
};

struct Catalog {
  std::string source;  // file the catalog came from ("data/catalog.toml")
  std::vector<Region> regions;
  std::vector<Discount> discounts;  // ascending by count
  std::vector<TermGpu> term;        // in file order
  std::vector<SpotGpu> spot;        // in file order
  // The fleet's weekly/monthly ratio used to derive missing weekly prices: numerator / denominator
  // (sums of micro-USD over the cards that publish both prices).
  std::int64_t weekly_ratio_numerator_micros = 0;
  std::int64_t weekly_ratio_denominator_micros = 0;

  // Case-, space- and dash-insensitive lookup ("h100-sxm" finds "H100 SXM"); nullptr if none.
  const TermGpu* FindTerm(std::string_view name) const;
  const SpotGpu* FindSpot(std::string_view name) const;
  const Region* FindRegion(std::string_view code) const;  // case-insensitive
  // Discount at `count` cards in ppm (0 for one card or a count without an entry).
  std::int64_t DiscountPpm(int count) const;
  // "H100 SXM, A100 SXM, ..." for error messages.
  std::string TermNames() const;
  std::string RegionCodes() const;
};

Result<Catalog> ParseCatalog(std::string_view toml_text, std::string_view source_name);
Result<Catalog> LoadCatalog(const std::string& path);

// Price of `count` cards of `gpu` for one `term`: list x count x (1 - discount), half-even to the
// micro-dollar. invalid_argument if the count is not allowed for that card.
Result<std::int64_t> SetPriceMicros(const Catalog& catalog, const TermGpu& gpu, int count,
                                    Term term);

// Display-only cost views (spec §5).
double UsdPerGbMonth(const TermGpu& gpu);           // monthly / VRAM
double GbPerSecondPerUsdMonth(const TermGpu& gpu);  // bandwidth / monthly
// Hours per month at which a term rental costs the same as paying `hourly_rate_micros` per hour:
// monthly / hourly rate. 0 when the rate is not positive.
double BreakEvenHours(std::int64_t monthly_micros, std::int64_t hourly_rate_micros);

// "1,490.00": thousands separators, exactly two decimals, rounded half-even to the cent.
std::string FormatUsd(std::int64_t micros);
// Parts per million as a percent for people: 50'000 -> "5%", 75'000 -> "7.5%".
std::string FormatPercent(std::int64_t ppm);
// A micro-USD amount as a JSON-friendly double (3643.2). Display only.
double MicrosToUsd(std::int64_t micros);

}  // namespace gpuhub::catalog
