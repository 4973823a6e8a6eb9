// Test helpers shared by the detailed-model tests (detailed_test.cc, calibration_test.cc).
// Test-only; not part of the library.
#pragma once

#include <cstdint>
#include <string>

#include "sizing/estimate.h"

namespace gpuhub::sizing {

// The bytes of the named component, or -1 when the estimate has none.
inline double Component(const MemoryEstimate& e, const std::string& name) {
  for (const auto& c : e.components) {
    if (c.name == name) return c.bytes;
  }
  return -1;
}

// A LoRA workload: `rank`, `seq` tokens per sequence, `batch` sequences; the rest at defaults.
inline Workload Lora(int rank, std::int64_t seq, std::int64_t batch) {
  Workload w;
  w.method = Method::kLora;
  w.lora_rank = rank;
  w.sequence_tokens = seq;
  w.batch = batch;
  return w;
}

}  // namespace gpuhub::sizing
