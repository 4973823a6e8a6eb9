// A fake libnvidia-ml for tests: the NVML functions the agent binds with dlsym, with the signatures
// of NVIDIA's public nvml.h, answering from the environment:
//   FAKE_NVML_GPUS = "GPU-uuid|NVIDIA H100 80GB HBM3|81559;GPU-...|...|..."
//   FAKE_NVML_XIDS = "GPU-uuid:79,GPU-uuid:13"   events delivered once each by nvmlEventSetWait_v2
//   FAKE_NVML_ECC  = "GPU-uuid:3"                 uncorrected volatile ECC errors
//   FAKE_NVML_INIT_FAILS = "1"                    nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Gpu {
  std::string uuid, name;
  unsigned long long memory_mib = 0;
  unsigned long long ecc = 0;
};
struct Device {
  int index;
};
struct Event {
  int device;
  unsigned long long xid;
};

std::mutex mu;
std::vector<Gpu> gpus;
std::vector<Device> devices;
std::vector<Event> events;
bool events_loaded = false;

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

int FindUuid(const std::string& uuid) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].uuid == uuid) return static_cast<int>(i);
  }
  return -1;
}

void Copy(const std::string& s, char* out, unsigned int length) {
  std::strncpy(out, s.c_str(), length - 1);
  out[length - 1] = 0;
}

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlEventData_t {
  void* device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* fails = std::getenv("FAKE_NVML_INIT_FAILS");
  if (fails && *fails == '1') return 12;  // NVML_ERROR_DRIVER_NOT_LOADED
  std::lock_guard<std::mutex> lock(mu);
  gpus.clear();
  devices.clear();
  const char* spec = std::getenv("FAKE_NVML_GPUS");
  for (const auto& g : Split(spec ? spec : "", ';')) {
    auto f = Split(g, '|');
    if (f.size() != 3) continue;
    gpus.push_back({f[0], f[1], std::strtoull(f[2].c_str(), nullptr, 10), 0});
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) devices.push_back({static_cast<int>(i)});
  const char* ecc = std::getenv("FAKE_NVML_ECC");
  for (const auto& e : Split(ecc ? ecc : "", ',')) {
    auto f = Split(e, ':');
    if (f.size() == 2 && FindUuid(f[0]) >= 0) gpus[FindUuid(f[0])].ecc = std::strtoull(f[1].c_str(), nullptr, 10);
  }
  return 0;
}
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int r) { return r == 12 ? "Driver Not Loaded" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char* v, unsigned int n) {
  Copy("550.54.15", v, n);
  return 0;
}
int nvmlSystemGetCudaDriverVersion(int* v) {
  *v = 12040;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned int* count) {
  std::lock_guard<std::mutex> lock(mu);
  *count = static_cast<unsigned int>(gpus.size());
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** device) {
  std::lock_guard<std::mutex> lock(mu);
  if (i >= devices.size()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *device = &devices[i];
  return 0;
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned int n) {
  Copy(gpus[static_cast<std::size_t>(static_cast<Device*>(d)->index)].uuid, out, n);
  return 0;
}
int nvmlDeviceGetName(void* d, char* out, unsigned int n) {
  Copy(gpus[static_cast<std::size_t>(static_cast<Device*>(d)->index)].name, out, n);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, nvmlMemory_t* m) {
  m->total = gpus[static_cast<std::size_t>(static_cast<Device*>(d)->index)].memory_mib << 20;
  m->free = m->total;
  m->used = 0;
  return 0;
}
int nvmlDeviceGetMaxPcieLinkGeneration(void*, unsigned int* v) {
  *v = 5;
  return 0;
}
int nvmlDeviceGetMaxPcieLinkWidth(void*, unsigned int* v) {
  *v = 16;
  return 0;
}
int nvmlDeviceGetTemperature(void*, int, unsigned int* v) {
  *v = 33;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, nvmlUtilization_t* u) {
  u->gpu = 87;
  u->memory = 40;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* out) {
  if (type != 1 || counter != 0) return 2;
  *out = gpus[static_cast<std::size_t>(static_cast<Device*>(d)->index)].ecc;
  return 0;
}
int nvmlDeviceGetRemappedRows(void*, unsigned int* c, unsigned int* u, unsigned int* p,
                              unsigned int* f) {
  *c = *u = *p = *f = 0;
  return 0;
}
int nvmlEventSetCreate(void** set) {
  static int the_set;
  *set = &the_set;
  return 0;
}
int nvmlDeviceGetSupportedEventTypes(void*, unsigned long long* types) {
  *types = 0x8 | 0x1 | 0x2;
  return 0;
}
int nvmlDeviceRegisterEvents(void*, unsigned long long, void*) { return 0; }
int nvmlEventSetWait_v2(void*, nvmlEventData_t* data, unsigned int timeout_ms) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!events_loaded) {
      events_loaded = true;
      const char* xids = std::getenv("FAKE_NVML_XIDS");
      for (const auto& e : Split(xids ? xids : "", ',')) {
        auto f = Split(e, ':');
        if (f.size() == 2 && FindUuid(f[0]) >= 0) {
          events.push_back({FindUuid(f[0]), std::strtoull(f[1].c_str(), nullptr, 10)});
        }
      }
    }
    if (!events.empty()) {
      Event e = events.front();
      events.erase(events.begin());
      data->device = &devices[static_cast<std::size_t>(e.device)];
      data->eventType = 0x8;  // nvmlEventTypeXidCriticalError
      data->eventData = e.xid;
      data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFF;
      return 0;
    }
  }
  struct timespec ts {
    0, static_cast<long>(std::min(timeout_ms, 50u)) * 1000000L
  };
  nanosleep(&ts, nullptr);
  return 10;  // NVML_ERROR_TIMEOUT
}
int nvmlEventSetFree(void*) { return 0; }

}  // extern "C"
