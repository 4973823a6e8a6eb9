// NVML through dlopen: the prototypes below are written from NVIDIA's public nvml.h (as vendored
// by github.com/NVIDIA/go-nvml), so the build needs nothing of NVIDIA's. Enums are passed as int,
// as the C ABI does.
#include <dlfcn.h>

#include <atomic>
#include <thread>

#include "agent/inventory.h"
#include "agent/limits.h"

namespace gpuhub::agent {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEventSet_t = struct nvmlEventSet_st*;

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;
constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ULL;
constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

}  // namespace

struct Nvml::Api {
  void* handle = nullptr;
  nvmlReturn_t (*Init)() = nullptr;                                    // nvmlInit_v2
  nvmlReturn_t (*Shutdown)() = nullptr;                                // nvmlShutdown
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;                  // nvmlErrorString
  nvmlReturn_t (*DriverVersion)(char*, unsigned int) = nullptr;        // nvmlSystemGetDriverVersion
  nvmlReturn_t (*CudaDriverVersion)(int*) = nullptr;  // nvmlSystemGetCudaDriverVersion
  nvmlReturn_t (*Count)(unsigned int*) = nullptr;     // nvmlDeviceGetCount_v2
  nvmlReturn_t (*ByIndex)(unsigned int, nvmlDevice_t*) = nullptr;  // ..GetHandleByIndex_v2
  nvmlReturn_t (*Uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;  // nvmlDeviceGetUUID
  nvmlReturn_t (*Name)(nvmlDevice_t, char*, unsigned int) = nullptr;  // nvmlDeviceGetName
  nvmlReturn_t (*Memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;     // nvmlDeviceGetMemoryInfo
  nvmlReturn_t (*MaxLinkGen)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*MaxLinkWidth)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*Temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*Utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*TotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*RemappedRows)(nvmlDevice_t, unsigned int*, unsigned int*, unsigned int*,
                               unsigned int*) = nullptr;
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*SupportedEvents)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t) = nullptr;

  std::string Error(nvmlReturn_t r) const {
    const char* s = ErrorString ? ErrorString(r) : nullptr;
    return s ? s : "NVML error " + std::to_string(r);
  }
};

struct Nvml::Watcher {
  nvmlEventSet_t set = nullptr;
  std::atomic<bool> stop{false};
  std::thread thread;
};

Result<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  auto api = std::make_unique<Api>();
  api->handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* e = ::dlerror();
    return Status::Unavailable("cannot load " + library + ": " + (e ? e : "unknown error"));
  }
  std::string missing;
  auto bind = [&](auto& fn, const char* name, bool required) {
    void* p = ::dlsym(api->handle, name);
    if (p == nullptr && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  bind(api->Init, "nvmlInit_v2", true);
  bind(api->Shutdown, "nvmlShutdown", true);
  bind(api->ErrorString, "nvmlErrorString", true);
  bind(api->DriverVersion, "nvmlSystemGetDriverVersion", true);
  bind(api->CudaDriverVersion, "nvmlSystemGetCudaDriverVersion", false);
  bind(api->Count, "nvmlDeviceGetCount_v2", true);
  bind(api->ByIndex, "nvmlDeviceGetHandleByIndex_v2", true);
  bind(api->Uuid, "nvmlDeviceGetUUID", true);
  bind(api->Name, "nvmlDeviceGetName", true);
  bind(api->Memory, "nvmlDeviceGetMemoryInfo", true);
  bind(api->MaxLinkGen, "nvmlDeviceGetMaxPcieLinkGeneration", false);
  bind(api->MaxLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", false);
  bind(api->Temperature, "nvmlDeviceGetTemperature", false);
  bind(api->Utilization, "nvmlDeviceGetUtilizationRates", false);
  bind(api->TotalEccErrors, "nvmlDeviceGetTotalEccErrors", false);
  bind(api->RemappedRows, "nvmlDeviceGetRemappedRows", false);
  bind(api->EventSetCreate, "nvmlEventSetCreate", false);
  bind(api->SupportedEvents, "nvmlDeviceGetSupportedEventTypes", false);
  bind(api->RegisterEvents, "nvmlDeviceRegisterEvents", false);
  bind(api->EventSetWait, "nvmlEventSetWait_v2", false);
  bind(api->EventSetFree, "nvmlEventSetFree", false);
  if (!missing.empty()) {
    ::dlclose(api->handle);
    return Status::Unavailable(library + " lacks " + missing + " (driver too old?)");
  }
  nvmlReturn_t r = api->Init();
  if (r != NVML_SUCCESS) {
    std::string why = api->Error(r);
    ::dlclose(api->handle);
    return Status::Unavailable("nvmlInit_v2: " + why);
  }
  return std::unique_ptr<Nvml>(new Nvml(std::move(api)));
}

Nvml::Nvml(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Nvml::~Nvml() {
  if (watcher_) {
    watcher_->stop = true;
    if (watcher_->thread.joinable()) watcher_->thread.join();
    if (watcher_->set != nullptr && api_->EventSetFree) api_->EventSetFree(watcher_->set);
  }
  api_->Shutdown();
  ::dlclose(api_->handle);
}

Result<Inventory> Nvml::Probe() {
  Inventory inv;
  inv.source = "nvml";
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (api_->DriverVersion(driver, sizeof driver) == NVML_SUCCESS) inv.driver_version = driver;
  int cuda = 0;
  if (api_->CudaDriverVersion && api_->CudaDriverVersion(&cuda) == NVML_SUCCESS && cuda > 0) {
    // 12040 -> "12.4" (NVML's encoding: major * 1000 + minor * 10).
    inv.cuda_version = std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);
  }
  unsigned int count = 0;
  nvmlReturn_t r = api_->Count(&count);
  if (r != NVML_SUCCESS) return Status::Unavailable("nvmlDeviceGetCount_v2: " + api_->Error(r));
  for (unsigned int i = 0; i < count && i < 1024; ++i) {
    nvmlDevice_t d = nullptr;
    r = api_->ByIndex(i, &d);
    if (r != NVML_SUCCESS) {
      return Status::Unavailable("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) +
                                 "): " + api_->Error(r));
    }
    GpuInfo g;
    g.index = static_cast<int>(i);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if ((r = api_->Uuid(d, uuid, sizeof uuid)) != NVML_SUCCESS) {
      return Status::Unavailable("nvmlDeviceGetUUID: " + api_->Error(r));
    }
    g.uuid = uuid;
    if (api_->Name(d, name, sizeof name) == NVML_SUCCESS) g.name = name;
    nvmlMemory_t mem{};
    if (api_->Memory(d, &mem) == NVML_SUCCESS) {
      g.memory_mib = static_cast<std::int64_t>(mem.total / (1024 * 1024));
    }
    unsigned int v = 0;
    if (api_->MaxLinkGen && api_->MaxLinkGen(d, &v) == NVML_SUCCESS) g.pcie_gen = static_cast<int>(v);
    if (api_->MaxLinkWidth && api_->MaxLinkWidth(d, &v) == NVML_SUCCESS) {
      g.pcie_width = static_cast<int>(v);
    }
    if (api_->Temperature && api_->Temperature(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) {
      g.temperature_c = static_cast<int>(v);
    }
    nvmlUtilization_t util{};
    if (api_->Utilization && api_->Utilization(d, &util) == NVML_SUCCESS) {
      g.utilization_pct = static_cast<int>(std::min(util.gpu, 100u));
    }
    unsigned long long ecc = 0;
    if (api_->TotalEccErrors &&
        api_->TotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) ==
            NVML_SUCCESS) {
      g.ecc_uncorrected = static_cast<std::int64_t>(ecc);
    }
    unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (api_->RemappedRows &&
        api_->RemappedRows(d, &corrected, &uncorrected, &pending, &failed) == NVML_SUCCESS) {
      g.remap_pending = pending != 0;
      g.remap_failed = failed != 0;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = xids_.find(g.uuid);
      if (it != xids_.end()) g.xids = it->second;
    }
    inv.gpus.push_back(std::move(g));
  }
  return inv;
}

Status Nvml::WatchXids() {
  if (watcher_) return Status::Ok();
  if (!api_->EventSetCreate || !api_->RegisterEvents || !api_->EventSetWait ||
      !api_->SupportedEvents) {
    return Status::Unavailable("this NVML has no event API");
  }
  auto w = std::make_unique<Watcher>();
  nvmlReturn_t r = api_->EventSetCreate(&w->set);
  if (r != NVML_SUCCESS) return Status::Unavailable("nvmlEventSetCreate: " + api_->Error(r));
  unsigned int count = 0;
  api_->Count(&count);
  int registered = 0;
  for (unsigned int i = 0; i < count && i < 1024; ++i) {
    nvmlDevice_t d = nullptr;
    unsigned long long supported = 0;
    if (api_->ByIndex(i, &d) != NVML_SUCCESS ||
        api_->SupportedEvents(d, &supported) != NVML_SUCCESS) {
      continue;
    }
    // As the device plugin does: register what the device supports of the critical XIDs.
    if ((supported & nvmlEventTypeXidCriticalError) == 0) continue;
    r = api_->RegisterEvents(d, nvmlEventTypeXidCriticalError, w->set);
    if (r == NVML_SUCCESS) ++registered;
  }
  if (registered == 0) {
    api_->EventSetFree(w->set);
    return Status::Unavailable("no GPU supports XID events");
  }
  watcher_ = std::move(w);
  watcher_->thread = std::thread([this] { WatchLoop(); });
  return Status::Ok();
}

void Nvml::WatchLoop() {
  while (!watcher_->stop) {
    nvmlEventData_t e{};
    nvmlReturn_t r = api_->EventSetWait(watcher_->set, &e, 1000);
    if (r == NVML_ERROR_TIMEOUT) continue;
    if (r != NVML_SUCCESS) {
      if (r == NVML_ERROR_NOT_SUPPORTED) return;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (e.eventType != nvmlEventTypeXidCriticalError) continue;
    int xid = static_cast<int>(e.eventData);
    if (IsApplicationXid(xid)) continue;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (e.device == nullptr || api_->Uuid(e.device, uuid, sizeof uuid) != NVML_SUCCESS) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    auto& events = xids_[uuid];
    if (events.size() < 16) events.push_back({xid, RealClock().NowMicros()});
  }
}

}  // namespace gpuhub::agent
