// HostProbe: NVML first, nvidia-smi when NVML cannot be loaded; the host's RAM, CPUs and disk.
#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>

#include "agent/inventory.h"
#include "agent/process.h"
#include "core/strings.h"

namespace gpuhub::agent {
namespace {

std::int64_t MemTotalMib() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  long long kb = 0;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb / 1024;
  }
  return 0;
}

Result<Inventory> WithNvidiaSmi(const std::string& program) {
  std::vector<std::string> argv{program};
  for (auto& a : NvidiaSmiQueryArgs()) argv.push_back(a);
  GPUHUB_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(argv));
  if (r.exit_code != 0) return Status::Unavailable(DescribeFailure(argv, r));
  Inventory inv;
  inv.source = "nvidia-smi";
  GPUHUB_ASSIGN_OR_RETURN(inv.gpus, ParseNvidiaSmiGpus(r.stdout_text, &inv.driver_version));
  // Row remapping is queried apart (older drivers and GPUs do not know it: then nothing is set).
  std::vector<std::string> remap{program};
  for (auto& a : NvidiaSmiRemapArgs()) remap.push_back(a);
  auto rows = RunProcess(remap);
  if (rows.ok() && rows->exit_code == 0) ApplyRemappedRows(rows->stdout_text, &inv.gpus);
  return inv;
}

}  // namespace

std::int64_t UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? online : 0;
}

HostProbe::HostProbe(ProbeOptions options) : options_(std::move(options)) {}
HostProbe::~HostProbe() = default;

Inventory HostProbe::Probe() {
  std::lock_guard<std::mutex> lock(mutex_);
  Inventory inv;
  if (!nvml_tried_ && !options_.nvml_library.empty()) {
    nvml_tried_ = true;
    auto loaded = Nvml::Load(options_.nvml_library);
    if (loaded.ok()) {
      nvml_ = std::move(loaded).value();
      (void)nvml_->WatchXids();  // without events, ECC and row remapping still count
    } else {
      nvml_error_ = loaded.status().message();
    }
  }
  bool have = false;
  if (nvml_) {
    auto probed = nvml_->Probe();
    if (probed.ok()) {
      inv = std::move(probed).value();
      have = true;
    } else {
      nvml_error_ = probed.status().message();
    }
  }
  if (!have) {
    auto probed = WithNvidiaSmi(options_.nvidia_smi);
    if (probed.ok()) {
      inv = std::move(probed).value();
      if (cuda_version_.empty()) {
        auto banner = RunProcess({options_.nvidia_smi});
        if (banner.ok()) cuda_version_ = ParseCudaVersion(banner->stdout_text);
      }
      inv.cuda_version = cuda_version_;
    } else {
      inv.source.clear();
      inv.error = (nvml_error_.empty() ? "" : nvml_error_ + "; ") + probed.status().message();
    }
  }
  for (auto& g : inv.gpus) g.health = HealthReasons(g);
  inv.ram_mib = MemTotalMib();
  inv.vcpus = UsableCpus();
  struct statvfs fs {};
  if (::statvfs(options_.disk_path.c_str(), &fs) == 0) {
    inv.disk_free_gb = static_cast<std::int64_t>(static_cast<double>(fs.f_bavail) *
                                                 static_cast<double>(fs.f_frsize) / 1e9);
    inv.disk_total_gb = static_cast<std::int64_t>(static_cast<unsigned long long>(fs.f_blocks) *
                                                  fs.f_frsize / 1'000'000'000ULL);
  }
  return inv;
}

}  // namespace gpuhub::agent
