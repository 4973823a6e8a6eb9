// safetensors header reader: the input is a whole file (length prefix, JSON header, data).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sizing/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto header = gpuhub::sizing::ParseSafetensorsHeader(bytes, size, "fuzz.safetensors");
  if (header.ok()) {
    gpuhub::sizing::CheckpointSummary summary;
    gpuhub::sizing::AddSafetensorsToSummary(*header, "fuzz.safetensors", 4, summary);
    gpuhub::sizing::FinishSummary(summary);
    if (summary.bytes > static_cast<double>(size)) __builtin_trap();
  }
  (void)gpuhub::sizing::ParseSafetensorsIndex(bytes, "fuzz.index.json");
  return 0;
}
