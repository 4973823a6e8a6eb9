// Numeric formats of weights and KV cache, and what each costs per element.
#pragma once

#include <string_view>

#include "core/status.h"

namespace gpuhub::sizing {

enum class Precision { kFp32, kBf16, kFp16, kFp8, kInt8, kInt4, kNf4, kFp4 };

// "fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "fp4" (lower case; "FP8" is accepted too).
Result<Precision> ParsePrecision(std::string_view text);
std::string_view PrecisionName(Precision precision);
// fp32 4, bf16/fp16 2, fp8/int8 1, int4/nf4/fp4 0.5 (4-bit; their block scales are counted by
// the detailed profile), spec §1.
double BytesPerParam(Precision precision);
// FP8 weights or KV need Ada, Hopper, Blackwell or CDNA 3 hardware.
inline bool NeedsFp8Hardware(Precision p) { return p == Precision::kFp8; }
// FP4 weights (NVFP4: E2M1 values with an FP8 scale per 16) run on FP4 tensor cores: Blackwell.
inline bool NeedsFp4Hardware(Precision p) { return p == Precision::kFp4; }

}  // namespace gpuhub::sizing
