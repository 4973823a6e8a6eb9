// What a tax document shows, as text: one view that the HTML page and the PDF both print, so the
// two can never disagree (with each other or with the JSON, whose exact amounts they format).
//
// Amounts: the currency's decimals as charged, at least 2 ("20.00", "2.885", "0.54815"): a spot
// hour at 2.885 USD is not rounded to cents anywhere. Credit notes print their amounts as given
// back (positive), under a title that says so.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "billing/document.h"

namespace gpuhub::documents {

// 20'000'000 -> "20.00", 2'885'000 -> "2.885".
std::string Amount(std::int64_t micros);

struct LineView {
  std::string description;
  std::string quantity;  // "4 lease-hours"
  std::string unit_net;
  std::string net;
  std::string tax_rate;  // "19%", "reverse charge", "0%"
  std::string tax;
  std::string gross;
};

struct View {
  std::string title;     // "Invoice 2026-000001", "Credit note CN-2026-000001"
  std::string heading;   // "Spot GPU usage, November 2026"
  std::vector<std::pair<std::string, std::string>> facts;  // number, dates, currency, ...
  std::vector<std::string> seller;  // name, address lines, country, VAT id
  std::vector<std::string> buyer;
  std::vector<LineView> lines;
  std::vector<std::pair<std::string, std::string>> tax_groups;  // "VAT 19% (DE) on 20.00" -> "3.80"
  std::string net;
  std::string tax;
  std::string gross;
  std::string currency;
  std::vector<std::string> notes;     // the reverse-charge note, the correction's reason, ...
  std::vector<std::string> evidence;  // country evidence, small print
};

View MakeView(const billing::Document& doc);

}  // namespace gpuhub::documents
