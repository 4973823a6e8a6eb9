#include "core/file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace gpuhub {

Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::InvalidArgument(path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory, not a file");
  if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    return Status::InvalidArgument(path + ": file is " + std::to_string(st.st_size) +
                                   " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (in.gcount() != static_cast<std::streamsize>(data.size())) {
    return Status::InvalidArgument(path + ": short read");
  }
  return data;
}

}  // namespace gpuhub
