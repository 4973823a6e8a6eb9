// catalog.toml loader: any bytes must give a catalog or an invalid_argument that names the source
// file, never a crash; a catalog that loads must price every allowed set.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "catalog/catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = gpuhub::catalog::ParseCatalog(text, "fuzz.toml");
  if (!c.ok()) {
    if (c.status().code() != gpuhub::StatusCode::kInvalidArgument) __builtin_trap();
    if (c.status().message().rfind("fuzz.toml", 0) != 0) __builtin_trap();
    return 0;
  }
  for (const auto& g : c->term) {
    for (int count : g.counts) {
      for (auto term : {gpuhub::catalog::Term::kMonthly, gpuhub::catalog::Term::kWeekly,
                        gpuhub::catalog::Term::kHourly}) {
        auto price = gpuhub::catalog::SetPriceMicros(*c, g, count, term);
        if (price.ok() && *price < 0) __builtin_trap();
      }
    }
  }
  return 0;
}
