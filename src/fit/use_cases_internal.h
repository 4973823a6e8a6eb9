// What the use-case builders share (use_cases.cc: training, fine-tuning, inference;
// use_cases_general.cc: image and video generation, rendering, science). Internal to src/fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "fit/rates.h"
#include "fit/use_cases.h"

namespace gpuhub::fit {

// A card of either fleet (the term entry when it has one, and its twin on the exchange).
struct Card {
  const catalog::TermGpu* term = nullptr;
  const catalog::SpotGpu* spot = nullptr;
  std::string name;
  double vram_gb = 0;
  CardRates rates;
  bool AllowsOne() const { return spot != nullptr || term->AllowsCount(1); }
  bool AllowsEight() const { return spot != nullptr || term->AllowsCount(8); }
  // The card's general specs: its term entry's, else its spot entry's.
  const catalog::GeneralSpecs& general() const { return term ? term->general : spot->general; }
};

// Every term card (with its spot twin), then the spot-only cards.
std::vector<Card> Cards(const catalog::Catalog& c);

// The set's hourly price: the term's (monthly / 720, multi-card discount), else the spot opening
// ask x count; 0 when neither.
std::int64_t SetHourlyMicros(const catalog::Catalog& catalog, const Card& card, int count);

// A view's card with what every use shows of it: name, fleets, memory, tensor throughput,
// bandwidth and the datasheet's general figures.
UseCaseCard CardBasics(const Card& card);

// The text reports' shared parts (use_cases_report.cc): a row's "spot from" and "monthly" cells,
// and the "Why" sentences of every card and the notes under the table.
void AppendPriceCells(const UseCaseCard& c, std::vector<std::string>& row);
std::string WhyAndNotes(const UseCaseView& view);

// The views of use_cases_general.cc (BuildUseCase calls it for those uses).
Result<UseCaseView> BuildGeneralUseCase(const catalog::Catalog& catalog,
                                        const std::vector<sizing::DiffusionModel>& diffusion,
                                        UseCase use);
std::string GeneralUseCaseText(const UseCaseView& view);

}  // namespace gpuhub::fit
