#include "storage/ceph.h"

#include <nlohmann/json.hpp>

#include <utility>

#include "core/strings.h"

namespace gpuhub::storage {

using json = nlohmann::json;

namespace {

// Ceph's errno values as the CLI's exit status (Linux numbering).
constexpr int kEperm = 1, kEnoent = 2, kEagain = 11, kEacces = 13, kEbusy = 16, kEexist = 17,
              kEinval = 22, kEnotempty = 39, kEnotsup = 95, kEtimedout = 110;

// JSON from a CLI we trust, but bound its nesting before a recursive parser sees it.
constexpr int kMaxJsonDepth = 16;

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool AlnumChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

std::string Command(const std::vector<std::string>& args) {
  std::string text = "ceph";
  for (const auto& a : args) {
    if (a.starts_with("--format")) break;
    text += " " + a;
  }
  return text;
}

// The line of stderr that says what went wrong: Ceph's "Error EXXX: ..." when there is one (a
// warning may come first), else the last line that says anything.
std::string CephWords(const ProcessResult& result) {
  const std::string& text = result.stderr_text.empty() ? result.stdout_text : result.stderr_text;
  std::string last;
  for (const auto& raw : Split(text, '\n')) {
    std::string line(Trim(raw));
    if (line.empty()) continue;
    if (line.starts_with("Error ")) return line.substr(0, 300);
    last = line;
  }
  return last.substr(0, 300);
}

Result<json> ParseJson(const std::string& text, std::string_view what) {
  if (!JsonNestingWithin(text, kMaxJsonDepth)) {
    return Status::Internal(std::string(what) + ": answer nested too deep");
  }
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return Status::Internal(std::string(what) + ": not JSON: " + text.substr(0, 200));
  }
  return doc;
}

std::string StringField(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Ceph prints byte counts as integers, and a missing quota as the string "infinite".
Result<std::int64_t> Bytes(const json& object, const char* key, std::string_view what) {
  auto it = object.find(key);
  if (it == object.end()) return Status::Internal(std::string(what) + ": no " + key);
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (it->is_number_unsigned()) {
    auto value = it->get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(INT64_MAX)) return INT64_MAX;
    return static_cast<std::int64_t>(value);
  }
  if (it->is_string() && it->get<std::string>() == "infinite") return std::int64_t{0};
  return Status::Internal(std::string(what) + ": " + key + " is " + it->dump());
}

Status ValidateBytes(std::int64_t bytes) {
  if (bytes < 1 || bytes > kMaxSubvolumeBytes) {
    return Status::InvalidArgument("a subvolume's size must be 1.." +
                                   std::to_string(kMaxSubvolumeBytes) + " bytes, got " +
                                   std::to_string(bytes));
  }
  return Status::Ok();
}

std::string Entity(const std::string& client_id) { return "client." + client_id; }

}  // namespace

Status ValidateCephName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > kMaxCephNameBytes) {
    return Status::InvalidArgument(std::string(what) + " must be 1.." +
                                   std::to_string(kMaxCephNameBytes) + " characters");
  }
  if (!AlnumChar(name.front())) {
    return Status::InvalidArgument(std::string(what) + " must start with a letter or digit");
  }
  for (char c : name) {
    if (!NameChar(c)) {
      return Status::InvalidArgument(std::string(what) +
                                     " may hold only letters, digits, '_', '.' and '-'");
    }
  }
  return Status::Ok();
}

Status ValidateCephPath(std::string_view path) {
  if (path.size() < 2 || path.size() > kMaxCephPathBytes || path.front() != '/') {
    return Status::InvalidArgument("a path must be absolute and at most " +
                                   std::to_string(kMaxCephPathBytes) + " bytes");
  }
  for (const auto& part : Split(path.substr(1), '/')) {
    if (part == "." || part == ".." || part.empty()) {
      return Status::InvalidArgument("a path may not hold empty, '.' or '..' components");
    }
    for (char c : part) {
      if (!NameChar(c)) {
        return Status::InvalidArgument("a path may hold only letters, digits, '_', '.', '-' "
                                       "and '/'");
      }
    }
  }
  return Status::Ok();
}

namespace ceph_internal {

std::vector<std::string> Argv(const CephConfig& config, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {config.ceph_binary};
  if (!config.conf_path.empty()) argv.insert(argv.end(), {"--conf", config.conf_path});
  argv.insert(argv.end(), {"--name", config.name});
  if (!config.keyring_path.empty()) argv.insert(argv.end(), {"--keyring", config.keyring_path});
  argv.insert(argv.end(), {"--connect-timeout", std::to_string(config.connect_timeout.count())});
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--format", "json"});
  return argv;
}

Status MapError(const std::vector<std::string>& args, const ProcessResult& result) {
  const std::string words = CephWords(result);
  const std::string message =
      Command(args) + ": " + (words.empty() ? DescribeFailure({"ceph"}, result) : words);
  switch (result.exit_code) {
    case kEnoent:
      return Status::NotFound(message);
    case kEexist:
      return Status::Conflict(message);
    case kEnotempty:
    case kEbusy:
    case kEnotsup:
      return Status::FailedPrecondition(message);
    case kEinval:
      return Status::InvalidArgument(message);
    case kEagain:
    case kEtimedout:
      return Status::Unavailable(message);
    case kEacces:
      return Status::PermissionDenied(message);
    default:
      break;
  }
  // The CLI exits 1 with "timed out" (or "[errno 110] RADOS timed out (error connecting to the
  // cluster)") when no mon answers within --connect-timeout.
  if (words.find("timed out") != std::string::npos ||
      words.find("error connecting to the cluster") != std::string::npos) {
    return Status::Unavailable(message);
  }
  if (result.exit_code == kEperm && words.find("Error EPERM") != std::string::npos) {
    return Status::PermissionDenied(message);
  }
  return Status::Internal(message);
}

Result<SubvolumeInfo> ParseSubvolumeInfo(const std::string& text) {
  auto doc = ParseJson(text, "subvolume info");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Status::Internal("subvolume info: not an object");
  SubvolumeInfo info;
  info.state = StringField(*doc, "state");
  info.path = StringField(*doc, "path");
  info.data_pool = StringField(*doc, "data_pool");
  // A subvolume kept for its retained snapshots has no path, quota or usage any more.
  if (info.state == "snapshot-retained") return info;
  auto quota = Bytes(*doc, "bytes_quota", "subvolume info");
  if (!quota.ok()) return quota.status();
  auto used = Bytes(*doc, "bytes_used", "subvolume info");
  if (!used.ok()) return used.status();
  info.bytes_quota = *quota;
  info.bytes_used = *used;
  if (Status s = ValidateCephPath(info.path); !s.ok()) {
    return Status::Internal("subvolume info: path '" + info.path.substr(0, 200) + "': " +
                            s.message());
  }
  return info;
}

Result<SnapshotInfo> ParseSnapshotInfo(const std::string& text) {
  auto doc = ParseJson(text, "snapshot info");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Status::Internal("snapshot info: not an object");
  SnapshotInfo info;
  info.created_at = StringField(*doc, "created_at");
  info.data_pool = StringField(*doc, "data_pool");
  info.has_pending_clones = StringField(*doc, "has_pending_clones") == "yes";
  if (info.created_at.empty()) return Status::Internal("snapshot info: no created_at");
  return info;
}

Result<CloneStatus> ParseCloneStatus(const std::string& text) {
  auto doc = ParseJson(text, "clone status");
  if (!doc.ok()) return doc.status();
  auto status = doc->is_object() ? doc->find("status") : doc->end();
  if (!doc->is_object() || status == doc->end() || !status->is_object()) {
    return Status::Internal("clone status: no status object");
  }
  CloneStatus clone;
  clone.state = StringField(*status, "state");
  if (clone.state.empty()) return Status::Internal("clone status: no state");
  auto failure = status->find("failure");
  if (failure != status->end() && failure->is_object()) {
    clone.failure = "errno " + StringField(*failure, "errno") + ": " +
                    StringField(*failure, "error_msg");
  }
  return clone;
}

Result<CephHealth> ParseHealth(const std::string& text) {
  auto doc = ParseJson(text, "health");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Status::Internal("health: not an object");
  CephHealth health;
  health.status = StringField(*doc, "status");
  if (health.status.empty()) return Status::Internal("health: no status");
  auto checks = doc->find("checks");
  if (checks != doc->end() && checks->is_object()) {
    for (const auto& [name, check] : checks->items()) {
      std::string message;
      if (check.is_object() && check.contains("summary") && check["summary"].is_object()) {
        message = StringField(check["summary"], "message");
      }
      health.checks.push_back(name + (message.empty() ? "" : ": " + message));
    }
  }
  return health;
}

Result<std::vector<std::string>> ParseNames(const std::string& text) {
  auto doc = ParseJson(text, "list");
  if (!doc.ok()) return doc.status();
  if (!doc->is_array()) return Status::Internal("list: not an array");
  std::vector<std::string> names;
  for (const auto& item : *doc) {
    std::string name = item.is_object() ? StringField(item, "name") : "";
    if (Status s = ValidateCephName("a listed name", name); !s.ok()) {
      return Status::Internal("list: '" + name.substr(0, 100) + "': " + s.message());
    }
    names.push_back(std::move(name));
  }
  return names;
}

Result<std::string> ParseAuthKey(const std::string& text) {
  auto doc = ParseJson(text, "auth");
  if (!doc.ok()) return doc.status();
  if (!doc->is_array() || doc->size() != 1 || !(*doc)[0].is_object()) {
    return Status::Internal("auth: expected one entity");
  }
  std::string key = StringField((*doc)[0], "key");
  if (key.empty()) return Status::Internal("auth: no key");
  return key;
}

Result<int> ParsePoolSize(const std::string& text) {
  auto doc = ParseJson(text, "pool size");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object() || !doc->contains("size") || !(*doc)["size"].is_number_integer()) {
    return Status::Internal("pool size: no size");
  }
  return (*doc)["size"].get<int>();
}

}  // namespace ceph_internal

using namespace ceph_internal;

CephFs::CephFs(CephConfig config)
    : CephFs(std::move(config), [](const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout) {
        return RunProcess(argv, timeout, "", kMaxCephOutputBytes);
      }) {}

CephFs::CephFs(CephConfig config, CephRunner runner)
    : config_(std::move(config)), runner_(std::move(runner)) {}

Status CephFs::ValidateFs() const {
  return ValidateCephName("the file system name", config_.fs_name);
}

Result<std::string> CephFs::Run(const std::vector<std::string>& args) {
  auto result = runner_(Argv(config_, args), config_.timeout);
  if (!result.ok()) {
    // Past the deadline (a mon or mgr that never answers) or a flood: retry later.
    const Status& s = result.status();
    return Status(s.code(), Command(args) + ": " + s.message());
  }
  if (result->exit_code != 0) return MapError(args, *result);
  return std::move(result->stdout_text);
}

Status CephFs::CreateSubvolume(const std::string& name, std::int64_t bytes) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", name); !s.ok()) return s;
  if (Status s = ValidateBytes(bytes); !s.ok()) return s;
  auto exists = SubvolumeExists(name);
  if (!exists.ok()) return exists.status();
  if (*exists) return Status::Conflict("subvolume '" + name + "' exists");
  auto out = Run({"fs", "subvolume", "create", config_.fs_name, name, "--size",
                  std::to_string(bytes)});
  return out.status();
}

Status CephFs::ResizeSubvolume(const std::string& name, std::int64_t bytes) {
  if (Status s = ValidateBytes(bytes); !s.ok()) return s;
  auto info = GetSubvolumeInfo(name);
  if (!info.ok()) return info.status();
  if (info->bytes_quota > 0 && bytes < info->bytes_quota) {
    return Status::InvalidArgument("subvolume '" + name + "' has a quota of " +
                                   std::to_string(info->bytes_quota) +
                                   " bytes: it can grow, never shrink (asked " +
                                   std::to_string(bytes) + ")");
  }
  if (bytes == info->bytes_quota) return Status::Ok();
  // --no_shrink: Ceph itself refuses a quota below what is used, should one race with us.
  auto out = Run({"fs", "subvolume", "resize", config_.fs_name, name, std::to_string(bytes),
                  "--no_shrink"});
  return out.status();
}

Result<SubvolumeInfo> CephFs::GetSubvolumeInfo(const std::string& name) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", name); !s.ok()) return s;
  auto out = Run({"fs", "subvolume", "info", config_.fs_name, name});
  if (!out.ok()) return out.status();
  return ParseSubvolumeInfo(*out);
}

Result<bool> CephFs::SubvolumeExists(const std::string& name) {
  auto info = GetSubvolumeInfo(name);
  if (info.ok()) return true;
  if (info.status().code() == StatusCode::kNotFound) return false;
  return info.status();
}

Status CephFs::RemoveSubvolume(const std::string& name) {
  auto snapshots = ListSnapshots(name);
  if (!snapshots.ok()) {
    if (snapshots.status().code() == StatusCode::kNotFound) return Status::Ok();
    return snapshots.status();
  }
  for (const auto& snapshot : *snapshots) {
    if (Status s = RemoveSnapshot(name, snapshot); !s.ok()) return s;
  }
  // A subvolume kept only for retained snapshots is gone with its last snapshot; --force makes
  // that (and a retry) not an error.
  auto out = Run({"fs", "subvolume", "rm", config_.fs_name, name, "--force"});
  return out.status();
}

Status CephFs::CreateSnapshot(const std::string& subvolume, const std::string& snapshot) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", subvolume); !s.ok()) return s;
  if (Status s = ValidateCephName("a snapshot name", snapshot); !s.ok()) return s;
  return Run({"fs", "subvolume", "snapshot", "create", config_.fs_name, subvolume, snapshot})
      .status();
}

Result<SnapshotInfo> CephFs::GetSnapshotInfo(const std::string& subvolume,
                                             const std::string& snapshot) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", subvolume); !s.ok()) return s;
  if (Status s = ValidateCephName("a snapshot name", snapshot); !s.ok()) return s;
  auto out = Run({"fs", "subvolume", "snapshot", "info", config_.fs_name, subvolume, snapshot});
  if (!out.ok()) return out.status();
  return ParseSnapshotInfo(*out);
}

Result<std::vector<std::string>> CephFs::ListSnapshots(const std::string& subvolume) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", subvolume); !s.ok()) return s;
  auto out = Run({"fs", "subvolume", "snapshot", "ls", config_.fs_name, subvolume});
  if (!out.ok()) return out.status();
  auto names = ParseNames(*out);
  if (names.ok() && names->size() > kMaxSnapshotsPerSubvolume) {
    return Status::Internal("subvolume '" + subvolume + "' has " + std::to_string(names->size()) +
                            " snapshots, more than " + std::to_string(kMaxSnapshotsPerSubvolume));
  }
  return names;
}

Status CephFs::RemoveSnapshot(const std::string& subvolume, const std::string& snapshot) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", subvolume); !s.ok()) return s;
  if (Status s = ValidateCephName("a snapshot name", snapshot); !s.ok()) return s;
  return Run({"fs", "subvolume", "snapshot", "rm", config_.fs_name, subvolume, snapshot,
              "--force"})
      .status();
}

Status CephFs::CloneSnapshot(const std::string& subvolume, const std::string& snapshot,
                             const std::string& target) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a subvolume name", subvolume); !s.ok()) return s;
  if (Status s = ValidateCephName("a snapshot name", snapshot); !s.ok()) return s;
  if (Status s = ValidateCephName("a clone's name", target); !s.ok()) return s;
  return Run({"fs", "subvolume", "snapshot", "clone", config_.fs_name, subvolume, snapshot,
              target})
      .status();
}

Result<CloneStatus> CephFs::GetCloneStatus(const std::string& target) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a clone's name", target); !s.ok()) return s;
  auto out = Run({"fs", "clone", "status", config_.fs_name, target});
  if (!out.ok()) return out.status();
  return ParseCloneStatus(*out);
}

Result<std::string> CephFs::Authorize(const std::string& client_id, const std::string& path,
                                      Access access) {
  if (Status s = ValidateFs(); !s.ok()) return s;
  if (Status s = ValidateCephName("a client id", client_id); !s.ok()) return s;
  if (Status s = ValidateCephPath(path); !s.ok()) return s;
  const std::string mode = access == Access::kReadWrite ? "rw" : "r";
  auto out = Run({"fs", "authorize", config_.fs_name, Entity(client_id), path, mode});
  if (out.ok()) return ParseAuthKey(*out);
  // An existing client with other caps (read-write becoming read-only, or back): Ceph's
  // authorize refuses to change them, so set the same caps it would have made.
  if (out.status().code() != StatusCode::kInvalidArgument ||
      out.status().message().find("already has fs capabilities") == std::string::npos) {
    return out.status();
  }
  auto caps = Run({"auth", "caps", Entity(client_id), "mds",
                   "allow " + mode + " fsname=" + config_.fs_name + " path=" + path, "mon",
                   "allow r fsname=" + config_.fs_name, "osd",
                   "allow " + mode + " tag cephfs data=" + config_.fs_name});
  if (!caps.ok()) return caps.status();
  auto got = Run({"auth", "get", Entity(client_id)});
  if (!got.ok()) return got.status();
  return ParseAuthKey(*got);
}

Status CephFs::Deauthorize(const std::string& client_id) {
  if (Status s = ValidateCephName("a client id", client_id); !s.ok()) return s;
  return Run({"auth", "rm", Entity(client_id)}).status();
}

Result<int> CephFs::PoolSize(const std::string& pool) {
  if (Status s = ValidateCephName("a pool name", pool); !s.ok()) return s;
  auto out = Run({"osd", "pool", "get", pool, "size"});
  if (!out.ok()) return out.status();
  return ParsePoolSize(*out);
}

Result<int> CephFs::DataPoolSize() {
  if (Status s = ValidateFs(); !s.ok()) return s;
  auto out = Run({"fs", "ls"});
  if (!out.ok()) return out.status();
  auto doc = ParseJson(*out, "fs ls");
  if (!doc.ok()) return doc.status();
  if (doc->is_array()) {
    for (const auto& fs : *doc) {
      if (!fs.is_object() || StringField(fs, "name") != config_.fs_name) continue;
      auto pools = fs.find("data_pools");
      if (pools == fs.end() || !pools->is_array() || pools->empty() ||
          !(*pools)[0].is_string()) {
        return Status::Internal("fs ls: file system '" + config_.fs_name + "' has no data pool");
      }
      return PoolSize((*pools)[0].get<std::string>());
    }
  }
  return Status::NotFound("file system '" + config_.fs_name + "' does not exist");
}

Result<CephHealth> CephFs::Health() {
  auto out = Run({"health"});
  if (!out.ok()) return out.status();
  return ParseHealth(*out);
}

}  // namespace gpuhub::storage
