// config.json reader: any bytes must give a shape or an invalid_argument, never a crash; a shape
// that comes back must be one the estimator accepts.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sizing/estimate.h"
#include "sizing/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto shape = gpuhub::sizing::ParseHfConfig(text, "fuzz");
  if (!shape.ok()) return 0;
  for (auto method : {gpuhub::sizing::Method::kInference, gpuhub::sizing::Method::kFullFineTune,
                      gpuhub::sizing::Method::kLora, gpuhub::sizing::Method::kQlora}) {
    gpuhub::sizing::Workload w;
    w.method = method;
    w.profile = gpuhub::sizing::Profile::kDetailed;
    auto e = gpuhub::sizing::EstimateMemory(*shape, w);
    if (e.ok() && !(e->per_gpu_bytes >= 0)) __builtin_trap();
  }
  return 0;
}
