// Test helpers: temporary folders and small checkpoint files (safetensors, GGUF) built in memory,
// so the tests never need a real multi-GB download. Test-only; not part of the library.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpuhub::sizing {

// A folder under $TMPDIR removed with everything in it when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuhub-sizing-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::string path_;
};

inline std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(GPUHUB_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void PutLe(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// --- safetensors ---
struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t bytes;  // data bytes (written as zeros)
};

// A valid safetensors file: header JSON with contiguous offsets, padded to 8 bytes, then zeros.
inline std::string MakeSafetensors(const std::vector<StTensor>& tensors,
                                   const std::string& metadata = "") {
  std::string json = "{";
  if (!metadata.empty()) json += "\"__metadata__\":" + metadata + ",";
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    json += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      json += (d ? "," : "") + std::to_string(t.shape[d]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
    if (i + 1 < tensors.size()) json += ",";
  }
  json += "}";
  while (json.size() % 8 != 0) json += ' ';
  std::string out;
  PutLe(out, json.size(), 8);
  out += json;
  out.append(offset, '\0');
  return out;
}

// --- GGUF (version 3) ---
struct GgufKv {
  std::string key;
  std::uint32_t type;  // 4 u32, 8 string, 9 array of strings (count = value), 6 f32
  std::uint64_t value = 0;
  std::string text;
};
struct GgufT {
  std::string name;
  std::uint32_t type;  // ggml type
  std::vector<std::uint64_t> dims;
  std::uint64_t bytes;
};

inline void PutGgufString(std::string& out, const std::string& s) {
  PutLe(out, s.size(), 8);
  out += s;
}

// With `data_bytes` non-null, the data section is not appended; its size is stored there instead.
inline std::string MakeGguf(const std::vector<GgufKv>& kvs, const std::vector<GgufT>& tensors,
                            std::uint64_t alignment = 32, std::uint64_t* data_bytes = nullptr) {
  std::string out = "GGUF";
  PutLe(out, 3, 4);
  PutLe(out, tensors.size(), 8);
  PutLe(out, kvs.size(), 8);
  for (const auto& kv : kvs) {
    PutGgufString(out, kv.key);
    PutLe(out, kv.type, 4);
    if (kv.type == 4) {
      PutLe(out, kv.value, 4);
    } else if (kv.type == 8) {
      PutGgufString(out, kv.text);
    } else if (kv.type == 9) {
      PutLe(out, 8, 4);  // array of strings
      PutLe(out, kv.value, 8);
      for (std::uint64_t i = 0; i < kv.value; ++i) PutGgufString(out, "t" + std::to_string(i));
    }
  }
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> offsets;
  for (const auto& t : tensors) {
    PutGgufString(out, t.name);
    PutLe(out, t.dims.size(), 4);
    for (auto d : t.dims) PutLe(out, d, 8);
    PutLe(out, t.type, 4);
    PutLe(out, offset, 8);
    offsets.push_back(offset);
    offset += (t.bytes + alignment - 1) / alignment * alignment;
  }
  while (out.size() % alignment != 0) out.push_back('\0');
  if (data_bytes != nullptr) {
    *data_bytes = offset;
  } else {
    out.append(offset, '\0');
  }
  return out;
}

}  // namespace gpuhub::sizing
