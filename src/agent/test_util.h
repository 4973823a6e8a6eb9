// Helpers of the agent's unit tests: a temporary directory and executable scripts in it (the fake
// nvidia-smi, cryptsetup, rbd...).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "agent/config.h"
#include "core/strings.h"

namespace gpuhub::agent::testing {

class TempDir {
 public:
  TempDir() {
    static std::mt19937_64 rng(std::random_device{}());
    path_ = (std::filesystem::temp_directory_path() /
             ("gpuhub_agent_" + std::to_string(::getpid()) + "_" + std::to_string(rng())))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes an executable shell script and returns its path.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string p = File(name);
    std::ofstream(p) << "#!/bin/sh\n" << body;
    ::chmod(p.c_str(), 0755);
    return p;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(File(name));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string path_;
};

// Fake tools: each appends its argv (one line) to calls.log and answers like the real one.
inline StorageConfig FakeTools(const TempDir& dir) {
  const std::string log = dir.File("calls.log");
  StorageConfig c;
  c.cryptsetup = dir.Script("cryptsetup",
                            "echo \"cryptsetup $*\" >> " + log + "\n"
                            "if [ \"$1\" = status ] && [ ! -e " + dir.File("open") + " ]; then exit 4; fi\n"
                            "if [ \"$1\" = open ]; then touch " + dir.File("open") + "; fi\n"
                            "if [ \"$1\" = close ]; then rm -f " + dir.File("open") + "; fi\n");
  c.blkdiscard = dir.Script("blkdiscard", "echo \"blkdiscard $*\" >> " + log + "\n");
  c.mkfs = dir.Script("mkfs", "echo \"mkfs $*\" >> " + log + "\n");
  c.rbd = dir.Script("rbd",
                     "echo \"rbd $*\" >> " + log + "\n"
                     "case \"$*\" in\n"
                     "  *missing*) echo 'rbd: error opening image missing: (2) No such file or directory' >&2; exit 2 ;;\n"
                     "  *' map '*) echo /dev/rbd3 ;;\n"
                     "  *'snap protect'*) echo 'rbd: protecting snap failed: (16) Device or resource busy: snapshot already protected' >&2; exit 16 ;;\n"
                     "esac\n");
  c.ceph_conf = "/etc/ceph/ceph.conf";
  c.rbd_pool = "gpuhub";
  c.rbd_user = "agent";
  return c;
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (auto& l : Split(text, '\n')) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

}  // namespace gpuhub::agent::testing
