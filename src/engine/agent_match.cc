// The pure side of engine/agents.h: what a host's measured inventory means for its listing, and
// the checks of what agents and customers send.
#include <algorithm>
#include <map>
#include <set>

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
  if (inventory.disk_total_gb > 0 && listing.disk_gb > inventory.disk_total_gb) {
    return "the listing says " + std::to_string(listing.disk_gb) +
           " GB of disk but the host's disk is " + std::to_string(inventory.disk_total_gb) +
           " GB" + tail;
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

namespace {

bool Lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool Alnum(char c) { return Lower(c) || (c >= 'A' && c <= 'Z'); }

// A path component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)*.
bool PathComponent(std::string_view c) {
  if (c.empty() || !Lower(c.front()) || !Lower(c.back())) return false;
  for (std::size_t i = 0; i < c.size();) {
    if (Lower(c[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < c.size() && !Lower(c[j])) ++j;
    std::string_view sep = c.substr(i, j - i);
    bool dashes = sep.find_first_not_of('-') == std::string_view::npos;
    if (!(sep == "." || sep == "_" || sep == "__" || dashes)) return false;
    i = j;
  }
  return true;
}

// A registry host: components [A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])? joined by '.', then an
// optional :port.
bool Domain(std::string_view d) {
  if (auto colon = d.find(':'); colon != std::string_view::npos) {
    std::string_view port = d.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return false;
    }
    d = d.substr(0, colon);
  }
  for (const auto& part : Split(std::string(d), '.')) {
    if (part.empty() || !Alnum(part.front()) || !Alnum(part.back())) return false;
    for (char c : part) {
      if (!Alnum(c) && c != '-') return false;
    }
  }
  return !d.empty();
}

}  // namespace

Status ValidateImageRef(std::string_view image) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument(
               "image must be a Docker image reference such as "
               "\"nvidia/cuda:12.4.1-base-ubuntu22.04\" or \"ghcr.io/acme/train:v2\" (" + why +
               ")")
        .WithField("image");
  };
  if (image.empty() || image.size() > kMaxImageRefBytes) {
    return bad("1 to " + std::to_string(kMaxImageRefBytes) + " characters");
  }
  // The agent checks the same (it travels in a Docker API path): it ends in a letter or digit.
  if (!Alnum(image.back())) return bad("it must end in a letter or digit");
  std::string_view rest = image;
  if (auto at = rest.find('@'); at != std::string_view::npos) {
    std::string_view digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (digest.substr(0, 7) != "sha256:" || digest.size() != 7 + 64 ||
        digest.substr(7).find_first_not_of("0123456789abcdef") != std::string_view::npos) {
      return bad("a digest is @sha256: and 64 lower-case hex digits");
    }
  }
  std::size_t slash = rest.rfind('/');
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos &&
                                    (slash == std::string_view::npos || colon > slash)) {
    std::string_view tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    bool ok = !tag.empty() && tag.size() <= 128 && (Alnum(tag[0]) || tag[0] == '_');
    for (char c : tag) ok = ok && (Alnum(c) || c == '_' || c == '.' || c == '-');
    if (!ok) return bad("a tag is up to 128 of letters, digits, '_', '.' and '-'");
  }
  std::vector<std::string> parts = Split(std::string(rest), '/');
  std::size_t first = 0;
  // Docker's rule: the first of several components is a registry when it has a '.' or a ':' or
  // is "localhost" (or has an upper-case letter).
  if (parts.size() > 1) {
    const std::string& d = parts[0];
    bool upper = std::any_of(d.begin(), d.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    if (d.find_first_of(".:") != std::string::npos || d == "localhost" || upper) {
      if (!Domain(d)) return bad("the registry must be a host name with an optional :port");
      first = 1;
    }
  }
  if (first == parts.size()) return bad("a repository name is needed");
  for (std::size_t i = first; i < parts.size(); ++i) {
    if (!PathComponent(parts[i])) {
      return bad("repository names are lower-case letters and digits, joined by '.', '_' or '-'");
    }
  }
  return Status::Ok();
}

Status ValidateContainerPorts(const std::vector<int>& ports) {
  if (ports.size() > kMaxExtraPorts) {
    return Status::InvalidArgument("ports: at most " + std::to_string(kMaxExtraPorts) +
                                   " extra container ports")
        .WithField("ports");
  }
  std::set<int> seen;
  for (int p : ports) {
    if (p < 1 || p > 65535 || p == 22 || !seen.insert(p).second) {
      return Status::InvalidArgument(
                 "ports must be distinct container ports from 1 to 65535 such as 8888 (22 is "
                 "sshd's, always published)")
          .WithField("ports");
    }
  }
  return Status::Ok();
}

std::string FormatPublishedPorts(const std::vector<PublishedPort>& ports) {
  std::string out;
  for (const auto& p : ports) {
    out += (out.empty() ? "" : ",") + std::to_string(p.container) + ":" + std::to_string(p.host);
  }
  return out;
}

std::vector<PublishedPort> ParsePublishedPorts(std::string_view text) {
  std::vector<PublishedPort> out;
  if (text.empty()) return out;
  for (const auto& item : Split(std::string(text), ',')) {
    auto colon = item.find(':');
    if (colon == std::string::npos) return {};
    auto c = ParseInt64(item.substr(0, colon), "port");
    auto h = ParseInt64(item.substr(colon + 1), "port");
    if (!c.ok() || !h.ok() || *c < 1 || *c > 65535 || *h < 1 || *h > 65535) return {};
    out.push_back({static_cast<int>(*c), static_cast<int>(*h)});
  }
  return out;
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
