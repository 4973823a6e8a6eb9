// nvidia-smi, the fallback when NVML cannot be loaded, and the health rules shared with NVML.
#include <algorithm>

#include "agent/inventory.h"
#include "agent/limits.h"
#include "core/strings.h"

namespace gpuhub::agent {
namespace {

std::vector<std::string> CsvFields(std::string_view line) {
  std::vector<std::string> out;
  for (const auto& f : Split(line, ',')) out.emplace_back(Trim(f));
  return out;
}

bool Unknown(std::string_view v) {
  return v.empty() || v.front() == '[' || v == "N/A";  // "[N/A]", "[Not Supported]"
}

std::optional<std::int64_t> Number(std::string_view v) {
  if (Unknown(v)) return std::nullopt;
  // Whole numbers; nvidia-smi prints a few as decimals ("81559", "34", "0").
  auto dot = v.find('.');
  auto n = ParseInt64(v.substr(0, dot), "");
  if (!n.ok()) return std::nullopt;
  return *n;
}

bool Yes(std::string_view v) {
  std::string s = ToLower(v);
  return s == "yes" || s == "true" || s == "1";
}

// What a few XIDs mean (NVIDIA's XID catalogue), so the provider reads more than a number.
const char* XidMeaning(int xid) {
  switch (xid) {
    case 48: return "double-bit ECC error";
    case 63: return "ECC page retirement or row remapping recorded";
    case 64: return "ECC page retirement or row remapping failed";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: return "GSP RPC timeout";
    case 120: return "GSP error";
    default: return nullptr;
  }
}

}  // namespace

bool IsApplicationXid(int xid) {
  return std::find(std::begin(kApplicationXids), std::end(kApplicationXids), xid) !=
         std::end(kApplicationXids);
}

std::vector<std::string> HealthReasons(const GpuInfo& gpu) {
  std::vector<std::string> out;
  for (const auto& e : gpu.xids) {
    if (IsApplicationXid(e.xid)) continue;
    const char* meaning = XidMeaning(e.xid);
    out.push_back("XID " + std::to_string(e.xid) + (meaning ? std::string(" (") + meaning + ")" : "") +
                  " at " + FormatTimestamp(e.at));
    if (out.size() >= 4) break;  // the first few say enough
  }
  if (gpu.ecc_uncorrected && *gpu.ecc_uncorrected > 0) {
    out.push_back(std::to_string(*gpu.ecc_uncorrected) +
                  " uncorrected ECC errors since the driver loaded");
  }
  if (gpu.remap_failed) out.push_back("row remapping failed: memory rows could not be remapped");
  if (gpu.remap_pending) out.push_back("row remapping pending: the GPU needs a reset");
  return out;
}

std::vector<std::string> NvidiaSmiQueryArgs() {
  return {"--query-gpu=index,uuid,name,memory.total,driver_version,pcie.link.gen.max,"
          "pcie.link.width.max,temperature.gpu,utilization.gpu,"
          "ecc.errors.uncorrected.volatile.total",
          "--format=csv,noheader,nounits"};
}

std::vector<std::string> NvidiaSmiRemapArgs() {
  return {"--query-remapped-rows=gpu_uuid,remapped_rows.pending,remapped_rows.failure",
          "--format=csv,noheader"};
}

Result<std::vector<GpuInfo>> ParseNvidiaSmiGpus(std::string_view csv,
                                                std::string* driver_version) {
  std::vector<GpuInfo> out;
  int line_no = 0;
  for (const auto& raw : Split(csv, '\n')) {
    ++line_no;
    std::string_view line = Trim(raw);
    if (line.empty()) continue;
    std::vector<std::string> f = CsvFields(line);
    if (f.size() != 10) {
      return Status::InvalidArgument("nvidia-smi line " + std::to_string(line_no) + " has " +
                                     std::to_string(f.size()) + " fields, expected 10: '" +
                                     std::string(line.substr(0, 120)) + "'");
    }
    GpuInfo g;
    auto index = Number(f[0]);
    if (!index || *index < 0 || *index > 1023 || Unknown(f[1]) || f[1].rfind("GPU-", 0) != 0) {
      return Status::InvalidArgument("nvidia-smi line " + std::to_string(line_no) +
                                     ": no GPU index and UUID");
    }
    g.index = static_cast<int>(*index);
    g.uuid = f[1];
    g.name = f[2];
    g.memory_mib = Number(f[3]).value_or(0);
    if (driver_version != nullptr && !Unknown(f[4])) *driver_version = f[4];
    g.pcie_gen = static_cast<int>(Number(f[5]).value_or(0));
    g.pcie_width = static_cast<int>(Number(f[6]).value_or(0));
    g.temperature_c = static_cast<int>(Number(f[7]).value_or(0));
    g.utilization_pct = static_cast<int>(std::clamp<std::int64_t>(Number(f[8]).value_or(0), 0, 100));
    g.ecc_uncorrected = Number(f[9]);
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
  return out;
}

void ApplyRemappedRows(std::string_view csv, std::vector<GpuInfo>* gpus) {
  for (const auto& raw : Split(csv, '\n')) {
    std::vector<std::string> f = CsvFields(Trim(raw));
    if (f.size() != 3) continue;
    for (auto& g : *gpus) {
      if (g.uuid != f[0]) continue;
      g.remap_pending = Yes(f[1]);
      g.remap_failed = Yes(f[2]);
    }
  }
}

std::string ParseCudaVersion(std::string_view banner) {
  const std::string_view key = "CUDA Version:";
  auto at = banner.find(key);
  if (at == std::string_view::npos) return "";
  std::string_view rest = Trim(banner.substr(at + key.size()));
  std::size_t end = 0;
  while (end < rest.size() && ((rest[end] >= '0' && rest[end] <= '9') || rest[end] == '.')) ++end;
  return std::string(rest.substr(0, end));
}

}  // namespace gpuhub::agent
