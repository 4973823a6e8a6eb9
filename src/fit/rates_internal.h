// Helpers shared by rates.cc, rates_training.cc and rates_serving.cc (not part of the contract).
#pragma once

#include <string>

#include "core/strings.h"
#include "fit/rates.h"

namespace gpuhub::fit::rates_internal {

inline std::string Tf(double flops_per_s) { return FormatFixed(flops_per_s / 1e12, 1) + " TFLOPS"; }
inline std::string Sec(double s) {
  if (s >= 1) return FormatFixed(s, 3) + " s";
  if (s >= 1e-3) return FormatFixed(s * 1e3, 2) + " ms";
  return FormatFixed(s * 1e6, 1) + " us";
}

// The fixed cost of one collective over `group` cards `stride` apart in a set of `gpus`: the
// calibrated NVLink-class latency, x2 over PCIe, x3 when the group crosses nodes.
double CollectiveLatencySeconds(const CardRates& card, int gpus, int group, int stride);

// Seconds for a ring collective that moves `factor` x (n-1)/n x `bytes` per card over `link`
// bytes/s one way, plus `count` fixed latencies.
inline double RingSeconds(double factor, int n, double bytes, double link, double latency,
                          double count) {
  if (n <= 1) return 0;
  const double volume = factor * (n - 1.0) / n * bytes;
  return count * latency + (link > 0 ? volume / link : 0);
}

}  // namespace gpuhub::fit::rates_internal
