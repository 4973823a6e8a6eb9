// Reading small files whole, with a size limit and errors that name the path.
#pragma once

#include <cstddef>
#include <string>

#include "core/limits.h"
#include "core/status.h"

namespace gpuhub {

// Reads the whole file; not_found when it does not exist, invalid_argument when it is larger
// than max_bytes or unreadable. Messages start with the path.
Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes = kMaxReadFileBytes);

}  // namespace gpuhub
