#include "sizing/precision.h"

#include "core/strings.h"

namespace gpuhub::sizing {

Result<Precision> ParsePrecision(std::string_view text) {
  std::string lower = ToLower(text);
  static constexpr Precision kAll[] = {Precision::kFp32, Precision::kBf16, Precision::kFp16,
                                       Precision::kFp8,  Precision::kInt8, Precision::kInt4,
                                       Precision::kNf4,  Precision::kFp4};
  for (Precision p : kAll) {
    if (PrecisionName(p) == lower) return p;
  }
  return Status::InvalidArgument("unknown precision '" + std::string(text.substr(0, 40)) +
                                 "' (expected fp32, bf16, fp16, fp8, int8, int4, nf4 or fp4)");
}

std::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kInt8:
      return "int8";
    case Precision::kInt4:
      return "int4";
    case Precision::kNf4:
      return "nf4";
    case Precision::kFp4:
      return "fp4";
  }
  return "?";
}

double BytesPerParam(Precision precision) {
  switch (precision) {
    case Precision::kFp32:
      return 4;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2;
    case Precision::kFp8:
    case Precision::kInt8:
      return 1;
    case Precision::kInt4:
    case Precision::kNf4:
    case Precision::kFp4:
      return 0.5;
  }
  return 0;
}

}  // namespace gpuhub::sizing
