// The pure side of engine/agents.h: what a host's measured inventory means for its listing, and
// the checks of what agents and customers send.
#include <algorithm>
#include <map>

#include "core/strings.h"
#include "engine/agents.h"
#include "engine/limits.h"

namespace gpuhub::engine {
namespace {

// Lower-case tokens split on spaces, dashes, underscores and slashes ("A100-SXM4-80GB" -> a100,
// sxm4, 80gb); "sxm4"/"sxm5"/"sxm6" read as "sxm".
std::vector<std::string> Tokens(std::string_view name) {
  std::vector<std::string> out;
  std::string current;
  auto flush = [&] {
    if (current.empty()) return;
    if (current.size() == 4 && current.rfind("sxm", 0) == 0 && current[3] >= '0' &&
        current[3] <= '9') {
      current = "sxm";
    }
    out.push_back(current);
    current.clear();
  };
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '/') {
      flush();
    } else {
      current.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    }
  }
  flush();
  return out;
}

bool Has(const std::vector<std::string>& tokens, std::string_view t) {
  return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
}

bool IsFormFactor(std::string_view t) { return t == "sxm" || t == "pcie" || t == "nvl"; }

std::string Plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string ClaimedBeyondMeasured(const market::Machine& listing, const HostInventory& inventory) {
  const char* tail = ": its asks are off the book until the listing is corrected";
  if (inventory.vcpus > 0 && listing.vcpus > inventory.vcpus) {
    return "the listing says " + Plural(static_cast<std::size_t>(listing.vcpus), "vCPU", "vCPUs") +
           " but the host has " +
           Plural(static_cast<std::size_t>(inventory.vcpus), "vCPU", "vCPUs") + tail;
  }
  if (inventory.ram_mib > 0 && listing.ram_gb > MeasuredRamGb(inventory)) {
    return "the listing says " + std::to_string(listing.ram_gb) + " GB of RAM but the host has " +
           std::to_string(inventory.ram_mib) + " MiB (" +
           std::to_string(inventory.ram_mib * 1024 * 1024 / 1'000'000'000) + " GB)" + tail;
  }
  return "";
}

std::int64_t MeasuredRamGb(const HostInventory& inventory) {
  // MiB -> GB (10^9 bytes), with kListedRamSlackPct for what firmware and the kernel keep back
  // before MemTotal: 16 GiB of DIMMs read as ~15.6 GiB = 16.7 GB.
  const std::int64_t bytes = inventory.ram_mib * 1024 * 1024;
  return bytes * (100 + kListedRamSlackPct) / 100 / 1'000'000'000;
}

std::int64_t WorkloadCpus(const market::Machine& listing, const HostInventory& inventory,
                          int lease_gpus) {
  std::int64_t cpus = listing.vcpus;
  if (inventory.vcpus > 0) cpus = std::min(cpus, inventory.vcpus);
  return std::max<std::int64_t>(1, cpus * lease_gpus / std::max(1, listing.gpus));
}

std::int64_t WorkloadMemoryGb(const market::Machine& listing, const HostInventory& inventory,
                              int lease_gpus) {
  std::int64_t gb = listing.ram_gb;
  // A container's limit is in bytes of real memory: never more than the host's MemTotal.
  if (inventory.ram_mib > 0) gb = std::min(gb, inventory.ram_mib * 1024 * 1024 / 1'000'000'000);
  return std::max<std::int64_t>(1, gb * lease_gpus / std::max(1, listing.gpus));
}

std::string_view HostKindName(HostKind kind) {
  return kind == HostKind::kMachine ? "machine" : "node";
}

Result<HostKind> ParseHostKind(std::string_view name) {
  if (name == "machine") return HostKind::kMachine;
  if (name == "node") return HostKind::kNode;
  return Status::InvalidArgument("unknown host kind '" + std::string(name.substr(0, 16)) + "'");
}

bool GpuNameMatchesMarket(std::string_view measured, std::string_view market) {
  std::vector<std::string> have = Tokens(measured);
  const std::vector<std::string> want = Tokens(market);
  if (want.empty()) return false;
  // NVIDIA names its SXM parts by memory: "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200".
  // A data-centre part named without a form factor is the SXM one.
  const bool named_form = std::any_of(have.begin(), have.end(), IsFormFactor);
  if (!named_form) {
    for (const char* sxm_only : {"h100", "h200", "b200", "b300", "h800", "h20"}) {
      if (Has(have, sxm_only)) {
        have.push_back("sxm");
        break;
      }
    }
  }
  for (const auto& t : want) {
    if (!Has(have, t)) return false;
  }
  for (const auto& t : have) {
    if (IsFormFactor(t) && !Has(want, t)) {
      // "H200" as a market name means the SXM part: a measured sxm fits a market that names no
      // form factor, a PCIe or NVL card does not.
      if (t == "sxm" && !std::any_of(want.begin(), want.end(), IsFormFactor)) continue;
      return false;
    }
  }
  return true;
}

std::vector<const GpuInventory*> ListingGpus(const market::Machine& listing,
                                             const HostInventory& inventory) {
  std::vector<const GpuInventory*> sorted;
  for (const auto& g : inventory.gpus) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(),
            [](const GpuInventory* a, const GpuInventory* b) { return a->index < b->index; });
  std::vector<const GpuInventory*> out;
  for (const GpuInventory* g : sorted) {
    if (static_cast<int>(out.size()) == listing.gpus) break;
    if (GpuNameMatchesMarket(g->name, listing.gpu)) out.push_back(g);
  }
  return out;
}

std::vector<std::string> BindListing(const market::Machine& listing,
                                     const HostInventory& inventory,
                                     const std::vector<std::string>& bound, bool leased) {
  if (leased && static_cast<int>(bound.size()) == listing.gpus) return bound;
  std::vector<std::string> out;
  for (const GpuInventory* g : ListingGpus(listing, inventory)) out.push_back(g->uuid);
  return out;
}

market::MachineCondition MachineConditionFor(const market::Machine& listing,
                                             const HostInventory& inventory,
                                             const std::vector<std::string>& bound,
                                             TimestampMicros offline_since) {
  market::MachineCondition c;
  c.offline_since = offline_since;
  const std::string listed =
      "the listing says " + std::to_string(listing.gpus) + " x " + listing.gpu;
  std::vector<int> gone;
  for (int i = 0; i < listing.gpus; ++i) {
    const GpuInventory* g = nullptr;
    if (i < static_cast<int>(bound.size())) {
      for (const auto& candidate : inventory.gpus) {
        if (candidate.uuid == bound[static_cast<std::size_t>(i)]) g = &candidate;
      }
    }
    if (g == nullptr) {
      gone.push_back(i);
      c.blocked_mask |= 1u << i;
    } else if (!g->healthy) {
      c.blocked_mask |= 1u << i;
    }
  }
  if (inventory.gpus.empty()) {
    c.hold_reason = "the host's agent found no NVIDIA GPU" +
                    (inventory.error.empty() ? std::string()
                                             : " (" + inventory.error.substr(0, 200) + ")") +
                    " but " + listed;
  } else if (static_cast<int>(bound.size()) < listing.gpus) {
    // Say what is there, grouped by model: "4 x NVIDIA H100 80GB HBM3".
    std::map<std::string, int> models;
    for (const auto& g : inventory.gpus) ++models[g.name.substr(0, 64)];
    std::string measured;
    for (const auto& [name, n] : models) {
      measured += (measured.empty() ? "" : ", ") + std::to_string(n) + " x " + name;
    }
    c.hold_reason = "the host reports " + Plural(inventory.gpus.size(), "GPU", "GPUs") + " (" +
                    measured + "), " + std::to_string(ListingGpus(listing, inventory).size()) +
                    " of them " + listing.gpu + ", but " + listed +
                    ": its asks are off the book until the host reports them or the listing is "
                    "corrected";
  } else if (!gone.empty()) {
    std::string which;
    for (int i : gone) {
      which += (which.empty() ? "" : ", ") + std::to_string(i) + " (" +
               bound[static_cast<std::size_t>(i)].substr(0, 64) + ")";
    }
    c.hold_reason = "the host no longer reports the listing's GPU " + which +
                    ", which running leases use: its asks are off the book until it is back";
  }
  if (c.hold_reason.empty()) c.hold_reason = ClaimedBeyondMeasured(listing, inventory);
  if (c.hold_reason.size() > market::kMaxHoldReasonBytes) {
    c.hold_reason.resize(market::kMaxHoldReasonBytes);
  }
  return c;
}

std::string LeaseWorkloadId(std::int64_t lease_id) { return "lease-" + std::to_string(lease_id); }

std::int64_t LeaseOfWorkload(std::string_view workload_id) {
  if (workload_id.rfind("lease-", 0) != 0) return 0;
  auto id = ParseInt64(workload_id.substr(6), "lease");
  return id.ok() && *id > 0 && std::to_string(*id) == workload_id.substr(6) ? *id : 0;
}

Status ValidateImageRef(std::string_view image) {
  auto bad = [] {
    return Status::InvalidArgument(
               "image must be a Docker image reference such as "
               "\"nvidia/cuda:12.4.1-base-ubuntu22.04\" (1.." +
               std::to_string(kMaxImageRefBytes) + " of letters, digits and ._/:@-)")
        .WithField("image");
  };
  if (image.empty() || image.size() > kMaxImageRefBytes) return bad();
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(image.front()) || !alnum(image.back())) return bad();
  for (char c : image) {
    if (!alnum(c) && c != '.' && c != '_' && c != '/' && c != ':' && c != '@' && c != '-') {
      return bad();
    }
  }
  // It also travels in a Docker API path (GET /images/{name}/json): no empty or dot segments.
  if (image.find("..") != std::string_view::npos || image.find("//") != std::string_view::npos ||
      image.find("/.") != std::string_view::npos) {
    return bad();
  }
  return Status::Ok();
}

Status ValidatePublicHost(std::string_view host) {
  bool ok = !host.empty() && host.size() <= kMaxPublicHostBytes && host.front() != '-';
  for (char c : host) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == ':' || c == '-');
  }
  if (!ok) {
    return Status::InvalidArgument("public_host must be a host name or an IP address (1.." +
                                   std::to_string(kMaxPublicHostBytes) +
                                   " of letters, digits, '.', ':' and '-')")
        .WithField("public_host");
  }
  return Status::Ok();
}

std::string ConnectionLine(const AgentHost& host, const WorkloadRecord& workload) {
  if (workload.state != "running" || workload.ssh_port <= 0 || host.public_host.empty()) return "";
  // An IPv6 address is written as it is: ssh takes it without brackets with -p.
  return "ssh -p " + std::to_string(workload.ssh_port) + " root@" + host.public_host;
}

}  // namespace gpuhub::engine
