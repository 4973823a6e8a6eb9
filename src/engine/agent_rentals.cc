// The host agent on the nodes of the term fleet (engine/agents.h, docs/agent.md "Term rentals").
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/strings.h"
#include "engine/agents.h"
#include "engine/agents_internal.h"
#include "core/money.h"
#include "engine/limits.h"
#include "engine/notifications.h"
#include "engine/rentals.h"
#include "engine/ssh_keys.h"
#include "engine/storage.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using rentals::RentalState;

const rentals::Fleet& F(const State& state) { return state.rentals->fleet; }

constexpr std::string_view kRentalPrefix = "rental-";

std::vector<DesiredVolume> VolumesOf(const rentals::Rental& r) {
  std::vector<DesiredVolume> out;
  for (int i = 0; i < rentals::kMaxCardsPerNode; ++i) {
    if (r.card_mask & (1u << i)) out.push_back({RentalWorkloadId(r.id) + "-" + std::to_string(i), i});
  }
  return out;
}

bool Reported(const AgentHost& host, const std::string& uuid) {
  return std::any_of(host.inventory.gpus.begin(), host.inventory.gpus.end(),
                     [&](const GpuInventory& g) { return g.uuid == uuid; });
}


// When the rental's instance first ran (its "provisioned" event; its start when the history was
// trimmed): no credit for a span before it ran.
TimestampMicros RanSince(const rentals::Fleet& fleet, const rentals::Rental& r) {
  for (const auto& e : fleet.History(r.id)) {
    if (e.kind == rentals::EventKind::kProvisioned) return e.at;
  }
  return r.term_start == 0 ? 0 : r.created_at;
}

// Until when it should have run: its release, the end of the term it was stopped at, or now.
TimestampMicros RanUntil(const rentals::Rental& r, TimestampMicros now) {
  if (r.state == RentalState::kReleased) return r.released_at;
  if (r.state == RentalState::kStopped) return r.term_end;
  return now;
}

void WriteCredit(Txn& txn, const RentalDowntimeCredit& c) {
  txn.writes.Upsert("rental_downtime_credits",
                    {{"id", c.id},
                     {"rental_id", c.rental_id},
                     {"host_id", c.host_id},
                     {"customer_id", c.customer_id},
                     {"from_us", c.from},
                     {"to_us", c.to},
                     {"multiplier_ppm", c.multiplier_ppm},
                     {"usd_micros", c.usd_micros},
                     {"currency", std::string(CurrencyCode(c.currency))},
                     {"amount_micros", c.amount_micros},
                     {"created_at_us", c.created_at}});
}

std::string Duration(std::int64_t micros) {
  const std::int64_t minutes = micros / (60 * kMicrosPerSecond);
  return std::to_string(minutes / 60) + " h " + std::to_string(minutes % 60) + " min";
}

}  // namespace

std::int64_t DowntimeCreditMicros(std::int64_t price_micros, std::int64_t term_micros,
                                  std::int64_t down_micros, std::int64_t multiplier_ppm) {
  // To the second, so that the product stays far from overflow (a month is 2.6e6 s).
  const std::int64_t down_s = std::clamp<std::int64_t>(down_micros, 0, term_micros) / kMicrosPerSecond;
  const std::int64_t term_s = term_micros / kMicrosPerSecond;
  if (down_s == 0 || term_s == 0 || price_micros <= 0 || multiplier_ppm <= 0) return 0;
  auto credit = MulDivHalfEven(price_micros, down_s * multiplier_ppm, term_s * 1'000'000);
  return credit.ok() ? *credit : 0;
}

std::vector<RentalDowntimeCredit> RentalDowntimeCredits(const State& state,
                                                        std::int64_t rental_id) {
  std::vector<RentalDowntimeCredit> out;
  auto [first, last] = state.agents->downtime_by_rental.equal_range(rental_id);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  std::sort(out.begin(), out.end(),
            [](const RentalDowntimeCredit& a, const RentalDowntimeCredit& b) { return a.id < b.id; });
  return out;
}

std::string RentalWorkloadId(std::int64_t rental_id) {
  return std::string(kRentalPrefix) + std::to_string(rental_id);
}

std::int64_t RentalOfWorkload(std::string_view workload_id) {
  if (workload_id.substr(0, kRentalPrefix.size()) != kRentalPrefix) return 0;
  auto id = ParseInt64(workload_id.substr(kRentalPrefix.size()), "rental");
  return id.ok() && *id > 0 && std::to_string(*id) == workload_id.substr(kRentalPrefix.size())
             ? *id
             : 0;
}

const AgentHost* FindHostOfNode(const State& state, std::int64_t node_id) {
  auto it = state.agents->host_by_node.find(node_id);
  return it == state.agents->host_by_node.end() ? nullptr : FindHost(state, it->second);
}

namespace agents_internal {

bool NodeWorkloadOfHost(const State& state, const AgentHost& host, std::string_view workload_id) {
  std::int64_t id = RentalOfWorkload(workload_id);
  if (id == 0 || host.kind != HostKind::kNode) return false;
  const rentals::Rental* r = F(state).FindRental(id);
  return r != nullptr && r->node_id == host.node_id;
}

std::vector<std::string> BindNode(const State& state, const AgentHost& host) {
  const rentals::Node* node = F(state).FindNode(host.node_id);
  if (node == nullptr) return host.bound_uuids;
  market::Machine listing;
  listing.gpu = node->gpu;
  listing.gpus = node->cards;
  return BindListing(listing, host.inventory, host.bound_uuids,
                     !F(state).LiveRentalsOnNode(node->id).empty());
}

std::vector<DesiredWorkload> DesiredForNode(const State& state, const AgentHost& host) {
  std::vector<DesiredWorkload> out;
  const rentals::Node* node = F(state).FindNode(host.node_id);
  if (node == nullptr || host.kind != HostKind::kNode) return out;
  for (const rentals::Rental& r : F(state).LiveRentalsOnNode(node->id)) {
    // A rental on hold keeps its disk but runs nothing.
    if (r.state != RentalState::kProvisioning && r.state != RentalState::kActive) continue;
    DesiredWorkload w;
    w.id = RentalWorkloadId(r.id);
    bool placed = true;
    for (const DesiredVolume& v : VolumesOf(r)) {
      const auto slot = static_cast<std::size_t>(v.slot);
      // A new instance needs its cards reported; a running one keeps its bound cards when one drops
      // out of a report (an NVML hiccup must not remove a customer's container).
      if (slot >= host.bound_uuids.size() ||
          (r.state == RentalState::kProvisioning && !Reported(host, host.bound_uuids[slot]))) {
        placed = false;
        break;
      }
      w.gpu_uuids.push_back(host.bound_uuids[slot]);
      w.volumes.push_back(v);
    }
    if (!placed) continue;
    w.image = state.agents->config.default_image;
    if (const RentalLaunch* launch = FindRentalLaunch(state, r.id)) {
      w.image = launch->image;
      w.ports = launch->extras.ports;
      w.sealed_registry_auth = launch->extras.sealed_registry_auth;
    }
    w.port_range_first = market::kDefaultPortRangeFirst;
    w.port_range_last = market::kDefaultPortRangeLast;
    for (const auto& key : ListSshKeys(state, r.customer_id)) {
      w.ssh_authorized_keys.push_back(key.key.Line());
    }
    // Provisioning: until the 1 h refund. Active: the paid term (and the next one once paid), so
    // an agent cut off from the server stops the instance exactly when nobody paid for more.
    w.not_after = r.state == RentalState::kProvisioning
                      ? r.instance.provisioning_deadline
                      : r.term_end + (r.next_paid ? rentals::TermMicros(r.term) : 0);
    w.network_volumes = NetworkVolumesOf(state, r.id);
    w.cpus = std::max<std::int64_t>(1, host.inventory.vcpus * r.count / node->cards);
    w.memory_gb = std::max<std::int64_t>(1, host.inventory.ram_mib / 1024 * r.count / node->cards);
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<DiskAction> DiskActionsForNode(const State& state, const AgentHost& host,
                                           TimestampMicros now) {
  std::vector<DiskAction> out;
  if (host.kind != HostKind::kNode) return out;
  std::uint32_t live_mask = 0;
  for (const rentals::Rental& r : F(state).LiveRentalsOnNode(host.node_id)) live_mask |= r.card_mask;
  for (const rentals::Rental& r : F(state).UnwipedOnNode(host.node_id)) {
    const WorkloadRecord* w = FindWorkload(state, RentalWorkloadId(r.id));
    // Only a report made after the release counts: "erased" sent earlier (a confused or hostile
    // agent) must not skip the erase of the volume a customer used.
    const bool erased = w != nullptr && w->host_id == host.id && w->updated_at >= r.released_at &&
                        (w->state == "erased" || w->state == "wiped");
    DiskAction a;
    a.id = RentalWorkloadId(r.id);
    a.volumes = VolumesOf(r);
    if (!erased) {
      a.action = "erase";  // the key was destroyed at the release: its slots go now
    } else if (now >= r.instance.wipe_due_at || (r.card_mask & live_mask) != 0) {
      // Due, or a slot rented again: discarded before the next rental's volume is formatted.
      a.action = "wipe";
    } else {
      continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

Status CreditNodeDowntime(Txn& txn, const AgentHost& host, TimestampMicros from,
                          TimestampMicros to) {
  AgentsState& a = *txn.state.agents;
  const rentals::Fleet& fleet = F(txn.state);
  std::vector<rentals::Rental> candidates = fleet.LiveRentalsOnNode(host.node_id);
  for (auto& r : fleet.UnwipedOnNode(host.node_id)) candidates.push_back(std::move(r));
  for (const rentals::Rental& r : candidates) {
    const TimestampMicros ran_since = RanSince(fleet, r);
    if (ran_since == 0) continue;  // never ran: provisioning (refunded in full if it never does)
    const TimestampMicros start = std::max(from, ran_since);
    const TimestampMicros end = std::min(to, RanUntil(r, to));
    if (end <= start) continue;
    RentalDowntimeCredit c;
    c.rental_id = r.id;
    c.host_id = host.id;
    c.customer_id = r.customer_id;
    c.from = start;
    c.to = end;
    c.multiplier_ppm = a.config.rental_downtime_multiplier_ppm;
    const std::int64_t term = rentals::TermMicros(r.term);
    c.usd_micros = DowntimeCreditMicros(r.price_micros, term, end - start, c.multiplier_ppm);
    if (c.usd_micros == 0) continue;
    c.currency = r.currency;
    c.amount_micros = c.usd_micros;
    if (r.currency != Currency::kUsd) {
      // The same fraction of what the wallet paid for the term, in its currency (no conversion at
      // today's rate), as a refund returns what was paid.
      std::int64_t paid = 0;
      for (const auto& charge : fleet.ChargesOf(r.id)) {
        if (charge.kind != rentals::ChargeKind::kRefund && charge.period == r.period) {
          paid = charge.paid_micros;
        }
      }
      c.amount_micros = DowntimeCreditMicros(paid, term, end - start, c.multiplier_ppm);
    }
    c.id = a.next_downtime_credit_id;
    c.created_at = txn.now;
    const std::string memo = "downtime credit of rental " + std::to_string(r.id) + ": node offline " +
                             Duration(end - start) + " from " + FormatTimestamp(start);
    const std::string id_prefix = "rental:" + std::to_string(r.id) + ":downtime:" + std::to_string(c.id);
    const ledger::AccountKey wallet = ledger::AccountKey::Wallet(r.customer_id, r.currency);
    std::vector<ledger::TransferRequest> legs;
    ledger::TransferRequest revenue;
    revenue.id = id_prefix + ":revenue";
    revenue.debit = ledger::AccountKey::System(ledger::AccountKind::kPlatformRevenue, Currency::kUsd);
    revenue.credit = r.currency == Currency::kUsd
                         ? wallet
                         : ledger::AccountKey::System(ledger::AccountKind::kFxConversion, Currency::kUsd);
    revenue.amount_micros = c.usd_micros;
    revenue.code = "rental_downtime_credit";
    revenue.memo = memo;
    revenue.timestamp = txn.now;
    legs.push_back(revenue);
    if (r.currency != Currency::kUsd) {
      ledger::TransferRequest fx = revenue;
      fx.id = id_prefix + ":fx";
      fx.debit = ledger::AccountKey::System(ledger::AccountKind::kFxConversion, r.currency);
      fx.credit = wallet;
      fx.amount_micros = c.amount_micros;
      legs.push_back(std::move(fx));
    }
    ledger::BatchResult result = txn.state.wallets->ledger.ApplyBatch(legs);
    if (!result.ok()) return result.status();
    WriteTransfers(txn, result.transfers);
    ++a.next_downtime_credit_id;
    a.downtime_by_rental.emplace(r.id, c);
    WriteCredit(txn, c);
    spdlog::info("event=rental_downtime_credit rental={} host={} from={} to={} usd={}", r.id,
                 host.id, FormatTimestamp(start), FormatTimestamp(end), FormatMicros(c.usd_micros));
    auto n = Notify(txn, {r.customer_id, "rental.downtime_credit",
                          "Downtime credit for rental " + std::to_string(r.id),
                          "The node of your rental was offline for " + Duration(end - start) +
                              "; " + FormatMicros(c.amount_micros, 2) + " " +
                              std::string(CurrencyCode(c.currency)) + " was credited to your wallet.",
                          {{"rental_id", std::to_string(r.id)},
                           {"from", FormatTimestamp(start)},
                           {"to", FormatTimestamp(end)},
                           {"amount", FormatMicros(c.amount_micros)},
                           {"currency", std::string(CurrencyCode(c.currency))}}});
    if (!n.ok()) spdlog::error("event=notification_refused error=\"{}\"", n.status().ToString());
  }
  return Status::Ok();
}

void ApplyNodeReport(Txn& txn, const AgentHost& host, const WorkloadRecord& w) {
  const std::int64_t id = RentalOfWorkload(w.id);
  const rentals::Rental* r = F(txn.state).FindRental(id);
  if (r == nullptr) return;
  Result<rentals::Rental> done = *r;
  if (w.state == "running") {
    std::string line = ConnectionLine(host, w);
    if (line.empty()) return;  // no public address yet: the customer could not connect
    rentals::InstanceReport report;
    report.state = rentals::InstanceState::kRunning;
    report.connection = {{"ssh", line},
                         {"host", host.public_host},
                         {"port", std::to_string(w.ssh_port)},
                         {"user", "root"}};
    // The extra ports as published: "8888:41000,8000:41001" (container:host).
    if (!w.ports.empty()) report.connection.emplace_back("ports", FormatPublishedPorts(w.ports));
    const bool moved = r->state == RentalState::kActive && r->instance.connection != report.connection;
    if (r->state != RentalState::kProvisioning && !moved) return;
    done = ReportRentalInstance(txn, id, report);
  } else if (w.state == "failed") {
    if (r->state != RentalState::kProvisioning) return;
    rentals::InstanceReport report;
    report.state = rentals::InstanceState::kFailed;
    report.error = w.detail.empty() ? "the host agent could not start the instance" : w.detail;
    done = ReportRentalInstance(txn, id, report);
  } else if (w.state == "wiped") {
    if (r->state != RentalState::kReleased || r->instance.wiped_at != 0) return;
    done = RecordRentalWipe(txn, id);
  } else {
    return;
  }
  if (!done.ok()) {
    spdlog::warn("event=rental_report_refused rental={} host={} state={} error=\"{}\"", id, host.id,
                 w.state, done.status().message());
    return;
  }
  spdlog::info("event=rental_instance rental={} host={} state={} rental_state={}", id, host.id,
               w.state, rentals::RentalStateName(done->state));
}

}  // namespace agents_internal
}  // namespace gpuhub::engine
