// GGUF header reader: the input is a whole file; also parsed as if only a prefix had been read,
// the way the loader reads big files.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sizing/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = gpuhub::sizing::ParseGgufHeader(bytes, size, "fuzz.gguf");
  if (file.ok()) {
    gpuhub::sizing::CheckpointSummary summary;
    gpuhub::sizing::AddGgufToSummary(*file, "fuzz.gguf", summary);
    gpuhub::sizing::FinishSummary(summary);
    if (summary.bytes > static_cast<double>(size)) __builtin_trap();
    (void)gpuhub::sizing::ShapeFromGguf(*file, "fuzz");
  }
  std::uint64_t more = 0;
  (void)gpuhub::sizing::ParseGgufHeader(bytes.substr(0, size / 2), size, "fuzz.gguf", &more);
  return 0;
}
