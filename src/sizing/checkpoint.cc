#include "sizing/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/strings.h"
#include "sizing/limits.h"

namespace gpuhub::sizing {
namespace {

using nlohmann::json;

std::string Where(std::string_view file_name) {
  return std::string(file_name.substr(0, 512)) + ": ";
}

std::uint64_t ReadLe64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Bytes per element in tenths of a byte would be overkill: sub-byte types are handled as "elements
// per byte" instead. Returns false for unknown dtypes.
bool SafetensorsDtype(std::string_view dtype, double* bytes_per_element) {
  struct D {
    const char* name;
    double bytes;
  };
  static constexpr D kDtypes[] = {
      {"BOOL", 1},    {"U8", 1},   {"I8", 1},         {"F8_E5M2", 1},    {"F8_E4M3", 1},
      {"F8_E8M0", 1}, {"I16", 2},  {"U16", 2},        {"F16", 2},        {"BF16", 2},
      {"I32", 4},     {"U32", 4},  {"F32", 4},        {"F64", 8},        {"I64", 8},
      {"U64", 8},     {"F4", 0.5}, {"F6_E2M3", 0.75}, {"F6_E3M2", 0.75},
  };
  for (const auto& d : kDtypes) {
    if (dtype == d.name) {
      *bytes_per_element = d.bytes;
      return true;
    }
  }
  return false;
}

// Names of quantization constants (scales, zeros, absmax ...), which are bytes but not params.
bool IsQuantConstant(std::string_view name) {
  static constexpr std::string_view kSuffixes[] = {
      ".qzeros",        ".scales",           ".g_idx",  ".absmax",           ".quant_map",
      ".nested_absmax", ".nested_quant_map", ".SCB",    ".weight_format",    "weight_scale_inv",
      "weight_scale",   "input_scale",       "_scales", "weight_zero_point", "weight_g_idx",
      "weight_shape",   ".scale_inv",        "k_scale", "v_scale",           "output_scale",
  };
  for (auto s : kSuffixes) {
    if (EndsWith(name, s)) return true;
  }
  return name.find(".quant_state.") != std::string_view::npos;
}

}  // namespace

double SafetensorsTensor::elements() const {
  double n = 1;
  for (auto d : shape) n *= static_cast<double>(d);
  return n;
}

Result<std::uint64_t> SafetensorsHeaderLength(std::string_view first_bytes, std::uint64_t file_size,
                                              std::string_view file_name) {
  const std::string where = Where(file_name);
  if (first_bytes.size() < 8 || file_size < 8) {
    return Status::InvalidArgument(where + "truncated safetensors file (" +
                                   std::to_string(file_size) + " bytes, no 8-byte header length)");
  }
  std::uint64_t n = ReadLe64(first_bytes.data());
  if (n > kMaxSafetensorsHeaderBytes) {
    return Status::InvalidArgument(
        where + "safetensors header length " + std::to_string(n) + " is absurd (limit " +
        std::to_string(kMaxSafetensorsHeaderBytes) + " bytes): not a safetensors file, or corrupt");
  }
  if (n + 8 > file_size) {
    return Status::InvalidArgument(where + "safetensors header length " + std::to_string(n) +
                                   " runs past the end of the file (" + std::to_string(file_size) +
                                   " bytes): truncated or corrupt");
  }
  if (n < 2) return Status::InvalidArgument(where + "safetensors header is empty");
  return n;
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view head, std::uint64_t file_size,
                                                 std::string_view file_name) {
  const std::string where = Where(file_name);
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(where + why); };
  GPUHUB_ASSIGN_OR_RETURN(std::uint64_t n, SafetensorsHeaderLength(head, file_size, file_name));
  if (head.size() < 8 + n) return bad("truncated safetensors header");
  std::string_view text = head.substr(8, n);
  // The format pads the header with trailing spaces to align the data.
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty() || text.front() != '{') return bad("safetensors header is not a JSON object");
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("safetensors header is not valid JSON");
  if (static_cast<std::int64_t>(j.size()) > kMaxTensorsPerFile + 1) {
    return bad("more than " + std::to_string(kMaxTensorsPerFile) + " tensors");
  }
  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_bytes = file_size - 8 - n;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) return bad("__metadata__ must be an object");
      continue;
    }
    const std::string tname = "tensor '" + name.substr(0, 200) + "': ";
    const json& t = *it;
    if (!t.is_object()) return bad(tname + "entry is not an object");
    auto dt = t.find("dtype");
    auto sh = t.find("shape");
    auto off = t.find("data_offsets");
    if (dt == t.end() || !dt->is_string()) return bad(tname + "missing dtype");
    if (sh == t.end() || !sh->is_array()) return bad(tname + "missing shape");
    if (off == t.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned()) {
      return bad(tname + "data_offsets must be two non-negative integers");
    }
    SafetensorsTensor tensor;
    tensor.name = name;
    tensor.dtype = dt->get<std::string>();
    double bpe = 0;
    if (!SafetensorsDtype(tensor.dtype, &bpe)) {
      return bad(tname + "unknown dtype '" + tensor.dtype.substr(0, 32) + "'");
    }
    if (sh->size() > static_cast<std::size_t>(kMaxTensorDims))
      return bad(tname + "too many dimensions");
    double elements = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(1) << 48) {
        return bad(tname + "shape entries must be non-negative integers");
      }
      tensor.shape.push_back(static_cast<std::int64_t>(d.get<std::uint64_t>()));
      elements *= static_cast<double>(tensor.shape.back());
    }
    tensor.begin = (*off)[0].get<std::uint64_t>();
    tensor.end = (*off)[1].get<std::uint64_t>();
    if (tensor.end < tensor.begin) return bad(tname + "data_offsets end before they begin");
    if (tensor.end > h.data_bytes) {
      return bad(tname + "data_offsets [" + std::to_string(tensor.begin) + ", " +
                 std::to_string(tensor.end) + "] run past the data (" +
                 std::to_string(h.data_bytes) + " bytes): truncated or corrupt file");
    }
    double expected = elements * bpe;
    if (expected != std::floor(expected) ||
        static_cast<double>(tensor.end - tensor.begin) != expected) {
      return bad(tname + "holds " + std::to_string(tensor.end - tensor.begin) +
                 " bytes but shape x " + tensor.dtype + " needs " + FormatFixed(expected, 0));
    }
    h.tensors.push_back(std::move(tensor));
  }
  // The tensors must tile the data buffer: no overlap, no gap, nothing after the last one.
  std::vector<const SafetensorsTensor*> order;
  order.reserve(h.tensors.size());
  for (const auto& t : h.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t cursor = 0;
  for (const auto* t : order) {
    if (t->begin < cursor) {
      return bad("tensor '" + t->name.substr(0, 200) + "' overlaps the tensor before it (offset " +
                 std::to_string(t->begin) + " < " + std::to_string(cursor) + ")");
    }
    if (t->begin > cursor) {
      return bad("gap in the data before tensor '" + t->name.substr(0, 200) + "' (offset " +
                 std::to_string(t->begin) + ", expected " + std::to_string(cursor) + ")");
    }
    cursor = t->end;
  }
  if (cursor != h.data_bytes) {
    return bad("the tensors cover " + std::to_string(cursor) + " bytes of a " +
               std::to_string(h.data_bytes) + "-byte data section");
  }
  return h;
}

Result<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json_text,
                                               std::string_view file_name) {
  const std::string where = Where(file_name);
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(where + why); };
  if (json_text.size() > kMaxSafetensorsIndexBytes) return bad("index file too large");
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return bad("not a valid JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) return bad("missing weight_map");
  SafetensorsIndex index;
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      return bad("weight_map['" + it.key().substr(0, 200) + "'] is not a file name");
    const std::string& shard = it->get_ref<const std::string&>();
    if (shard.empty() || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos || shard == "." || shard == "..") {
      return bad("weight_map names '" + shard.substr(0, 200) +
                 "': shards must be plain file names in the same folder");
    }
    shards.insert(shard);
    index.weight_map[it.key()] = shard;
  }
  if (shards.empty()) return bad("weight_map is empty");
  if (shards.size() > kMaxCheckpointFiles) return bad("too many shards");
  index.shards.assign(shards.begin(), shards.end());
  if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
    if (auto ts = md->find("total_size"); ts != md->end() && ts->is_number()) {
      index.total_size = ts->get<double>();
    }
  }
  return index;
}

namespace {

void AddTotal(CheckpointSummary& s, const std::string& label, double params, double bytes,
              bool constant) {
  auto it = std::find_if(s.by_dtype.begin(), s.by_dtype.end(),
                         [&](const DtypeTotal& d) { return d.dtype == label; });
  if (it == s.by_dtype.end()) {
    s.by_dtype.push_back({label, 0, 0, 0});
    it = s.by_dtype.end() - 1;
  }
  it->tensors += 1;
  it->params += params;
  it->bytes += bytes;
  s.tensors += 1;
  s.params += params;
  s.bytes += bytes;
  if (constant) s.quantization_bytes += bytes;
}

}  // namespace

void AddSafetensorsToSummary(const SafetensorsHeader& header, std::string_view file_name, int bits,
                             CheckpointSummary& summary) {
  if (summary.format.empty()) summary.format = "safetensors";
  summary.files.emplace_back(file_name.substr(0, 512));
  if (bits <= 0 || bits > 16) bits = 4;
  std::set<std::string_view> names;
  for (const auto& t : header.tensors) names.insert(t.name);
  for (const auto& t : header.tensors) {
    double bytes = static_cast<double>(t.end - t.begin);
    double elements = t.elements();
    std::string_view name = t.name;
    if (IsQuantConstant(name)) {
      AddTotal(summary, t.dtype + " (quantization constants)", 0, bytes, true);
    } else if ((EndsWith(name, ".qweight") || EndsWith(name, "weight_packed")) &&
               (t.dtype == "I32" || t.dtype == "U32")) {
      std::string label = t.dtype + " (packed int" + std::to_string(bits) + ")";
      AddTotal(summary, label, elements * 32.0 / bits, bytes, false);
      if (summary.quantization.empty()) {
        summary.quantization =
            (EndsWith(name, ".qweight") ? "gptq/awq int" : "packed int") + std::to_string(bits);
      }
    } else if (t.dtype == "U8" && EndsWith(name, "_blocks")) {
      AddTotal(summary, "U8 (mxfp4)", elements * 2, bytes, false);
      if (summary.quantization.empty()) summary.quantization = "mxfp4";
    } else if (t.dtype == "U8" && EndsWith(name, ".weight") &&
               (names.count(std::string(name) + ".absmax") ||
                names.count(std::string(name) + ".quant_state.bitsandbytes__nf4") ||
                names.count(std::string(name) + ".quant_state.bitsandbytes__fp4"))) {
      bool fp4 = names.count(std::string(name) + ".quant_state.bitsandbytes__fp4") > 0;
      AddTotal(summary, fp4 ? "U8 (bnb fp4)" : "U8 (bnb nf4)", elements * 2, bytes, false);
      if (summary.quantization.empty()) summary.quantization = fp4 ? "bnb fp4" : "bnb nf4";
    } else if (t.dtype == "F4") {
      AddTotal(summary, "F4", elements, bytes, false);
    } else {
      AddTotal(summary, t.dtype, elements, bytes, false);
      if (summary.quantization.empty() && (t.dtype == "F8_E4M3" || t.dtype == "F8_E5M2")) {
        summary.quantization = "fp8";
      }
      if (t.dtype == "I8" && names.count(std::string(name.substr(0, name.size() - 6)) + "SCB")) {
        summary.quantization = "bnb int8";
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// GGUF

bool GgmlTypeInfo(std::uint32_t type, std::string_view* name, std::uint64_t* block_elements,
                  std::uint64_t* block_bytes) {
  struct T {
    std::uint32_t id;
    const char* name;
    std::uint64_t elements;
    std::uint64_t bytes;
  };
  // ggml.c type_traits: blck_size and type_size (block structs in ggml-common.h).
  static constexpr T kTypes[] = {
      {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
      {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
      {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
      {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
      {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
      {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
      {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
      {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
      {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
  };
  for (const auto& t : kTypes) {
    if (t.id == type) {
      if (name) *name = t.name;
      if (block_elements) *block_elements = t.elements;
      if (block_bytes) *block_bytes = t.bytes;
      return true;
    }
  }
  return false;
}

namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian

enum GgufType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

class Reader {
 public:
  Reader(std::string_view data) : data_(data) {}
  bool truncated() const { return truncated_; }
  std::uint64_t pos() const { return pos_; }

  bool Bytes(void* out, std::size_t n) {
    if (truncated_ || data_.size() - pos_ < n) {
      truncated_ = true;
      return false;
    }
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool Skip(std::uint64_t n) {
    if (truncated_ || data_.size() - pos_ < n) {
      truncated_ = true;
      return false;
    }
    pos_ += n;
    return true;
  }
  template <typename T>
  bool Le(T* out) {
    unsigned char b[sizeof(T)];
    if (!Bytes(b, sizeof(T))) return false;
    std::uint64_t v = 0;
    for (int i = static_cast<int>(sizeof(T)) - 1; i >= 0; --i) v = (v << 8) | b[i];
    std::memcpy(out, &v, sizeof(T));  // little-endian host assumed by the project (x86-64, arm64)
    return true;
  }
  // GGUF string: u64 length + bytes. Stores at most `keep` bytes.
  bool String(std::string* out, std::size_t keep, bool* too_long) {
    std::uint64_t len = 0;
    if (!Le(&len)) return false;
    if (len > kMaxGgufStringBytes) {
      *too_long = true;
      return false;
    }
    if (truncated_ || data_.size() - pos_ < len) {
      truncated_ = true;
      return false;
    }
    if (out) out->assign(data_.data() + pos_, std::min<std::uint64_t>(len, keep));
    pos_ += len;
    return true;
  }

 private:
  std::string_view data_;
  std::uint64_t pos_ = 0;
  bool truncated_ = false;
};

std::uint64_t ScalarSize(std::uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kU64:
    case kI64:
    case kF64:
      return 8;
    default:
      return 0;
  }
}

bool ReadScalar(Reader& r, std::uint32_t type, GgufValue* v) {
  switch (type) {
    case kU8: {
      std::uint8_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = x;
      return true;
    }
    case kI8: {
      std::int8_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = x;
      return true;
    }
    case kU16: {
      std::uint16_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = x;
      return true;
    }
    case kI16: {
      std::int16_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = x;
      return true;
    }
    case kU32: {
      std::uint32_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = x;
      return true;
    }
    case kI32: {
      std::int32_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = x;
      return true;
    }
    case kU64: {
      std::uint64_t x;
      if (!r.Le(&x)) return false;
      v->i = x > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(x);
      v->f = static_cast<double>(x);
      return true;
    }
    case kI64: {
      std::int64_t x;
      if (!r.Le(&x)) return false;
      v->i = x;
      v->f = static_cast<double>(x);
      return true;
    }
    case kF32: {
      float x;
      if (!r.Le(reinterpret_cast<std::uint32_t*>(&x))) return false;
      v->kind = GgufValue::Kind::kFloat;
      v->f = x;
      v->i = std::isfinite(x) && std::fabs(x) < 9e18 ? static_cast<std::int64_t>(x) : 0;
      return true;
    }
    case kF64: {
      double x;
      if (!r.Le(reinterpret_cast<std::uint64_t*>(&x))) return false;
      v->kind = GgufValue::Kind::kFloat;
      v->f = x;
      v->i = std::isfinite(x) && std::fabs(x) < 9e18 ? static_cast<std::int64_t>(x) : 0;
      return true;
    }
    case kBool: {
      std::uint8_t x;
      if (!r.Le(&x)) return false;
      v->kind = GgufValue::Kind::kBool;
      v->i = x != 0;
      v->f = v->i;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

Result<GgufFile> ParseGgufHeader(std::string_view head, std::uint64_t file_size,
                                 std::string_view file_name, std::uint64_t* more_bytes) {
  const std::string where = Where(file_name);
  auto bad = [&](const std::string& why) { return Status::InvalidArgument(where + why); };
  if (more_bytes) *more_bytes = 0;
  Reader r(head);
  // Called when the reader ran off `head`: either the file is truncated, or the caller has to
  // read more of it.
  auto truncated = [&](const char* what) -> Status {
    if (head.size() < file_size && head.size() < kMaxGgufHeaderBytes) {
      if (more_bytes) {
        *more_bytes = std::min<std::uint64_t>(
            {file_size, kMaxGgufHeaderBytes, std::max<std::uint64_t>(head.size() * 2, 1 << 20)});
      }
      return bad(std::string("GGUF header continues past the bytes read (in ") + what + ")");
    }
    if (head.size() >= kMaxGgufHeaderBytes) {
      return bad("GGUF header is larger than the limit of " + std::to_string(kMaxGgufHeaderBytes) +
                 " bytes");
    }
    return bad(std::string("truncated GGUF file (ends in ") + what + ")");
  };
  std::uint32_t magic = 0;
  if (!r.Le(&magic)) return truncated("the magic number");
  if (magic != kGgufMagic) return bad("not a GGUF file (bad magic number)");
  GgufFile g;
  if (!r.Le(&g.version)) return truncated("the version");
  if (g.version == 1)
    return bad("GGUF version 1 is obsolete; convert the file with a current llama.cpp");
  if (g.version != 2 && g.version != 3) {
    return bad("unsupported GGUF version " + std::to_string(g.version) +
               (g.version > 0xFFFF ? " (a big-endian file?)" : ""));
  }
  std::uint64_t tensor_count = 0, kv_count = 0;
  if (!r.Le(&tensor_count) || !r.Le(&kv_count)) return truncated("the counts");
  if (tensor_count > kMaxGgufTensors) {
    return bad("tensor count " + std::to_string(tensor_count) + " is absurd (limit " +
               std::to_string(kMaxGgufTensors) + ")");
  }
  if (kv_count > kMaxGgufMetadataEntries) {
    return bad("metadata count " + std::to_string(kv_count) + " is absurd (limit " +
               std::to_string(kMaxGgufMetadataEntries) + ")");
  }
  for (std::uint64_t k = 0; k < kv_count; ++k) {
    std::string key;
    bool too_long = false;
    if (!r.String(&key, 256, &too_long)) {
      return too_long ? bad("metadata key longer than the limit") : truncated("a metadata key");
    }
    std::uint32_t type = 0;
    if (!r.Le(&type)) return truncated("a metadata type");
    GgufValue v;
    if (type == kString) {
      v.kind = GgufValue::Kind::kString;
      if (!r.String(&v.s, 256, &too_long)) {
        return too_long ? bad("metadata '" + key + "': string longer than the limit")
                        : truncated("a metadata string");
      }
    } else if (type == kArray) {
      v.kind = GgufValue::Kind::kArray;
      std::uint32_t item_type = 0;
      if (!r.Le(&item_type) || !r.Le(&v.array_length)) return truncated("an array header");
      if (v.array_length > kMaxGgufArrayElements) {
        return bad("metadata '" + key + "': array of " + std::to_string(v.array_length) +
                   " entries is beyond the limit");
      }
      if (item_type == kString) {
        for (std::uint64_t i = 0; i < v.array_length; ++i) {
          if (!r.String(nullptr, 0, &too_long)) {
            return too_long ? bad("metadata '" + key + "': string longer than the limit")
                            : truncated("a string array");
          }
        }
      } else if (std::uint64_t size = ScalarSize(item_type); size > 0) {
        if (v.array_length <= 65536) {
          for (std::uint64_t i = 0; i < v.array_length; ++i) {
            GgufValue item;
            if (!ReadScalar(r, item_type, &item)) return truncated("a numeric array");
            v.numbers.push_back(item.f);
          }
        } else if (!r.Skip(v.array_length * size)) {
          return truncated("a numeric array");
        }
      } else {
        return bad("metadata '" + key + "': unsupported array item type " +
                   std::to_string(item_type));
      }
    } else if (ScalarSize(type) > 0) {
      if (!ReadScalar(r, type, &v)) return truncated("a metadata value");
    } else {
      return bad("metadata '" + key + "': unknown value type " + std::to_string(type));
    }
    g.metadata[key] = std::move(v);
  }
  if (auto it = g.metadata.find("general.alignment"); it != g.metadata.end()) {
    std::int64_t a = it->second.i;
    if (it->second.kind != GgufValue::Kind::kInt || a <= 0 || a > (1 << 24) || (a & (a - 1)) != 0) {
      return bad("general.alignment must be a power of two");
    }
    g.alignment = static_cast<std::uint64_t>(a);
  }
  g.tensors.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(tensor_count, 1 << 16)));
  for (std::uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensor tensor;
    bool too_long = false;
    if (!r.String(&tensor.name, 256, &too_long)) {
      return too_long ? bad("tensor name longer than the limit") : truncated("a tensor name");
    }
    const std::string tname = "tensor '" + tensor.name + "': ";
    std::uint32_t n_dims = 0;
    if (!r.Le(&n_dims)) return truncated("a tensor's dimensions");
    if (n_dims == 0 || n_dims > 4)
      return bad(tname + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    tensor.elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      std::uint64_t dim = 0;
      if (!r.Le(&dim)) return truncated("a tensor's dimensions");
      if (dim > (static_cast<std::uint64_t>(1) << 40)) return bad(tname + "dimension is absurd");
      tensor.dims.push_back(dim);
      tensor.elements *= static_cast<double>(dim);
    }
    if (!r.Le(&tensor.type) || !r.Le(&tensor.offset))
      return truncated("a tensor's type and offset");
    std::string_view type_name;
    std::uint64_t block_elements = 0, block_bytes = 0;
    if (!GgmlTypeInfo(tensor.type, &type_name, &block_elements, &block_bytes)) {
      return bad(tname + "unknown or unsupported ggml type " + std::to_string(tensor.type));
    }
    if (tensor.dims[0] % block_elements != 0) {
      return bad(tname + "first dimension " + std::to_string(tensor.dims[0]) +
                 " is not a multiple of the " + std::string(type_name) + " block size " +
                 std::to_string(block_elements));
    }
    if (tensor.elements > 1e15) return bad(tname + "too many elements");
    double bytes =
        tensor.elements / static_cast<double>(block_elements) * static_cast<double>(block_bytes);
    tensor.bytes = static_cast<std::uint64_t>(bytes);
    if (tensor.offset % g.alignment != 0) {
      return bad(tname + "offset " + std::to_string(tensor.offset) + " is not aligned to " +
                 std::to_string(g.alignment));
    }
    g.tensors.push_back(std::move(tensor));
  }
  std::uint64_t end = r.pos();
  g.data_offset = (end + g.alignment - 1) / g.alignment * g.alignment;
  if (g.data_offset > file_size) return bad("truncated GGUF file (no data section)");
  const std::uint64_t data_size = file_size - g.data_offset;
  std::vector<const GgufTensor*> order;
  for (const auto& t : g.tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return bad("tensor '" + t.name + "': data [" + std::to_string(t.offset) + ", +" +
                 std::to_string(t.bytes) + "] runs past the end of the file (" +
                 std::to_string(data_size) + " data bytes): truncated or corrupt");
    }
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (order[i]->offset < order[i - 1]->offset + order[i - 1]->bytes) {
      return bad("tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' overlap");
    }
  }
  std::set<std::string_view> seen;
  for (const auto& t : g.tensors) {
    if (!seen.insert(t.name).second) return bad("tensor '" + t.name + "' appears twice");
  }
  return g;
}

void AddGgufToSummary(const GgufFile& file, std::string_view file_name,
                      CheckpointSummary& summary) {
  summary.format = "gguf";
  summary.files.emplace_back(file_name.substr(0, 512));
  for (const auto& t : file.tensors) {
    std::string_view name;
    GgmlTypeInfo(t.type, &name, nullptr, nullptr);
    AddTotal(summary, std::string(name), t.elements, static_cast<double>(t.bytes), false);
  }
  if (auto it = file.metadata.find("general.file_type"); it != file.metadata.end()) {
    static const std::map<std::int64_t, const char*> kFileTypes = {
        {0, "F32"},      {1, "F16"},      {2, "Q4_0"},       {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},     {9, "Q5_1"},     {10, "Q2_K"},      {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"},  {14, "Q4_K_S"},  {15, "Q4_K_M"},    {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},    {21, "Q2_K_S"}, {22, "IQ3_XS"},
        {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},    {26, "IQ3_S"},  {27, "IQ3_M"},
        {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},    {31, "IQ1_M"},  {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"},
    };
    if (auto ft = kFileTypes.find(it->second.i); ft != kFileTypes.end()) {
      summary.quantization = ft->second;
    }
  }
}

void FinishSummary(CheckpointSummary& s) {
  std::sort(s.by_dtype.begin(), s.by_dtype.end(),
            [](const DtypeTotal& a, const DtypeTotal& b) { return a.bytes > b.bytes; });
  if (s.quantization.empty() && s.format == "gguf" && !s.by_dtype.empty()) {
    s.quantization = s.by_dtype.front().dtype;
  }
}

// ------------------------------------------------------------------------------------------------
// Shape from GGUF metadata

namespace {

const GgufValue* Meta(const GgufFile& g, const std::string& key) {
  auto it = g.metadata.find(key);
  return it == g.metadata.end() ? nullptr : &it->second;
}

// A per-model value that may be stored per layer (an array); takes the maximum over layers and
// reports how many layers have a non-zero value.
std::int64_t MetaInt(const GgufFile& g, const std::string& key, std::int64_t fallback) {
  const GgufValue* v = Meta(g, key);
  if (v == nullptr) return fallback;
  if (v->kind == GgufValue::Kind::kArray) {
    double m = 0;
    for (double x : v->numbers) m = std::max(m, x);
    return static_cast<std::int64_t>(m);
  }
  if (v->kind == GgufValue::Kind::kString) return fallback;
  return v->i;
}

struct LinearName {
  const char* gguf;
  const char* hf;
  LinearKind kind;
};

constexpr LinearName kLinearNames[] = {
    {"attn_q", "q_proj", LinearKind::kAttention},
    {"attn_k", "k_proj", LinearKind::kAttention},
    {"attn_v", "v_proj", LinearKind::kAttention},
    {"attn_qkv", "qkv_proj", LinearKind::kAttention},
    {"attn_output", "o_proj", LinearKind::kAttention},
    {"attn_q_a", "q_a_proj", LinearKind::kAttention},
    {"attn_q_b", "q_b_proj", LinearKind::kAttention},
    {"attn_kv_a_mqa", "kv_a_proj_with_mqa", LinearKind::kAttention},
    {"attn_kv_b", "kv_b_proj", LinearKind::kAttention},
    {"attn_k_b", "k_b_proj", LinearKind::kAttention},
    {"attn_v_b", "v_b_proj", LinearKind::kAttention},
    {"ffn_gate", "gate_proj", LinearKind::kMlp},
    {"ffn_up", "up_proj", LinearKind::kMlp},
    {"ffn_down", "down_proj", LinearKind::kMlp},
    {"ffn_gate_exps", "experts.gate_proj", LinearKind::kExpert},
    {"ffn_up_exps", "experts.up_proj", LinearKind::kExpert},
    {"ffn_down_exps", "experts.down_proj", LinearKind::kExpert},
    {"ffn_gate_up_exps", "experts.gate_up_proj", LinearKind::kExpert},
    {"ffn_gate_shexp", "shared_experts.gate_proj", LinearKind::kSharedExpert},
    {"ffn_up_shexp", "shared_experts.up_proj", LinearKind::kSharedExpert},
    {"ffn_down_shexp", "shared_experts.down_proj", LinearKind::kSharedExpert},
    {"ffn_gate_inp", "gate", LinearKind::kRouter},
};

}  // namespace

Result<ModelShape> ShapeFromGguf(const GgufFile& g, std::string id) {
  const std::string where = id + ": ";
  const GgufValue* arch_v = Meta(g, "general.architecture");
  if (arch_v == nullptr || arch_v->kind != GgufValue::Kind::kString || arch_v->s.empty()) {
    return Status::InvalidArgument(where + "GGUF metadata has no general.architecture");
  }
  const std::string arch = arch_v->s;
  ModelShape s;
  s.id = std::move(id);
  s.architecture = "gguf:" + arch;
  s.model_type = arch;
  auto key = [&](const char* k) { return arch + "." + k; };
  std::vector<std::string> missing;
  auto need = [&](const char* k) {
    std::int64_t v = MetaInt(g, key(k), 0);
    if (v <= 0) missing.push_back(key(k));
    return v;
  };
  std::int64_t layers = need("block_count");
  std::int64_t hidden = need("embedding_length");
  std::int64_t heads = need("attention.head_count");
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return Status::InvalidArgument(where + "GGUF metadata lacks " + list);
  }
  if (layers > kMaxLayers || hidden > kMaxDimension || heads > kMaxDimension) {
    return Status::InvalidArgument(where + "GGUF dimensions out of range");
  }
  std::int64_t kv_heads = MetaInt(g, key("attention.head_count_kv"), heads);
  if (kv_heads <= 0 || kv_heads > heads) kv_heads = heads;
  std::int64_t key_len = MetaInt(g, key("attention.key_length"), hidden / heads);
  std::int64_t value_len = MetaInt(g, key("attention.value_length"), key_len);
  if (key_len <= 0 || key_len > kMaxDimension || value_len <= 0 || value_len > kMaxDimension) {
    return Status::InvalidArgument(where + "GGUF attention key/value length out of range");
  }
  s.layers = static_cast<int>(layers);
  s.hidden = static_cast<int>(hidden);
  s.heads = static_cast<int>(heads);
  s.kv_heads = static_cast<int>(kv_heads);
  s.head_dim = static_cast<int>(key_len);
  s.intermediate = static_cast<int>(
      std::clamp<std::int64_t>(MetaInt(g, key("feed_forward_length"), 0), 0, kMaxDimension));
  s.max_context = std::clamp<std::int64_t>(MetaInt(g, key("context_length"), 0), 0, 1'000'000'000);
  s.experts = static_cast<int>(
      std::clamp<std::int64_t>(MetaInt(g, key("expert_count"), 0), 0, kMaxExperts));
  s.experts_per_token = static_cast<int>(
      std::clamp<std::int64_t>(MetaInt(g, key("expert_used_count"), 0), 0, s.experts));
  s.moe_intermediate = static_cast<int>(
      std::clamp<std::int64_t>(MetaInt(g, key("expert_feed_forward_length"), 0), 0, kMaxDimension));
  s.kv_lora_rank = static_cast<int>(
      std::clamp<std::int64_t>(MetaInt(g, key("attention.kv_lora_rank"), 0), 0, kMaxDimension));
  if (s.kv_lora_rank > 0) {
    s.qk_rope_head_dim = static_cast<int>(
        std::clamp<std::int64_t>(MetaInt(g, key("rope.dimension_count"), 0), 0, kMaxDimension));
    s.q_lora_rank = static_cast<int>(
        std::clamp<std::int64_t>(MetaInt(g, key("attention.q_lora_rank"), 0), 0, kMaxDimension));
    s.kv_elements_per_token_per_layer = s.kv_lora_rank + s.qk_rope_head_dim;
  } else {
    s.kv_elements_per_token_per_layer = static_cast<double>(kv_heads) * (key_len + value_len);
  }
  if (std::int64_t window = MetaInt(g, key("attention.sliding_window"), 0); window > 0) {
    // llama.cpp does not record which layers slide; the families that use windows alternate
    // (Gemma 2, gpt-oss) or use 5 local : 1 global (Gemma 3).
    std::int64_t sliding = layers;
    if (arch == "gemma2" || arch == "gpt-oss" || arch == "gpt_oss") sliding = (layers + 1) / 2;
    if (arch == "gemma3") sliding = layers - layers / 6;
    if (s.max_context == 0 || window < s.max_context) {
      s.sliding_window_layers = static_cast<int>(sliding);
      s.sliding_window = static_cast<int>(std::min<std::int64_t>(window, 2'000'000'000));
    }
  }

  // Parameter inventory from the tensors themselves.
  std::int64_t vocab = 0;
  for (const auto& t : g.tensors) {
    std::string_view name = t.name;
    if (name == "token_embd.weight") {
      s.embedding_params += t.elements;
      if (t.dims.size() >= 2) vocab = static_cast<std::int64_t>(t.dims[1]);
      continue;
    }
    if (name == "output.weight") {
      s.lm_head_params += t.elements;
      continue;
    }
    if (name.find("norm") != std::string_view::npos) {
      s.norm_params += t.elements;
      continue;
    }
    bool matched = false;
    if (name.substr(0, 4) == "blk." && EndsWith(name, ".weight") && t.dims.size() >= 2) {
      std::size_t dot = name.find('.', 4);
      std::string_view base = dot == std::string_view::npos
                                  ? std::string_view()
                                  : name.substr(dot + 1, name.size() - dot - 8);
      for (const auto& ln : kLinearNames) {
        if (base != ln.gguf) continue;
        std::int64_t in = static_cast<std::int64_t>(t.dims[0]);
        std::int64_t out = static_cast<std::int64_t>(t.dims[1]);
        std::int64_t count = t.dims.size() >= 3 ? static_cast<std::int64_t>(t.dims[2]) : 1;
        for (std::size_t d = 3; d < t.dims.size(); ++d)
          count *= static_cast<std::int64_t>(t.dims[d]);
        auto it = std::find_if(s.linears.begin(), s.linears.end(), [&](const LinearModule& l) {
          return l.name == ln.hf && l.in_features == in && l.out_features == out;
        });
        if (it == s.linears.end()) {
          s.linears.push_back({ln.hf, ln.kind, in, out, count, false});
        } else {
          it->count += count;
        }
        matched = true;
        break;
      }
    }
    if (!matched) s.other_params += t.elements;
  }
  s.tied_embeddings = s.lm_head_params == 0;
  std::int64_t meta_vocab = MetaInt(g, key("vocab_size"), 0);
  if (meta_vocab <= 0) {
    if (const GgufValue* tokens = Meta(g, "tokenizer.ggml.tokens");
        tokens && tokens->kind == GgufValue::Kind::kArray) {
      meta_vocab =
          static_cast<std::int64_t>(std::min<std::uint64_t>(tokens->array_length, kMaxDimension));
    }
  }
  s.vocab =
      static_cast<int>(std::clamp<std::int64_t>(vocab > 0 ? vocab : meta_vocab, 0, kMaxDimension));
  for (const auto& l : s.linears) {
    if (l.kind == LinearKind::kExpert)
      s.moe_layers =
          static_cast<int>(std::max<std::int64_t>(s.moe_layers, l.count / std::max(1, s.experts)));
  }
  if (s.experts == 0) {
    for (auto& l : s.linears) {
      if (l.kind == LinearKind::kExpert) l.kind = LinearKind::kMlp;
    }
  }
  ComputeParamCounts(s);
  if (s.total_params <= 0) return Status::InvalidArgument(where + "GGUF file holds no tensors");
  GPUHUB_RETURN_IF_ERROR(ValidateShape(s));
  return s;
}

}  // namespace gpuhub::sizing
