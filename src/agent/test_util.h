// Helpers of the agent's unit tests: a temporary directory and executable scripts in it (the fake
// nvidia-smi, cryptsetup, rbd...).
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

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

}  // namespace gpuhub::agent::testing
