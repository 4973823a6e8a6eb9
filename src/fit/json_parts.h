// The pieces every JSON report of src/fit is made of (report_json.cc defines them): numbers
// rounded for people, exact money strings, the model, workload and component objects. Internal to
// src/fit (it brings nlohmann/json with it); callers outside use report_json.h's strings.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fit/fit.h"
#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::fit {

using Json = nlohmann::ordered_json;

namespace json_parts {

double Round(double value, int decimals);
double Gb(double bytes);           // GB, 6 decimals
double Usd(std::int64_t micros);   // for people; never compute with it
std::string Exact(std::int64_t micros);  // "3643.200000"
Json ExactPrices(std::int64_t monthly_micros, std::int64_t weekly_micros,
                 std::int64_t hourly_micros);
Json NotesJson(const sizing::ModelShape& model, const std::vector<std::string>& request_notes,
               const sizing::MemoryEstimate& estimate);
Json ModelJson(const sizing::ModelShape& m);
Json WorkloadJson(const sizing::Workload& w, const sizing::MemoryEstimate& e);
// "full", "selective" or "none": how a training workload recomputes activations.
const char* RecomputeName(const sizing::Workload& w);
Json ComponentJson(const sizing::Component& c);
Json ComponentsJson(const sizing::MemoryEstimate& e);
Json OutsideAllocatorJson(const sizing::MemoryEstimate& e);
Json Strings(const std::vector<std::string>& lines);
// CONFIG of report_json.h (the guide's cheapest cells; report_writer.cc writes the same bytes
// for the fit report).
Json ConfigJson(const Candidate& c, bool explain);

// A figure that is not published (or a filter that is not set) is null, never 0 or "".
template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}
template <typename T, typename Format>
Json OrNull(const std::optional<T>& v, Format&& format) {
  return v ? Json(format(*v)) : Json(nullptr);
}

}  // namespace json_parts
}  // namespace gpuhub::fit
