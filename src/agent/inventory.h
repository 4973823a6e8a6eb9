// What the host has, measured: its GPUs (through NVML, else nvidia-smi) with their health, its RAM,
// CPUs and free disk. The server compares this with the listing (engine/agents.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::agent {

struct XidEvent {
  int xid = 0;
  TimestampMicros at = 0;
};

struct GpuInfo {
  int index = 0;
  std::string uuid;
  std::string name;
  std::int64_t memory_mib = 0;
  int pcie_gen = 0;  // the link's maximum generation and width
  int pcie_width = 0;
  int temperature_c = 0;
  int utilization_pct = 0;
  std::optional<std::int64_t> ecc_uncorrected;  // since the driver loaded; none when unsupported
  bool remap_pending = false;
  bool remap_failed = false;
  std::vector<XidEvent> xids;       // critical XIDs seen (application XIDs are left out)
  std::vector<std::string> health;  // why the GPU is unhealthy (HealthReasons); empty = healthy
};

struct Inventory {
  std::string source;  // "nvml", "nvidia-smi", or "" when neither answered
  std::string error;   // why not, when source is ""
  std::string driver_version;
  std::string cuda_version;  // the highest CUDA version the driver supports ("12.4")
  std::int64_t ram_mib = 0;
  std::int64_t vcpus = 0;
  std::int64_t disk_free_gb = 0;
  std::int64_t disk_total_gb = 0;  // the size of disk_path's file system (10^9 bytes)
  std::vector<GpuInfo> gpus;  // by index
};

// The CPUs this process may run on (its affinity mask, else the online CPUs; 0 when unknown): the
// number Docker checks a container's NanoCpus against ("Range of CPUs is from 0.01 to N").
std::int64_t UsableCpus();

// Whether an XID is one of NVIDIA's application XIDs (kApplicationXids), which say nothing about
// the GPU's health.
bool IsApplicationXid(int xid);
// The reasons a GPU is unhealthy, in words: critical XIDs, uncorrected ECC errors, failed or pending
// row remapping. Empty when healthy.
std::vector<std::string> HealthReasons(const GpuInfo& gpu);

// ----- nvidia-smi (the fallback) -------------------------------------------------------------

// The arguments of the inventory query (CSV without header or units), one GPU per line:
// index, uuid, name, memory.total [MiB], driver_version, pcie.link.gen.max, pcie.link.width.max,
// temperature.gpu, utilization.gpu, ecc.errors.uncorrected.volatile.total.
std::vector<std::string> NvidiaSmiQueryArgs();
// The remapped-rows query: gpu_uuid, remapped_rows.pending, remapped_rows.failure.
std::vector<std::string> NvidiaSmiRemapArgs();
// Parses the inventory CSV; "[N/A]" and "[Not Supported]" read as unknown. invalid_argument for a
// line that does not have the fields.
Result<std::vector<GpuInfo>> ParseNvidiaSmiGpus(std::string_view csv, std::string* driver_version);
// Sets remap_pending / remap_failed from the remapped-rows CSV (lines of unknown GPUs ignored).
void ApplyRemappedRows(std::string_view csv, std::vector<GpuInfo>* gpus);
// "12.4" from nvidia-smi's banner ("... CUDA Version: 12.4 ..."), "" when absent.
std::string ParseCudaVersion(std::string_view banner);

// ----- NVML, loaded at run time ---------------------------------------------------------------

class Nvml {
 public:
  // dlopen()s `library` (libnvidia-ml.so.1: nothing of NVIDIA's is needed to build) and
  // initialises it. unavailable, with the loader's or NVML's message, when it cannot.
  static Result<std::unique_ptr<Nvml>> Load(const std::string& library);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // Every GPU with its figures, ECC and row-remap state, and the critical XIDs seen so far.
  Result<Inventory> Probe();
  // Starts a thread that waits for XID events (nvmlEventSetWait_v2) and records the critical
  // ones per GPU. unavailable when the driver supports no event on any GPU.
  Status WatchXids();

  struct Api;  // the function pointers (nvml.cc)

 private:
  explicit Nvml(std::unique_ptr<Api> api);
  void WatchLoop();

  std::unique_ptr<Api> api_;
  mutable std::mutex mutex_;
  std::map<std::string, std::vector<XidEvent>> xids_;  // by GPU UUID
  struct Watcher;
  std::unique_ptr<Watcher> watcher_;
};

// ----- The probe the agent runs -----------------------------------------------------------------

struct ProbeOptions {
  std::string nvml_library = "libnvidia-ml.so.1";  // "" = do not try NVML
  std::string nvidia_smi = "nvidia-smi";
  std::string disk_path = "/";  // where free disk space is measured (Docker's data root)
};

// Measures the host: NVML when it loads (and its XID watcher), else nvidia-smi; then RAM (from
// /proc/meminfo), online CPUs and free disk. Never fails: what could not be read says so in
// Inventory::error. Thread-safe.
class HostProbe {
 public:
  explicit HostProbe(ProbeOptions options);
  ~HostProbe();
  Inventory Probe();

 private:
  ProbeOptions options_;
  std::mutex mutex_;
  std::unique_ptr<Nvml> nvml_;
  bool nvml_tried_ = false;
  std::string nvml_error_;
  std::string cuda_version_;  // nvidia-smi's banner, read once
};

}  // namespace gpuhub::agent
