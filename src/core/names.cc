#include "core/names.h"

namespace gpuhub {

std::string NameKey(std::string_view name) {
  std::string key;
  key.reserve(name.size());
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '.') continue;
    key.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return key;
}

Result<std::string> CanonicalRegionCode(std::string_view code, std::size_t max_bytes) {
  if (code.empty() || code.size() > max_bytes) {
    return Status::InvalidArgument("region must be 1.." + std::to_string(max_bytes) +
                                   " characters such as \"IAD-1\"");
  }
  std::string out;
  out.reserve(code.size());
  for (char c : code) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      return Status::InvalidArgument("region must be letters, digits and '-' such as \"IAD-1\", got '" +
                                     std::string(code.substr(0, 32)) + "'");
    }
    out.push_back(c);
  }
  if (!(out[0] >= 'A' && out[0] <= 'Z')) {
    return Status::InvalidArgument("region must start with a letter, such as \"IAD-1\"");
  }
  return out;
}

}  // namespace gpuhub
