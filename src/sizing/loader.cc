#include "sizing/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/file.h"
#include "core/strings.h"
#include "sizing/checkpoint.h"
#include "sizing/hf_config.h"
#include "sizing/limits.h"

namespace gpuhub::sizing {
namespace {

namespace fs = std::filesystem;

// An open file read by ranges (headers only). Closes itself.
class HeadFile {
 public:
  ~HeadFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ENOENT) return Status::NotFound(path + ": no such file");
      return Status::InvalidArgument(path + ": cannot open: " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return Status::InvalidArgument(path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
    size_ = static_cast<std::uint64_t>(st.st_size);
    return Status::Ok();
  }
  std::uint64_t size() const { return size_; }
  // Reads min(length, size - offset) bytes at offset.
  Result<std::string> Read(std::uint64_t offset, std::uint64_t length) {
    if (offset >= size_) return std::string();
    length = std::min(length, size_ - offset);
    std::string out(static_cast<std::size_t>(length), '\0');
    std::size_t done = 0;
    while (done < out.size()) {
      ssize_t n =
          ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::InvalidArgument(path_ + ": read failed");
      done += static_cast<std::size_t>(n);
    }
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string LowerExtension(const fs::path& p) { return ToLower(p.extension().string()); }

Status ReadSafetensorsFile(const std::string& path, int bits, CheckpointSummary& summary) {
  HeadFile f;
  GPUHUB_RETURN_IF_ERROR(f.Open(path));
  GPUHUB_ASSIGN_OR_RETURN(std::string first, f.Read(0, 8));
  GPUHUB_ASSIGN_OR_RETURN(std::uint64_t n, SafetensorsHeaderLength(first, f.size(), path));
  GPUHUB_ASSIGN_OR_RETURN(std::string head, f.Read(0, 8 + n));
  GPUHUB_ASSIGN_OR_RETURN(SafetensorsHeader header, ParseSafetensorsHeader(head, f.size(), path));
  AddSafetensorsToSummary(header, fs::path(path).filename().string(), bits, summary);
  return Status::Ok();
}

Result<GgufFile> ReadGgufFile(const std::string& path) {
  HeadFile f;
  GPUHUB_RETURN_IF_ERROR(f.Open(path));
  std::uint64_t want = std::min<std::uint64_t>(f.size(), 4 << 20);
  for (int attempt = 0; attempt < 16; ++attempt) {
    GPUHUB_ASSIGN_OR_RETURN(std::string head, f.Read(0, want));
    std::uint64_t more = 0;
    auto g = ParseGgufHeader(head, f.size(), path, &more);
    if (g.ok() || more == 0 || more <= want) return g;
    want = more;
  }
  return Status::InvalidArgument(path + ": GGUF header too large");
}

bool IsGgufSplitPart(const std::string& name) {
  // llama.cpp split files: <name>-00001-of-00003.gguf
  auto pos = name.rfind("-of-");
  return pos != std::string::npos && pos >= 6 && EndsWith(name, ".gguf");
}

struct FolderContents {
  bool has_config = false;
  bool has_index = false;
  std::vector<std::string> safetensors;  // file names, sorted
  std::vector<std::string> gguf;
};

Result<FolderContents> ListFolder(const std::string& dir) {
  FolderContents c;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return Status::InvalidArgument(dir + ": cannot list folder: " + ec.message());
  std::size_t seen = 0;
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::InvalidArgument(dir + ": cannot list folder: " + ec.message());
    if (++seen > 100'000) return Status::InvalidArgument(dir + ": too many files in the folder");
    std::string name = it->path().filename().string();
    if (name == "config.json") c.has_config = true;
    if (name == "model.safetensors.index.json") c.has_index = true;
    std::string ext = LowerExtension(it->path());
    if (ext == ".safetensors") c.safetensors.push_back(name);
    if (ext == ".gguf") c.gguf.push_back(name);
  }
  std::sort(c.safetensors.begin(), c.safetensors.end());
  std::sort(c.gguf.begin(), c.gguf.end());
  if (c.safetensors.size() > kMaxCheckpointFiles || c.gguf.size() > kMaxCheckpointFiles) {
    return Status::InvalidArgument(dir + ": more than " + std::to_string(kMaxCheckpointFiles) +
                                   " weight files");
  }
  return c;
}

// Reads safetensors headers of a folder: the shards the index names (all must exist and hold the
// tensors the index maps to them), else every *.safetensors file.
Result<CheckpointSummary> ReadSafetensorsFolder(const std::string& dir, const FolderContents& c,
                                                int bits) {
  CheckpointSummary summary;
  summary.format = "safetensors";
  std::vector<std::string> shards = c.safetensors;
  double index_total = 0;
  if (c.has_index) {
    std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
    GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(index_path, kMaxSafetensorsIndexBytes));
    GPUHUB_ASSIGN_OR_RETURN(SafetensorsIndex index, ParseSafetensorsIndex(text, index_path));
    shards = index.shards;
    index_total = index.total_size;
    for (const auto& shard : shards) {
      std::string path = (fs::path(dir) / shard).string();
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        return Status::InvalidArgument(index_path + ": shard '" + shard +
                                       "' named by the index is missing (incomplete download?)");
      }
    }
  }
  if (shards.empty()) return Status::NotFound(dir + ": no *.safetensors files");
  for (const auto& shard : shards) {
    GPUHUB_RETURN_IF_ERROR(ReadSafetensorsFile((fs::path(dir) / shard).string(), bits, summary));
  }
  if (index_total > 0 && std::fabs(index_total - summary.bytes) > 0.001 * summary.bytes) {
    summary.notes.push_back("index metadata.total_size " + FormatFixed(index_total, 0) +
                            " differs from the headers' " + FormatFixed(summary.bytes, 0) +
                            " bytes");
  }
  FinishSummary(summary);
  return summary;
}

Result<std::pair<CheckpointSummary, GgufFile>> ReadGgufFiles(
    const std::string& dir, const std::vector<std::string>& files) {
  CheckpointSummary summary;
  GgufFile first;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::string path = dir.empty() ? files[i] : (fs::path(dir) / files[i]).string();
    GPUHUB_ASSIGN_OR_RETURN(GgufFile g, ReadGgufFile(path));
    AddGgufToSummary(g, fs::path(path).filename().string(), summary);
    if (i == 0) {
      first = std::move(g);
    } else {
      for (auto& t : g.tensors) first.tensors.push_back(std::move(t));
    }
  }
  FinishSummary(summary);
  return std::make_pair(std::move(summary), std::move(first));
}

// The shape now counts what the checkpoint holds: its tensors are the truth (packed weights
// counted as weights; extra tensors such as DeepSeek-V3's MTP layer included).
void AttachCheckpoint(ModelShape& shape, CheckpointSummary summary) {
  if (summary.params > 0) {
    double config_params = shape.total_params;
    double inactive = shape.total_params - shape.active_params;
    if (config_params > 0 && std::fabs(summary.params - config_params) > 0.005 * config_params) {
      shape.notes.push_back("checkpoint tensors hold " + FormatFixed(summary.params, 0) +
                            " params, config.json shapes give " + FormatFixed(config_params, 0) +
                            ": the checkpoint's count is used");
    }
    shape.total_params = summary.params;
    shape.active_params = std::clamp(summary.params - inactive, 1.0, summary.params);
  }
  shape.checkpoint = std::move(summary);
}

Result<ModelShape> LoadConfigFile(const std::string& path, const std::string& id) {
  GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(path, kMaxConfigJsonBytes));
  auto shape = ParseHfConfig(text, id);
  if (!shape.ok()) return shape.status();
  shape->source = path;
  return shape;
}

int BitsOf(const ModelShape& s) { return s.quantization_bits; }

Result<ModelShape> LoadFolder(const std::string& dir) {
  GPUHUB_ASSIGN_OR_RETURN(FolderContents c, ListFolder(dir));
  std::string id = fs::path(dir).filename().string();
  if (id.empty()) id = fs::path(dir).parent_path().filename().string();
  if (c.has_config) {
    GPUHUB_ASSIGN_OR_RETURN(ModelShape shape,
                            LoadConfigFile((fs::path(dir) / "config.json").string(), id));
    shape.source = dir;
    if (c.has_index || !c.safetensors.empty()) {
      GPUHUB_ASSIGN_OR_RETURN(CheckpointSummary summary,
                              ReadSafetensorsFolder(dir, c, BitsOf(shape)));
      AttachCheckpoint(shape, std::move(summary));
    } else if (!c.gguf.empty()) {
      // A GGUF export next to its config.json: the config gives the architecture, the GGUF the
      // exact tensor bytes.
      if (c.gguf.size() > 1 && !std::all_of(c.gguf.begin(), c.gguf.end(), IsGgufSplitPart)) {
        return Status::InvalidArgument(dir + ": holds " + std::to_string(c.gguf.size()) +
                                       " .gguf files; name the one to size");
      }
      GPUHUB_ASSIGN_OR_RETURN(auto read, ReadGgufFiles(dir, c.gguf));
      AttachCheckpoint(shape, std::move(read.first));
    } else {
      shape.notes.push_back("no *.safetensors in the folder: sized from config.json alone");
    }
    return shape;
  }
  if (!c.gguf.empty()) {
    std::vector<std::string> files = c.gguf;
    if (files.size() > 1) {
      bool all_split = std::all_of(files.begin(), files.end(), IsGgufSplitPart);
      if (!all_split) {
        return Status::InvalidArgument(dir + ": holds " + std::to_string(files.size()) +
                                       " .gguf files; name the one to size");
      }
    }
    GPUHUB_ASSIGN_OR_RETURN(auto read, ReadGgufFiles(dir, files));
    GPUHUB_ASSIGN_OR_RETURN(ModelShape shape, ShapeFromGguf(read.second, id));
    shape.source = dir;
    AttachCheckpoint(shape, std::move(read.first));
    return shape;
  }
  if (!c.safetensors.empty()) {
    return Status::InvalidArgument(dir +
                                   ": has *.safetensors but no config.json (needed for the "
                                   "architecture: layers, heads, KV width)");
  }
  return Status::InvalidArgument(dir + ": no config.json, *.safetensors or *.gguf in this folder");
}

Result<ModelShape> LoadPath(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return LoadFolder(path);
  fs::path p(path);
  std::string ext = LowerExtension(p);
  std::string dir = p.parent_path().string();
  if (dir.empty()) dir = ".";
  if (ext == ".gguf") {
    GPUHUB_ASSIGN_OR_RETURN(auto read, ReadGgufFiles("", {path}));
    GPUHUB_ASSIGN_OR_RETURN(ModelShape shape, ShapeFromGguf(read.second, p.stem().string()));
    shape.source = path;
    AttachCheckpoint(shape, std::move(read.first));
    return shape;
  }
  if (ext == ".safetensors" || p.filename() == "model.safetensors.index.json") {
    std::string config = (fs::path(dir) / "config.json").string();
    if (!fs::is_regular_file(config, ec)) {
      return Status::InvalidArgument(path +
                                     ": no config.json beside it (needed for the "
                                     "architecture: layers, heads, KV width)");
    }
    std::string id = fs::absolute(fs::path(dir), ec).filename().string();
    GPUHUB_ASSIGN_OR_RETURN(ModelShape shape, LoadConfigFile(config, id));
    shape.source = path;
    CheckpointSummary summary;
    if (ext == ".safetensors") {
      GPUHUB_RETURN_IF_ERROR(ReadSafetensorsFile(path, BitsOf(shape), summary));
      FinishSummary(summary);
    } else {
      FolderContents c;
      c.has_index = true;
      GPUHUB_ASSIGN_OR_RETURN(summary, ReadSafetensorsFolder(dir, c, BitsOf(shape)));
    }
    AttachCheckpoint(shape, std::move(summary));
    return shape;
  }
  // Anything else is read as a config.json; the id is its folder's name (or the file's stem).
  std::string id = fs::absolute(fs::path(dir), ec).filename().string();
  if (p.filename() != "config.json" || id.empty()) id = p.stem().string();
  return LoadConfigFile(path, id);
}


constexpr std::string_view kQuantizedSuffixes[] = {"-gptq-int4", "-gptq-int8", "-awq", "-fp8",
                                                   "-int4", "-int8", "-bnb-4bit"};
constexpr std::string_view kTunedSuffixes[] = {"-instruct", "-chat", "-it"};

bool QuantizedVariant(const std::string& spec) {
  std::string lower = ToLower(spec);
  for (std::string_view s : kQuantizedSuffixes) {
    if (EndsWith(lower, s)) return true;
  }
  return false;
}

// The bundled ids a variant's name may stand for, most specific first: without a quantization
// suffix, then without the instruction-tuning suffix ("-chat-hf" -> "-hf" for Llama 2), or with
// one for a base that is only bundled as its tuned release ("gemma-3-27b" -> "gemma-3-27b-it").
std::vector<std::string> VariantBaseCandidates(const std::string& spec) {
  std::string name = ToLower(spec);
  std::vector<std::string> out;
  for (std::string_view s : kQuantizedSuffixes) {
    if (EndsWith(name, s)) {
      name.resize(name.size() - s.size());
      out.push_back(name);
      break;
    }
  }
  if (EndsWith(name, "-chat-hf")) out.push_back(name.substr(0, name.size() - 8) + "-hf");
  bool tuned = false;
  for (std::string_view s : kTunedSuffixes) {
    if (EndsWith(name, s)) {
      out.push_back(name.substr(0, name.size() - s.size()));
      tuned = true;
      break;
    }
  }
  if (!tuned) {
    for (std::string_view s : kTunedSuffixes) out.push_back(name + std::string(s));
  }
  return out;
}

Result<ModelShape> FindBundled(const std::string& spec, const std::string& data_dir);

}  // namespace

std::string BundledFileName(std::string_view id) {
  std::string out;
  for (char c : id) {
    if (c == '/') {
      out += "--";
    } else {
      out += c;
    }
  }
  return out + ".json";
}

std::string BundledIdFromFileName(std::string_view file_name) {
  std::string_view stem = file_name;
  if (EndsWith(stem, ".json")) stem.remove_suffix(5);
  std::string id(stem);
  if (auto pos = id.find("--"); pos != std::string::npos) id.replace(pos, 2, "/");
  return id;
}

Result<CheckpointSummary> ReadCheckpoint(const std::string& path, int quantization_bits) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    GPUHUB_ASSIGN_OR_RETURN(FolderContents c, ListFolder(path));
    if (c.has_index || !c.safetensors.empty())
      return ReadSafetensorsFolder(path, c, quantization_bits);
    if (!c.gguf.empty()) {
      GPUHUB_ASSIGN_OR_RETURN(auto read, ReadGgufFiles(path, c.gguf));
      return std::move(read.first);
    }
    return Status::NotFound(path + ": no *.safetensors or *.gguf files");
  }
  std::string ext = LowerExtension(fs::path(path));
  if (ext == ".gguf") {
    GPUHUB_ASSIGN_OR_RETURN(auto read, ReadGgufFiles("", {path}));
    return std::move(read.first);
  }
  CheckpointSummary summary;
  GPUHUB_RETURN_IF_ERROR(ReadSafetensorsFile(path, quantization_bits, summary));
  FinishSummary(summary);
  return summary;
}

Result<std::vector<BundledModel>> ListBundledModels(const std::string& data_dir) {
  std::string dir = (fs::path(data_dir) / "models").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound(dir + ": bundled models folder not found (set GPUHUB_DATA_DIR?)");
  }
  std::vector<std::string> files;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return Status::InvalidArgument(dir + ": cannot list: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::InvalidArgument(dir + ": cannot list: " + ec.message());
    std::string name = it->path().filename().string();
    if (EndsWith(name, ".json") && it->is_regular_file(ec)) files.push_back(name);
    if (files.size() > kMaxBundledModels) return Status::InvalidArgument(dir + ": too many files");
  }
  std::vector<BundledModel> out;
  for (const auto& name : files) {
    BundledModel m;
    m.id = BundledIdFromFileName(name);
    m.path = (fs::path(dir) / name).string();
    GPUHUB_ASSIGN_OR_RETURN(m.shape, LoadConfigFile(m.path, m.id));
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const BundledModel& a, const BundledModel& b) {
    return ToLower(a.id) < ToLower(b.id);
  });
  return out;
}

Result<ModelShape> LoadModel(std::string_view spec_in, const std::string& data_dir) {
  std::string spec(Trim(spec_in));
  if (spec.empty()) {
    return Status::InvalidArgument(
        "model is empty: give a preset (7b, 13b, 34b, 70b, 405b), a "
        "path to a config.json, checkpoint folder or .gguf file, or a "
        "bundled model id (`gpuhub models` lists them)");
  }
  if (spec.size() > 4096 || spec.find('\0') != std::string::npos) {
    return Status::InvalidArgument("model name or path is too long or malformed");
  }
  if (auto preset = PresetModel(spec); preset.ok()) {
    preset->source = "preset";
    return preset;
  }
  std::error_code ec;
  if (fs::exists(spec, ec)) return LoadPath(spec);

  auto bundled = FindBundled(spec, data_dir);
  if (bundled.status().code() != StatusCode::kNotFound) return bundled;
  // A fine-tuned or quantized variant of a bundled base ("...-Instruct", "-chat-hf", "-it",
  // "-GPTQ-Int4", "-AWQ") has the base's shapes: size it with them and say so.
  for (const std::string& base : VariantBaseCandidates(spec)) {
    auto shape = FindBundled(base, data_dir);
    if (!shape.ok()) continue;
    shape->notes.push_back("sized with the shapes of the bundled '" + shape->id + "': '" +
                           spec.substr(0, 200) +
                           "' is a variant of it with the same architecture (pass its "
                           "config.json to size it from its own)");
    shape->quantized_variant = QuantizedVariant(spec);
    return shape;
  }
  return bundled;
}

namespace {

Result<ModelShape> FindBundled(const std::string& spec, const std::string& data_dir) {
  // Bundled ids: exact (case-insensitive) id, else the name after the organisation when unique.
  std::error_code ec;
  std::string dir = (fs::path(data_dir) / "models").string();
  std::string wanted = ToLower(spec);
  std::vector<std::pair<std::string, std::string>> by_name;  // id, file
  fs::directory_iterator it(dir, ec), end;
  if (!ec) {
    std::size_t seen = 0;
    for (; it != end && ++seen <= kMaxBundledModels; it.increment(ec)) {
      if (ec) break;
      std::string name = it->path().filename().string();
      if (!EndsWith(name, ".json")) continue;
      std::string id = BundledIdFromFileName(name);
      std::string lower = ToLower(id);
      if (lower == wanted) {
        auto shape = LoadConfigFile(it->path().string(), id);
        // The bundled file by its place in the data folder, never the host's absolute path (the
        // API returns it to anyone).
        if (shape.ok()) shape->source = "data/models/" + name;
        return shape;
      }
      auto slash = lower.find('/');
      if (slash != std::string::npos && lower.substr(slash + 1) == wanted) {
        by_name.emplace_back(id, name);
      }
    }
  }
  if (by_name.size() == 1) {
    auto shape = LoadConfigFile((fs::path(dir) / by_name[0].second).string(), by_name[0].first);
    if (shape.ok()) shape->source = "data/models/" + by_name[0].second;
    return shape;
  }
  if (by_name.size() > 1) {
    std::string ids;
    for (const auto& [id, file] : by_name) ids += (ids.empty() ? "" : ", ") + id;
    return Status::InvalidArgument("model '" + spec.substr(0, 200) + "' is ambiguous: " + ids);
  }
  return Status::NotFound(
      "unknown model '" + spec.substr(0, 200) +
      "': not a preset (7b, 13b, 34b, 70b, 405b), not an existing path, and not "
      "a bundled model id (`gpuhub models` lists them)");
}

}  // namespace

}  // namespace gpuhub::sizing
