#include "fit/report_text.h"

#include <cmath>

#include <algorithm>

#include "core/strings.h"

namespace gpuhub::fit {

using sizing::Method;

namespace {

std::size_t DisplayWidth(const std::string& s) {
  std::size_t width = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++width;  // count code points, not continuation bytes
  }
  return width;
}

std::string Gb(double bytes) { return FormatFixed(bytes / sizing::kBytesPerGb, 2); }

std::string Usd(std::int64_t micros) { return "$" + catalog::FormatUsd(micros); }

std::string Tokens(std::int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string Number(double v, int decimals) { return FormatFixed(v, decimals); }

std::string Plural(int n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

TextTable::TextTable(std::vector<std::string> header, std::vector<Align> align)
    : header_(std::move(header)), align_(std::move(align)) {
  align_.resize(header_.size(), Align::kLeft);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(const std::string& indent) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  for (std::size_t i = 0; i < header_.size(); ++i) widths[i] = DisplayWidth(header_[i]);
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = indent;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string pad(widths[i] - DisplayWidth(cells[i]), ' ');
      bool last = i + 1 == cells.size();
      if (align_[i] == Align::kRight) {
        out += pad + cells[i];
      } else {
        out += cells[i];
        if (!last) out += pad;
      }
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header_);
  std::size_t total = 0;
  for (std::size_t w : widths) total += w;
  total += 2 * (widths.empty() ? 0 : widths.size() - 1);
  out += indent + std::string(total, '-') + "\n";
  for (const auto& row : rows_) out += line(row);
  return out;
}

std::string DescribeJob(const sizing::ModelShape& model, const sizing::Workload& w) {
  std::string out = model.id + ", ";
  std::string precision(sizing::PrecisionName(w.precision));
  switch (w.method) {
    case Method::kInference:
      out += "inference: " + precision + " weights, " +
             std::string(sizing::PrecisionName(w.kv_precision)) + " KV cache, " +
             Tokens(w.context_tokens) + " tokens x batch " + std::to_string(w.batch);
      break;
    case Method::kFullFineTune:
      out += "full fine-tuning (" + std::string(sizing::OptimizerName(w.optimizer)) + ", " +
             (w.pure_bf16 ? "pure bf16" : "mixed precision") + ")";
      if (w.offload_optimizer) out += ", optimizer offloaded to host";
      break;
    case Method::kLora:
      out += "LoRA rank " + std::to_string(w.lora_rank) + " on a " + precision + " base";
      break;
    case Method::kQlora:
      out += "QLoRA rank " + std::to_string(w.lora_rank) + " on an nf4 base";
      break;
  }
  if (w.gpus > 1) {
    out += ", " + Plural(w.gpus, "GPU");
    if (w.method == Method::kFullFineTune) out += " (ZeRO-" + std::to_string(w.zero_stage) + ")";
    if (w.method != Method::kFullFineTune && w.method != Method::kInference) {
      out += w.zero_stage == 3 ? " (FSDP: base sharded)" : " (layers split)";
    }
  }
  if (w.offload_params) out += ", parameters offloaded to host memory";
  return out;
}

static std::string ProfileLine(const sizing::MemoryEstimate& e) {
  return e.profile == sizing::Profile::kGuide
             ? "profile: guide (the published rules of the sizing guide)\n"
             : "profile: detailed (from the model's shapes)\n";
}

std::string SizeReportText(const SizeRequest& request, const sizing::MemoryEstimate& e) {
  std::string out = DescribeJob(request.model, request.workload) + "\n" + ProfileLine(e) + "\n";
  std::vector<std::string> header = {"component", "GB"};
  if (request.explain) header.push_back("formula");
  TextTable table(header, {TextTable::Align::kLeft, TextTable::Align::kRight});
  for (const auto& c : e.components) {
    std::vector<std::string> row = {c.name, Gb(c.bytes)};
    if (request.explain) row.push_back(c.formula);
    table.AddRow(row);
  }
  out += table.Render();
  std::string per = e.gpus > 1 ? " per GPU" : "";
  out += "\n  total" + per + ": " + Gb(e.per_gpu_bytes) + " GB";
  if (e.gpus > 1) out += " (" + Gb(e.total_bytes) + " GB across " + Plural(e.gpus, "GPU") + ")";
  out += "\n";
  if (e.outside_allocator.bytes > 0) {
    out += "  + " + e.outside_allocator.name + " " + Gb(e.outside_allocator.bytes) +
           " GB outside the framework's allocator: " + Gb(e.card_bytes()) + " GB on " +
           (e.gpus > 1 ? "each card" : "the card") + "\n";
    if (request.explain) out += "    " + e.outside_allocator.formula + "\n";
  }
  if (e.host_bytes > 0) out += "  host memory for offloaded state: " + Gb(e.host_bytes) + " GB\n";
  std::vector<std::string> notes = request.model.notes;
  notes.insert(notes.end(), request.notes.begin(), request.notes.end());
  notes.insert(notes.end(), e.notes.begin(), e.notes.end());
  if (!notes.empty()) {
    out += "\n";
    for (const auto& n : notes) out += "  note: " + n + "\n";
  }
  return out;
}

std::string FitReportText(const FitRequest& request, const FitResult& result) {
  std::string out = DescribeJob(request.model, request.workload) + "\n";
  out += ProfileLine(result.required);
  out += "needs " + Gb(result.required.card_bytes()) + " GB on one GPU";
  if (result.required.host_bytes > 0) {
    out += " + " + Gb(result.required.host_bytes) + " GB of host memory for offloaded state";
  }
  if (result.needs_fp8) out += " (FP8: needs an FP8 card)";
  out += "\n";
  std::vector<std::string> filters;
  if (request.filters.gpu) filters.push_back("gpu " + *request.filters.gpu);
  if (request.filters.cuda_only) filters.push_back("CUDA only");
  if (request.filters.region) filters.push_back("region " + *request.filters.region);
  if (request.filters.in_stock) filters.push_back("in stock");
  if (request.filters.max_monthly_micros) {
    filters.push_back("budget " + Usd(*request.filters.max_monthly_micros) + "/month");
  }
  if (!filters.empty()) {
    std::string joined;
    for (const auto& f : filters) joined += (joined.empty() ? "" : ", ") + f;
    out += "filters: " + joined + "\n";
  }
  out += "\n";
  if (result.ranked.empty()) {
    out += "Nothing fits: " + result.reason + "\n";
  } else {
    const Candidate& best = result.ranked.front();
    out += "Best: " + ConfigurationName(best.gpu->name, best.count) + " at " +
           Usd(best.monthly_micros) + "/month";
    if (best.count > 1) {
      out += " (" + catalog::FormatPercent(best.discount_ppm) + " multi-card discount)";
    }
    out += ", " + Gb(best.headroom_bytes_per_card) + " GB headroom" +
           (best.count > 1 ? " per card" : "") + (best.tight ? " (tight)" : "");
    if (best.decode_ceiling_tokens_per_s > 0) {
      out += ", decode ceiling " + Number(best.decode_ceiling_tokens_per_s, 1) + " tok/s";
    }
    out += "\n";
    if (result.considered_sets) out += "No single card holds it, so sets of cards were ranked.\n";
    out += "\n";
    bool inference = request.workload.method == Method::kInference;
    std::vector<std::string> header = {"#",      "configuration", "monthly",     "weekly",
                                       "hourly", "per card GB",   "headroom GB", "tight"};
    using A = TextTable::Align;
    std::vector<A> align = {A::kRight, A::kLeft,  A::kRight, A::kRight,
                            A::kRight, A::kRight, A::kRight, A::kLeft};
    if (inference) {
      header.push_back("decode tok/s");
      align.push_back(A::kRight);
    }
    header.push_back("free now");
    align.push_back(A::kRight);
    header.push_back("stack");
    align.push_back(A::kLeft);
    TextTable table(header, align);
    bool any_derived = false;
    int shown = 0;
    for (const auto& c : result.ranked) {
      if (shown == request.top) break;
      ++shown;
      any_derived = any_derived || c.gpu->weekly_derived;
      std::vector<std::string> row = {
          std::to_string(shown),
          ConfigurationName(c.gpu->name, c.count),
          Usd(c.monthly_micros),
          Usd(c.weekly_micros) + (c.gpu->weekly_derived ? "*" : ""),
          Usd(c.hourly_micros),
          Gb(c.per_card_bytes) + " / " + FormatFixed(c.gpu->vram_gb, 0),
          Gb(c.headroom_bytes_per_card),
          c.tight ? "tight" : "",
      };
      if (inference) row.push_back(Number(c.decode_ceiling_tokens_per_s, 1));
      row.push_back(std::to_string(c.gpu->free_now));
      row.push_back(std::string(catalog::StackName(c.gpu->stack)));
      table.AddRow(row);
    }
    out += table.Render();
    if (any_derived) out += "  * weekly price derived from the fleet's weekly/monthly ratio\n";
    if (static_cast<int>(result.ranked.size()) > request.top) {
      out += "  (" + std::to_string(result.ranked.size() - request.top) + " more; --top " +
             std::to_string(result.ranked.size()) + " lists them all)\n";
    }
    if (request.explain) {
      out += "\nHow the best answer was computed:\n";
      for (const auto& line : ExplainCandidate(best)) out += "  " + line + "\n";
    }
  }
  if (request.why_not) {
    out += "\nExcluded:\n";
    TextTable table({"configuration", "why not"});
    int sets_skipped = 0;
    std::string skipped_reason;
    for (const auto& x : result.excluded) {
      // One line for "a single card fits" instead of one per set of every card.
      if (x.kind == Exclusion::kSingleCardFits) {
        ++sets_skipped;
        skipped_reason = x.reason;
        continue;
      }
      table.AddRow({ConfigurationName(x.gpu, x.count), x.reason});
    }
    if (sets_skipped > 0) {
      table.AddRow({"every set (" + std::to_string(sets_skipped) + ")", skipped_reason});
    }
    out += table.Render();
  }
  std::vector<std::string> notes = request.model.notes;
  notes.insert(notes.end(), request.notes.begin(), request.notes.end());
  notes.insert(notes.end(), result.required.notes.begin(), result.required.notes.end());
  if (!notes.empty()) {
    out += "\n";
    for (const auto& n : notes) out += "  note: " + n + "\n";
  }
  return out;
}

std::string GuideText(const Guide& guide) {
  using A = TextTable::Align;
  std::string out;
  out += "KV cache (fp16, batch 1; GB = 1e9 bytes)\n";
  {
    TextTable t({"model", "per token MB", "8k GB", "32k GB", "128k GB"},
                {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight});
    for (const auto& row : guide.kv_cache) {
      t.AddRow({row.preset, Number(row.per_token_bytes / 1e6, 2), Gb(row.bytes[0]),
                Gb(row.bytes[1]), Gb(row.bytes[2])});
    }
    out += t.Render();
  }
  out += "\nInference memory (8,192 tokens, fp16 KV, batch 1, 2 GB runtime; GB)\n";
  {
    TextTable t({"model", "bf16", "fp8", "int4"}, {A::kLeft, A::kRight, A::kRight, A::kRight});
    for (const auto& row : guide.inference) {
      t.AddRow({row.preset, Gb(row.bf16_bytes), Gb(row.fp8_bytes), Gb(row.int4_bytes)});
    }
    out += t.Render();
  }
  out += "\nTraining memory on one GPU (Adam, sequence 2048, batch 1, checkpointing; GB)\n";
  {
    TextTable t({"model", "full (16 B/param)", "full +15%", "LoRA (bf16 base)", "published",
                 "QLoRA (nf4 base)", "published"},
                {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight});
    std::vector<std::string> reasons;
    auto published = [&](const std::string& what,
                         const std::optional<GuidePublishedFigure>& f) -> std::string {
      if (!f) return "";
      reasons.push_back(what + ": " + f->reason);
      return Number(f->published_gb, 0) + " [" + std::to_string(reasons.size()) + "]";
    };
    for (const auto& row : guide.training) {
      std::string lora_published = published(row.preset + " LoRA", row.lora_published);
      std::string qlora_published = published(row.preset + " QLoRA", row.qlora_published);
      t.AddRow({row.preset, Gb(row.full_bytes), Gb(row.full_with_allowance_bytes),
                Gb(row.lora_bytes), lora_published, Gb(row.qlora_bytes), qlora_published});
    }
    out += t.Render();
    out +=
        "  LoRA/QLoRA: base + adapters + activations (checkpoints, one layer recomputed, logits) "
        "+ 2 GB runtime\n";
    if (!reasons.empty()) {
      out += "  published: the published guide's figure, where it differs from the engine's by "
             "more than its rounding (0.5 GB); the engine's figure is the one fit uses\n";
      for (std::size_t i = 0; i < reasons.size(); ++i) {
        out += "  [" + std::to_string(i + 1) + "] " + reasons[i] + "\n";
      }
    }
  }
  out += "\nCheapest configuration (monthly, no filters)\n";
  {
    std::vector<std::string> header = {"model"};
    std::vector<A> align = {A::kLeft};
    const char* titles[] = {"bf16 inference", "fp8 inference", "int4 inference",
                            "QLoRA",          "LoRA",          "full fine-tune"};
    for (const char* title : titles) {
      header.push_back(title);
      align.push_back(A::kLeft);
    }
    TextTable t(header, align);
    std::vector<std::string> row;
    for (const auto& cell : guide.cheapest) {
      if (row.empty()) row.push_back(cell.preset);
      if (cell.best) {
        row.push_back(ConfigurationName(cell.best->gpu->name, cell.best->count) + " " +
                      Usd(cell.best->monthly_micros));
      } else if (cell.multi_node) {
        row.push_back(MultiNodeName(*cell.multi_node) + ", quote");
      } else {
        row.push_back("nothing fits");
      }
      if (row.size() == header.size()) {
        t.AddRow(row);
        row.clear();
      }
    }
    out += t.Render();
  }
  out += "\nCost per GB (term fleet, list prices)\n";
  {
    TextTable t({"card", "VRAM GB", "monthly", "$/GB-month", "GB/s", "GB/s per $-month", "hourly",
                 "weekly", "spot ask/h", "break-even h"},
                {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight,
                 A::kRight, A::kRight, A::kRight});
    bool any_derived = false;
    for (const auto& row : guide.cost) {
      const catalog::TermGpu& g = *row.gpu;
      any_derived = any_derived || g.weekly_derived;
      t.AddRow({g.name, Number(g.vram_gb, 0), Usd(g.monthly_micros),
                Number(row.usd_per_gb_month, 2), Number(g.bandwidth_gb_per_s, 0),
                Number(row.gb_s_per_usd_month, 2), Usd(g.hourly_micros),
                Usd(g.weekly_micros) + (g.weekly_derived ? "*" : ""),
                row.spot_ask_micros ? Usd(*row.spot_ask_micros) : "",
                row.break_even_hours ? Number(*row.break_even_hours, 0) : ""});
    }
    out += t.Render();
    if (any_derived) out += "  * weekly price derived from the fleet's weekly/monthly ratio\n";
    out +=
        "  break-even: hours per month above which the monthly term beats the spot opening ask\n";
  }
  return out;
}

// "989", "209.5", or "" when not published.
std::string Tflops(const std::optional<double>& tflops) {
  if (!tflops) return "";
  return FormatFixed(*tflops, *tflops == std::floor(*tflops) ? 0 : 1);
}

std::string CatalogText(const catalog::Catalog& c, std::optional<std::int64_t> hourly_rate_micros) {
  using A = TextTable::Align;
  std::string out = "Term fleet (weekly/monthly rentals; USD, list, tax excluded)\n";
  std::vector<std::string> header = {
      "card", "VRAM GB", "memory",           "GB/s",   "FP8",     "BF16 TFLOPS", "FP8 TFLOPS",
      "stack", "link",   "sharded training", "counts", "regions", "free",        "NVMe",
      "monthly", "weekly", "hourly"};
  std::vector<A> align = {A::kLeft,  A::kRight, A::kLeft,  A::kRight, A::kLeft,  A::kRight,
                          A::kRight, A::kLeft,  A::kLeft,  A::kLeft,  A::kLeft,  A::kLeft,
                          A::kRight, A::kRight, A::kRight, A::kRight, A::kRight};
  if (hourly_rate_micros) {
    header.push_back("break-even h vs " + Usd(*hourly_rate_micros) + "/h");
    align.push_back(A::kRight);
  }
  TextTable t(header, align);
  bool any_derived = false;
  for (const auto& g : c.term) {
    any_derived = any_derived || g.weekly_derived;
    std::string counts;
    for (int n : g.counts) counts += (counts.empty() ? "" : ",") + std::to_string(n);
    std::string regions;
    for (const auto& r : g.regions) regions += (regions.empty() ? "" : ",") + r;
    if (g.regions.size() == c.regions.size()) regions = "all";
    std::string memory = g.memory;
    if (g.power_w) memory += " (" + std::to_string(*g.power_w) + " W)";
    std::vector<std::string> row = {g.name,
                                    Number(g.vram_gb, 0),
                                    memory,
                                    Number(g.bandwidth_gb_per_s, 0),
                                    g.fp8 ? "yes" : "no",
                                    Tflops(g.compute.bf16_dense_tflops),
                                    g.fp8 ? Tflops(g.compute.fp8_dense_tflops) : "",
                                    std::string(catalog::StackName(g.stack)),
                                    g.link,
                                    std::string(catalog::ShardedTrainingName(g.sharded_training)),
                                    counts,
                                    regions,
                                    std::to_string(g.free_now),
                                    g.local_nvme_tb ? *g.local_nvme_tb + " TB" : "",
                                    Usd(g.monthly_micros),
                                    Usd(g.weekly_micros) + (g.weekly_derived ? "*" : ""),
                                    Usd(g.hourly_micros)};
    if (hourly_rate_micros) {
      row.push_back(Number(catalog::BreakEvenHours(g.monthly_micros, *hourly_rate_micros), 0));
    }
    t.AddRow(row);
  }
  out += t.Render();
  if (any_derived) {
    out += "  * derived: monthly x " + catalog::FormatUsd(c.weekly_ratio_numerator_micros) + " / " +
           catalog::FormatUsd(c.weekly_ratio_denominator_micros) +
           " (published weekly / monthly of the same cards), to the cent\n";
  }
  std::string discounts;
  for (const auto& d : c.discounts) {
    discounts += (discounts.empty() ? "" : ", ") + std::to_string(d.count) + " cards " +
                 catalog::FormatPercent(d.ppm);
  }
  out += "  multi-card discount: " + discounts + "; hourly = monthly / 720\n";
  out += "  TFLOPS: dense tensor throughput as published (no 2:4 sparsity; `catalog --json` gives "
         "each card's source)\n";
  if (hourly_rate_micros) {
    out += "  break-even: monthly / " + Usd(*hourly_rate_micros) +
           " per hour; above 720 h the hourly rate is cheaper even for a whole month\n";
  }
  std::string regions;
  for (const auto& r : c.regions) regions += (regions.empty() ? "" : ", ") + r.code + " " + r.city;
  out += "  regions: " + regions + "\n";

  out += "\nSpot exchange (opening asks, USD per GPU-hour; live prices come from the order book)\n";
  TextTable s(
      {"card", "VRAM GB", "memory", "GB/s", "BF16 TFLOPS", "FP8 TFLOPS", "opening ask",
       "train 1 GPU", "train 8 GPUs"},
      {A::kLeft, A::kRight, A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight,
       A::kRight});
  for (const auto& g : c.spot) {
    s.AddRow({g.name, Number(g.vram_gb, 0), g.memory,
              g.bandwidth_gb_per_s ? Number(*g.bandwidth_gb_per_s, 0) : "not published",
              g.bf16_dense_tflops ? Number(*g.bf16_dense_tflops, 0) : "not published",
              Tflops(g.compute.fp8_dense_tflops),
              g.opening_ask_micros_per_hour ? Usd(*g.opening_ask_micros_per_hour) : "not published",
              std::to_string(g.largest_full_train_b_1gpu) + "B",
              std::to_string(g.largest_full_train_b_8gpu) + "B"});
  }
  out += s.Render();
  out +=
      "  train: largest model fully trainable (80% of memory / 16 B per param; 8 GPUs floored to "
      "5B)\n";
  return out;
}

std::string ModelsText(const std::vector<sizing::BundledModel>& bundled) {
  using A = TextTable::Align;
  auto params = [](double n) { return FormatFixed(n / 1e9, 2) + "B"; };
  std::string out = "Presets of the guide (nominal parameter counts)\n";
  TextTable p({"model", "params", "layers", "KV heads", "head_dim", "KV per token"},
              {A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight});
  for (const auto& name : sizing::PresetNames()) {
    auto m = sizing::PresetModel(name);
    if (!m.ok()) continue;
    p.AddRow(
        {name, params(m->total_params), std::to_string(m->layers), std::to_string(m->kv_heads),
         std::to_string(m->head_dim),
         FormatFixed(sizing::KvCacheBytes(*m, sizing::Precision::kFp16, 1, 1) / 1e6, 3) + " MB"});
  }
  out += p.Render();
  out += "\nBundled models (--model ID; parameter counts computed from config.json)\n";
  TextTable t({"id", "type", "params", "active", "layers", "KV per token", "max context"},
              {A::kLeft, A::kLeft, A::kRight, A::kRight, A::kRight, A::kRight, A::kRight});
  for (const auto& b : bundled) {
    const sizing::ModelShape& m = b.shape;
    t.AddRow({b.id, m.model_type, params(m.total_params), m.is_moe() ? params(m.active_params) : "",
              std::to_string(m.layers),
              FormatFixed(sizing::KvCacheBytes(m, sizing::Precision::kFp16, 1, 1) / 1e6, 3) + " MB",
              m.max_context > 0 ? Tokens(m.max_context) : ""});
  }
  out += t.Render();
  return out;
}

}  // namespace gpuhub::fit
