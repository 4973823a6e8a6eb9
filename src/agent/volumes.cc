#include "agent/volumes.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "agent/config.h"
#include "agent/limits.h"
#include "agent/process.h"
#include "core/file.h"
#include "core/strings.h"

namespace gpuhub::agent {
namespace {

bool Lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool Alnum(char c) { return Lower(c) || (c >= 'A' && c <= 'Z'); }

Status Bad(const NetworkVolumeSpec& v, const std::string& field) {
  return Status::InvalidArgument("network volume " + std::to_string(v.id) + ": bad " + field);
}

bool NameOk(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-') return false;
  for (char c : s) {
    if (!Lower(c) && c != '-') return false;
  }
  return true;
}

// "host:port", "v2:host:port": a name or IPv4 of [A-Za-z0-9.-] and a port 1..65535.
bool MonitorOk(std::string m) {
  if (m.rfind("v1:", 0) == 0 || m.rfind("v2:", 0) == 0) m = m.substr(3);
  const auto colon = m.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == m.size()) return false;
  const std::string host = m.substr(0, colon), port = m.substr(colon + 1);
  if (host.size() > 253 || !Alnum(host.front())) return false;
  for (char c : host) {
    if (!Alnum(c) && c != '.' && c != '-') return false;
  }
  if (port.size() > 5) return false;
  for (char c : port) {
    if (c < '0' || c > '9') return false;
  }
  const int p = std::stoi(port);
  return p >= 1 && p <= 65535;
}

bool PathOk(const std::string& p) {
  if (p.size() > 255 || p.rfind("/volumes/", 0) != 0 || p.back() == '/' ||
      p.find("//") != std::string::npos || p.find("/.") != std::string::npos) {
    return false;
  }
  for (char c : p) {
    if (!Alnum(c) && c != '_' && c != '.' && c != '-' && c != '/') return false;
  }
  return true;
}

bool ClientOk(const std::string& s) {
  if (s.empty() || s.size() > 64 || !Lower(s.front())) return false;
  for (char c : s) {
    if (!Lower(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

bool KeyOk(const std::string& k) {
  if (k.empty() || k.size() > 128) return false;
  for (char c : k) {
    if (!Alnum(c) && c != '+' && c != '/' && c != '=') return false;
  }
  return true;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string_view oct = s.substr(i + 1, 3);
      if (oct[0] >= '0' && oct[0] <= '3' && oct[1] >= '0' && oct[1] <= '7' &&
          oct[2] >= '0' && oct[2] <= '7') {
        out.push_back(static_cast<char>((oct[0] - '0') * 64 + (oct[1] - '0') * 8 + (oct[2] - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// /proc files say they are 0 bytes long (core's ReadFile trusts the size): read to the end, at
// most `max_bytes`.
Result<std::string> ReadToEnd(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Unavailable(path + ": cannot open: " + std::strerror(errno));
  std::string data;
  char buf[8192];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    data.append(buf, static_cast<std::size_t>(in.gcount()));
    if (data.size() > max_bytes) return Status::Unavailable(path + ": longer than expected");
  }
  return data;
}

// A line of ceph-fuse's stderr without its prefixes ("ceph-fuse[123]: ", "<timestamp> <thread>
// -1 "), "" for its progress lines: what is left says why a mount failed.
std::string CephWords(std::string line) {
  if (line.rfind("ceph-fuse[", 0) == 0) {
    const auto end = line.find("]: ");
    if (end != std::string::npos) line = line.substr(end + 3);
  }
  if (line.size() > 10 && line[4] == '-' && line[7] == '-' && line[10] == 'T') {
    // "2026-12-04T18:57:26.817+0000 7fe6cdffb6c0 -1 client.4179 ...": three fields off.
    for (int i = 0; i < 3; ++i) {
      const auto sp = line.find(' ');
      line = sp == std::string::npos ? "" : line.substr(sp + 1);
    }
  }
  const bool progress =
      line.rfind("starting ", 0) == 0 || line.find("newargv") != std::string::npos;
  if (line.empty() || progress) return "";
  return line;
}

bool IsCephMount(const HostMount& m) { return m.fstype == "fuse.ceph-fuse" || m.fstype == "ceph"; }

}  // namespace

Status ValidateNetworkVolume(const NetworkVolumeSpec& v, bool key_required) {
  if (v.id <= 0) return Bad(v, "id");
  if (!NameOk(v.name)) return Bad(v, "name");
  if (v.mount.rfind("/mnt/", 0) != 0 || !NameOk(v.mount.substr(5))) return Bad(v, "mount");
  const auto monitors = Split(v.monitors, ',');
  if (v.monitors.empty() || monitors.size() > kMaxCephMonitors) return Bad(v, "monitors");
  for (const auto& m : monitors) {
    if (!MonitorOk(m)) return Bad(v, "monitors");
  }
  if (!PathOk(v.path)) return Bad(v, "path");
  if (!ClientOk(v.client)) return Bad(v, "client");
  if ((key_required || !v.key.empty()) && !KeyOk(v.key)) return Bad(v, "key");
  return Status::Ok();
}

std::string NetworkVolumeDirName(std::int64_t id, const std::string& client) {
  return std::to_string(id) + "-" + client;
}

std::vector<std::string> CephMountArgv(const std::string& ceph_fuse, const NetworkVolumeSpec& v,
                                       const std::string& keyring, const std::string& mount_point,
                                       const std::string& log_file) {
  // No ceph.conf: everything the client needs is here (a host may have a conf of another
  // cluster). client_mount_timeout bounds a mon or MDS that does not answer (ceph's default is
  // 300 s; RunProcess's deadline is kMountTimeout).
  std::vector<std::string> argv = {ceph_fuse,
                                   "--conf=/dev/null",
                                   "--name=client." + v.client,
                                   "--keyring=" + keyring,
                                   "--mon_host=" + v.monitors,
                                   "--client_mountpoint=" + v.path,
                                   "--client_quota=true",
                                   "--client_mount_timeout=" +
                                       std::to_string(kCephMountTimeoutSeconds),
                                   "--log_file=" + log_file,
                                   "--admin_socket=",
                                   "--pid_file="};
  if (v.read_only) {
    argv.push_back("-o");
    argv.push_back("ro");
  }
  argv.push_back(mount_point);
  return argv;
}

std::map<std::string, HostMount> MountsUnder(std::string_view mountinfo, const std::string& dir) {
  std::map<std::string, HostMount> out;
  const std::string prefix = dir + "/";
  for (const auto& line : Split(std::string(mountinfo), '\n')) {
    const auto fields = Split(line, ' ');
    // id parent dev root point options [optional...] - fstype source superoptions
    std::size_t dash = 0;
    for (std::size_t i = 6; i < fields.size(); ++i) {
      if (fields[i] == "-") {
        dash = i;
        break;
      }
    }
    if (dash == 0 || dash + 1 >= fields.size()) continue;
    HostMount m;
    m.point = Unescape(fields[4]);
    m.fstype = fields[dash + 1];
    for (const auto& o : Split(fields[5], ',')) m.read_only = m.read_only || o == "ro";
    if (m.point.rfind(prefix, 0) != 0) continue;
    const std::string name = m.point.substr(prefix.size());
    if (name.empty() || name.find('/') != std::string::npos) continue;
    out[name] = m;  // the last one listed is the one on top
  }
  return out;
}

std::set<std::string> DirNamesOfLabel(const std::string& label) {
  std::set<std::string> out;
  for (const auto& item : Split(label, ',')) {
    const auto parts = Split(item, ':');
    if (parts.size() != 3) continue;
    auto id = ParseInt64(parts[0], "id");
    if (!id.ok() || *id <= 0 || !ClientOk(parts[1])) continue;
    out.insert(NetworkVolumeDirName(*id, parts[1]));
  }
  return out;
}

NetworkVolumes::NetworkVolumes(std::string ceph_fuse, std::string umount, std::string dir,
                               std::string mountinfo_path)
    : ceph_fuse_(std::move(ceph_fuse)),
      umount_(std::move(umount)),
      dir_(std::move(dir)),
      mountinfo_path_(std::move(mountinfo_path)) {}

std::string NetworkVolumes::MountPoint(std::int64_t id, const std::string& client) const {
  return dir_ + "/" + NetworkVolumeDirName(id, client);
}

std::map<std::string, HostMount> NetworkVolumes::Mounted() const {
  auto text = ReadToEnd(mountinfo_path_, kMaxMountInfoBytes);
  if (!text.ok()) return {};
  auto all = MountsUnder(*text, dir_);
  std::map<std::string, HostMount> out;
  for (auto& [name, m] : all) {
    if (IsCephMount(m)) out.emplace(name, std::move(m));
  }
  return out;
}

bool NetworkVolumes::Alive(const std::string& dir_name) const {
  // stat, not statfs: a ceph-fuse that died answers ENOTCONN at once, and a getattr of the root
  // is answered from the client's caps where statfs would ask the mons (which may be down).
  struct stat st {};
  return ::stat((dir_ + "/" + dir_name).c_str(), &st) == 0;
}

Result<std::string> NetworkVolumes::Ensure(const NetworkVolumeSpec& v) {
  const std::string name = NetworkVolumeDirName(v.id, v.client);
  const std::string point = dir_ + "/" + name;
  const std::string keyring = dir_ + "/" + name + ".keyring";
  auto mounted = Mounted();
  auto it = mounted.find(name);
  if (it != mounted.end()) {
    if (it->second.read_only == v.read_only && Alive(name)) return point;
    spdlog::info("event=network_volume_remount volume={} client={} was_ro={} ro={} alive={}", v.id,
                 v.client, it->second.read_only, v.read_only, Alive(name));
    GPUHUB_RETURN_IF_ERROR(UnmountPoint(name));  // the keyring stays: a cached spec has no key
  }
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable(dir_ + ": " + std::strerror(errno));
  }
  if (::chmod(dir_.c_str(), 0700) != 0) {
    return Status::Unavailable(dir_ + ": " + std::strerror(errno));
  }
  if (!v.key.empty()) {
    const std::string text = "[client." + v.client + "]\n\tkey = " + v.key + "\n";
    auto current = ReadFile(keyring, 4096);
    if (!current.ok() || *current != text) {
      GPUHUB_RETURN_IF_ERROR(WriteFileAtomically(keyring, text, 0600));
    }
  } else if (::access(keyring.c_str(), R_OK) != 0) {
    return Status::FailedPrecondition("network volume " + std::to_string(v.id) +
                                      ": no key (not sent by the server since the agent started, "
                                      "and no keyring left on the host)");
  }
  if (::mkdir(point.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Unavailable(point + ": " + std::strerror(errno));
  }
  const auto started = std::chrono::steady_clock::now();
  const auto argv = CephMountArgv(ceph_fuse_, v, keyring, point, dir_ + "/" + name + ".log");
  auto r = RunProcess(argv, kMountTimeout);
  if (!r.ok()) return Status::Unavailable("ceph-fuse: " + r.status().message());
  if (r->exit_code != 0) {
    // ceph-fuse's own words: "ceph mount failed with (1) Operation not permitted", the mds's
    // "rejected us (non-allowable root ...)".
    std::string words;
    for (const auto& line : Split(r->stderr_text + "\n" + r->stdout_text, '\n')) {
      const std::string said = CephWords(line);
      if (!said.empty()) words += (words.empty() ? "" : "; ") + said;
    }
    return Status::Unavailable("mounting network volume " + std::to_string(v.id) +
                               " failed: " + words.substr(0, 400));
  }
  auto now = Mounted();
  auto m = now.find(name);
  if (m == now.end() || !Alive(name) || m->second.read_only != v.read_only) {
    return Status::Unavailable("mounting network volume " + std::to_string(v.id) +
                               ": ceph-fuse exited 0 but no live Ceph mount is at " + point);
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  spdlog::info("event=network_volume_mounted volume={} client={} point={} ro={} after_ms={}",
               v.id, v.client, point, v.read_only, ms);
  return point;
}

Status NetworkVolumes::UnmountPoint(const std::string& dir_name) {
  const std::string point = dir_ + "/" + dir_name;
  if (Mounted().count(dir_name)) {
    auto r = RunProcess({umount_, point}, kMountTimeout);
    if (!r.ok() || r->exit_code != 0) {
      // Busy on the host (a shell's cwd): detached now, gone when the last user lets go.
      auto lazy = RunProcess({umount_, "-l", point}, kMountTimeout);
      if (!lazy.ok()) return lazy.status();
      if (lazy->exit_code != 0) {
        return Status::Unavailable(DescribeFailure({umount_, "-l", point}, *lazy));
      }
    }
    if (Mounted().count(dir_name)) {
      return Status::Unavailable("umount " + point + ": still mounted");
    }
  }
  return Status::Ok();
}

Status NetworkVolumes::Unmount(const std::string& dir_name) {
  GPUHUB_RETURN_IF_ERROR(UnmountPoint(dir_name));
  const std::string point = dir_ + "/" + dir_name;
  ::unlink((dir_ + "/" + dir_name + ".keyring").c_str());
  ::unlink((dir_ + "/" + dir_name + ".log").c_str());
  ::rmdir(point.c_str());  // empty once unmounted; never a recursive delete
  spdlog::info("event=network_volume_unmounted point={}", point);
  return Status::Ok();
}

}  // namespace gpuhub::agent
