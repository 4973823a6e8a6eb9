// UseCaseJson and UseCaseText (use_cases.h).
#include "core/money.h"
#include "core/strings.h"
#include "core/json_writer.h"
#include "fit/json_parts.h"
#include "fit/report_text.h"
#include "fit/use_cases.h"
#include "fit/use_cases_internal.h"

namespace gpuhub::fit {

using namespace json_parts;  // NOLINT: the shared pieces of every report

namespace {

Json Largest(const LargestModel& l) {
  auto model = [](const std::optional<std::string>& id, double params) -> Json {
    if (!id) return nullptr;
    return {{"model", *id}, {"params_b", Round(params / 1e9, 2)}};
  };
  return {{"label", l.label},
          {"one_card", model(l.one_card, l.one_card_params)},
          {"eight_cards", model(l.eight_cards, l.eight_cards_params)},
          {"eight_cards_note", l.eight_cards_note}};
}

std::string Short(const std::optional<std::string>& id) {
  if (!id) return "-";
  auto slash = id->find('/');
  return slash == std::string::npos ? *id : id->substr(slash + 1);
}

}  // namespace

std::string UseCaseJson(const UseCaseView& v) {
  Json j;
  j["use"] = UseCaseName(v.use);
  j["title"] = v.title;
  j["summary"] = v.summary;
  j["reference"] = v.reference;
  Json cards = Json::array();
  for (const UseCaseCard& c : v.cards) {
    Json r;
    r["name"] = c.name;
    r["fit"] = c.fit;
    r["why"] = Strings(c.why);
    r["vram_gb"] = c.vram_gb;
    r["bf16_dense_tflops"] = OrNull(c.bf16_tflops);
    r["fp8_dense_tflops"] = OrNull(c.fp8_tflops);
    r["bandwidth_gb_per_s"] = OrNull(c.bandwidth_gb_per_s);
    r["interconnect"] = c.interconnect;
    Json largest = Json::array();
    for (const auto& l : c.largest) largest.push_back(Largest(l));
    r["largest"] = std::move(largest);
    r["reference"] = c.reference.empty() ? Json() : Json(c.reference);
    r["tokens_per_s"] = Round(c.tokens_per_second, 1);
    r["tokens_per_s_range"] = {Round(c.tokens_per_second_low, 1),
                               Round(c.tokens_per_second_high, 1)};
    if (c.decode_tokens_per_second > 0) {
      r["decode_tokens_per_s"] = Round(c.decode_tokens_per_second, 1);
    }
    r["usd_per_million_tokens"] =
        c.usd_per_million_tokens > 0 ? Json(Round(c.usd_per_million_tokens, 4)) : Json();
    if (c.term != nullptr) {
      r["term"] = {{"monthly_usd", Usd(c.term->monthly_micros)},
                   {"weekly_usd", Usd(c.term->weekly_micros)},
                   {"hourly_usd", Usd(c.term->hourly_micros)},
                   {"weekly_derived", c.term->weekly_derived},
                   {"free_now", c.term->free_now},
                   {"exact", ExactPrices(c.term->monthly_micros, c.term->weekly_micros,
                                         c.term->hourly_micros)}};
    } else {
      r["term"] = nullptr;
    }
    const catalog::GeneralSpecs& g = c.general;
    r["general"] = {{"fp32_tflops", OrNull(g.fp32_tflops)},
                    {"fp64_tflops", OrNull(g.fp64_tflops)},
                    {"fp64_tensor_tflops", OrNull(g.fp64_tensor_tflops)},
                    {"ecc", OrNull(g.ecc)},
                    {"rt_cores", OrNull(g.rt_cores)},
                    {"rt_tflops", OrNull(g.rt_tflops)},
                    {"source", g.source.empty() ? Json() : Json(g.source)},
                    {"note", g.note.empty() ? Json() : Json(g.note)}};
    if (IsGeneralUseCase(v.use)) {
      Json fits = Json::array();
      for (const auto& f : c.diffusion) {
        fits.push_back({{"model", f.model},
                        {"name", f.name},
                        {"setting", f.setting},
                        {"card_gb", Round(f.card_gb, 2)},
                        {"fits", f.fits},
                        {"offloaded_card_gb", Round(f.offloaded_card_gb, 2)},
                        {"fits_offloaded", f.fits_offloaded}});
      }
      r["diffusion"] = std::move(fits);
      r["value"] = {{"metric", c.value_metric},
                    {"tflops", c.value_tflops > 0 ? Json(c.value_tflops) : Json()},
                    {"usd_per_tflops_hour",
                     c.usd_per_tflops_hour > 0 ? Json(Round(c.usd_per_tflops_hour, 5)) : Json()},
                    {"hourly_usd", c.hourly_micros > 0 ? Json(Usd(c.hourly_micros)) : Json()}};
    }
    if (c.spot != nullptr) {
      r["spot"] = {
          {"name", c.spot->name},
          {"from_usd_per_gpu_hour", OrNull(c.spot_from_micros_per_gpu_hour, Usd)},
          {"live", c.spot_live},
          {"gpus_on_offer", c.spot_gpus_on_offer},
          {"exact",
           {{"from_usd_per_gpu_hour",
             OrNull(c.spot_from_micros_per_gpu_hour,
                    [](std::int64_t m) { return FormatMicros(m, 3); })}}}};
    } else {
      r["spot"] = nullptr;
    }
    cards.push_back(std::move(r));
  }
  j["cards"] = std::move(cards);
  j["notes"] = Strings(v.notes);
  return DumpJson(j, 2);
}

std::string UseCaseText(const UseCaseView& v) {
  if (IsGeneralUseCase(v.use)) return GeneralUseCaseText(v);
  using A = TextTable::Align;
  std::string out = v.title + " (gpuhub catalog --use " + std::string(UseCaseName(v.use)) + ")\n";
  out += v.summary + "\nreference: " + v.reference + "\n\n";
  std::vector<std::string> header = {"card", "fit", "VRAM GB", "BF16 TFLOPS", "GB/s"};
  std::vector<A> align = {A::kLeft, A::kLeft, A::kRight, A::kRight, A::kRight};
  const std::size_t labels = v.cards.empty() ? 0 : v.cards.front().largest.size();
  for (std::size_t i = 0; i < labels; ++i) {
    header.push_back(v.cards.front().largest[i].label + ": 1 card");
    header.push_back("8 cards");
    align.push_back(A::kLeft);
    align.push_back(A::kLeft);
  }
  for (const char* h : {"tokens/s", "$/M tokens", "spot from", "monthly"}) {
    header.push_back(h);
    align.push_back(A::kRight);
  }
  TextTable t(header, align);
  for (const UseCaseCard& c : v.cards) {
    std::vector<std::string> row = {
        c.name, c.fit ? "yes" : "no", FormatFixed(c.vram_gb, 0),
        c.bf16_tflops ? FormatFixed(*c.bf16_tflops, 0) : "",
        c.bandwidth_gb_per_s ? FormatFixed(*c.bandwidth_gb_per_s, 0) : ""};
    for (const auto& l : c.largest) {
      row.push_back(Short(l.one_card));
      row.push_back(Short(l.eight_cards));
    }
    row.push_back(c.tokens_per_second > 0 ? FormatFixed(c.tokens_per_second, 0) : "");
    row.push_back(c.usd_per_million_tokens > 0 ? FormatFixed(c.usd_per_million_tokens, 3) : "");
    AppendPriceCells(c, row);
    t.AddRow(row);
  }
  return out + t.Render() + WhyAndNotes(v);
}

void AppendPriceCells(const UseCaseCard& c, std::vector<std::string>& row) {
  row.push_back(c.spot_from_micros_per_gpu_hour
                    ? "$" + FormatMicros(*c.spot_from_micros_per_gpu_hour, 3) + "/h"
                    : "");
  row.push_back(c.term ? "$" + catalog::FormatUsd(c.term->monthly_micros) : "");
}

std::string WhyAndNotes(const UseCaseView& v) {
  std::string out = "\nWhy\n";
  for (const UseCaseCard& c : v.cards) {
    out += "  " + c.name + (c.fit ? "" : " (not fit)") + "\n";
    for (const auto& line : c.why) out += "    - " + line + "\n";
  }
  out += "\n";
  for (const auto& n : v.notes) out += "  note: " + n + "\n";
  return out;
}

}  // namespace gpuhub::fit
