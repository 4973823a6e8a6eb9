// The exchange: the invariants of its state, and of settlement against the ledger.
#include "market/exchange.h"

#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "market/exchange_internal.h"

namespace gpuhub::market {

Status Exchange::CheckInvariants(const ledger::Ledger& ledger) const {
  auto fail = [](const std::string& what) { return Status::Internal("market invariant: " + what); };
  // GPUs: each machine's leased mask is exactly the disjoint union of its active leases.
  std::map<MachineId, std::uint32_t> leased;
  std::unordered_map<UserId, std::size_t> active_by_customer;
  std::size_t active = 0, billed = 0, starting = 0;
  std::map<MachineId, std::size_t> active_per_machine;
  for (const auto& [id, l] : leases_) {
    if (l.status != LeaseStatus::kActive) {
      if (l.paused_at != 0) return fail("ended lease " + std::to_string(id) + " is paused");
      continue;
    }
    ++active;
    ++active_by_customer[l.customer_id];
    std::uint32_t& mask = leased[l.machine_id];
    if ((mask & l.gpu_mask) != 0)
      return fail("a GPU is in two leases (lease " + std::to_string(id) + ")");
    mask |= l.gpu_mask;
    ++active_per_machine[l.machine_id];
    const MachineState& machine = machines_.at(l.machine_id);
    if (!machine.active_leases.count(id)) return fail("lease " + std::to_string(id) + " index");
    if (l.Provisioning()) {
      // Waiting for its host: not billed, its first hour held until its deadline.
      ++starting;
      if (l.paused_at != 0 || l.workload_down || l.start_deadline == 0) {
        return fail("provisioning lease " + std::to_string(id) + " is paused or has no deadline");
      }
      if (!timeline_.count({l.start_deadline, kLeaseStart, id})) {
        return fail("provisioning lease " + std::to_string(id) + " has no deadline event");
      }
      auto hold = ledger.FindTransfer(LeaseHoldTransferId(id));
      if (!hold.ok() || hold->state != ledger::TransferState::kPending ||
          hold->amount_micros != l.hold_micros ||
          hold->debit != AccountKey::Wallet(l.customer_id, l.currency)) {
        return fail("provisioning lease " + std::to_string(id) + " has no matching pending hold");
      }
      continue;
    }
    if ((l.paused_at != 0) != (machine.machine.offline_since != 0 || l.workload_down)) {
      return fail("lease " + std::to_string(id) +
                  " is paused exactly while its machine is offline or its workload down");
    }
    if (l.paused_at == 0) {
      ++billed;
      if (!timeline_.count({l.PaidUntil(), kLeaseHour, id})) {
        return fail("active lease " + std::to_string(id) + " has no billing event");
      }
    }
    if (l.credited_micros > l.HourMicros() * l.hours_paid) {
      return fail("lease " + std::to_string(id) + " credited more than it paid");
    }
  }
  if (active != active_leases_) return fail("active lease count");
  for (const auto& [id, m] : machines_) {
    auto it = leased.find(id);
    std::uint32_t mask = it == leased.end() ? 0 : it->second;
    if (mask != m.leased_mask) return fail("machine " + std::to_string(id) + " leased mask");
    if ((mask >> m.machine.gpus) != 0) return fail("leased GPU beyond the machine");
    if ((m.machine.blocked_mask >> m.machine.gpus) != 0) return fail("blocked GPU beyond it");
    if (m.active_leases.size() != active_per_machine[id]) {
      return fail("machine " + std::to_string(id) + " active lease index");
    }
    const MarketState& market = markets_[static_cast<std::size_t>(m.market)];
    if (m.open_ask != 0) {
      auto a = asks_.find(m.open_ask);
      if (a == asks_.end() || a->second.status != AskStatus::kOpen || a->second.machine_id != id) {
        return fail("machine " + std::to_string(id) + " open ask");
      }
      if (!timeline_.count({AskUntil(a->second), kAskExpiry, m.open_ask})) {
        return fail("open ask without an expiry event");
      }
      bool on_book = market.book.Contains(m.open_ask);
      if (on_book != (m.Free() > 0))
        return fail("ask " + std::to_string(m.open_ask) + " book presence");
    }
  }
  std::size_t open_asks = 0;
  for (const auto& [id, a] : asks_) {
    if (a.status != AskStatus::kOpen) {
      if (markets_[static_cast<std::size_t>(machines_.at(a.machine_id).market)].book.Contains(id)) {
        return fail("closed ask on the book");
      }
      continue;
    }
    ++open_asks;
    if (machines_.at(a.machine_id).open_ask != id) return fail("open ask not its machine's");
  }
  // Bids and holds.
  std::unordered_map<UserId, std::size_t> resting_by_customer;
  std::size_t resting = 0;
  for (const auto& [id, state] : bids_) {
    const Bid& b = state.bid;
    const OrderBook& book = markets_[static_cast<std::size_t>(state.market)].book;
    if (b.status == BidStatus::kResting) {
      ++resting;
      ++resting_by_customer[b.customer_id];
      if (!book.Contains(id)) return fail("resting bid " + std::to_string(id) + " not on the book");
      auto hold = ledger.FindTransfer(BidHoldTransferId(id));
      if (!hold.ok() || hold->state != ledger::TransferState::kPending ||
          hold->amount_micros != b.hold_micros ||
          hold->debit != AccountKey::Wallet(b.customer_id, b.currency)) {
        return fail("resting bid " + std::to_string(id) + " has no matching pending hold");
      }
      if (b.expires_at != 0 && !timeline_.count({b.expires_at, kBidExpiry, id})) {
        return fail("resting bid without an expiry event");
      }
    } else {
      if (book.Contains(id)) return fail("closed bid on the book");
      if ((b.status == BidStatus::kFilled) != (b.lease_id != 0)) return fail("filled bid lease");
    }
  }
  std::size_t on_books = 0;
  for (const auto& m : markets_) {
    GPUHUB_RETURN_IF_ERROR(m.book.CheckConsistency());
    on_books += m.book.ask_orders() + m.book.bid_orders();
  }
  std::size_t asks_on_book = 0;
  for (const auto& [id, m] : machines_) asks_on_book += (m.open_ask != 0 && m.Free() > 0);
  if (on_books != asks_on_book + resting) return fail("books hold orders that are not open");
  for (const auto& [customer, n] : open_bids_by_customer_) {
    auto it = resting_by_customer.find(customer);
    if (n != (it == resting_by_customer.end() ? 0 : it->second)) return fail("open bid counter");
  }
  for (const auto& [customer, n] : active_leases_by_customer_) {
    auto it = active_by_customer.find(customer);
    if (n != (it == active_by_customer.end() ? 0 : it->second)) return fail("active lease counter");
  }
  // Timeline: exactly one event per active lease, open ask and resting bid with an expiry.
  std::size_t expiring_bids = 0;
  for (const auto& [id, state] : bids_) {
    expiring_bids += state.bid.status == BidStatus::kResting && state.bid.expires_at != 0;
  }
  if (timeline_.size() != billed + starting + open_asks + expiring_bids) {
    return fail("stray timeline events");
  }
  // Payouts: each pending payout is a pending transfer.
  for (PayoutId id : pending_payouts_) {
    auto t = ledger.FindTransfer(PayoutTransferId(id));
    if (!t.ok() || t->state != ledger::TransferState::kPending ||
        t->amount_micros != payouts_.at(id).amount_micros) {
      return fail("pending payout " + std::to_string(id) + " without its pending transfer");
    }
  }
  return Status::Ok();
}

Status Exchange::CheckSettlement(const ledger::Ledger& ledger, const Snapshot* history) const {
  auto fail = [](const std::string& what) { return Status::Internal("settlement: " + what); };
  std::unordered_map<UserId, ProviderTotals> sums;
  std::map<LeaseId, const Lease*> leases;
  for (const auto& [id, l] : leases_) leases.emplace(id, &l);
  std::map<OrderId, const Bid*> bids;
  for (const auto& [id, state] : bids_) bids.emplace(id, &state.bid);
  if (history != nullptr) {
    for (const auto& l : history->leases) {
      if (!leases.emplace(l.id, &l).second) return fail("lease " + std::to_string(l.id) + " twice");
    }
    for (const auto& b : history->bids) {
      if (!bids.emplace(b.id, &b).second) return fail("bid " + std::to_string(b.id) + " twice");
    }
  }
  for (const auto& [id, lease] : leases) {
    const Lease& l = *lease;
    const std::int64_t total = l.HourMicros();
    const std::int64_t fee = MulDivHalfEven(total, l.fee_ppm, kPpm).value();
    for (std::int64_t hour = 1; hour <= l.hours_paid; ++hour) {
      std::string where = "lease " + std::to_string(id) + " hour " + std::to_string(hour);
      auto pay = ledger.FindTransfer(LeaseHourTransferId(id, hour, "provider"));
      if (!pay.ok()) return fail(where + " was never charged");
      if (pay->amount_micros != total - fee ||
          pay->credit != AccountKey::Payable(l.provider_id, Currency::kUsd) ||
          pay->state != ledger::TransferState::kPosted) {
        return fail(where + ": provider leg is wrong");
      }
      std::int64_t fee_paid = 0;
      auto f = ledger.FindTransfer(LeaseHourTransferId(id, hour, "fee"));
      if (f.ok()) {
        if (f->credit != AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd) ||
            f->debit != pay->debit) {
          return fail(where + ": fee leg is wrong");
        }
        fee_paid = f->amount_micros;
      }
      // Customer paid = provider credited + fee, in USD.
      if (fee_paid != fee || pay->amount_micros + fee_paid != total) {
        return fail(where + ": provider + fee != price");
      }
      // Tax on top, when there was any (its rate is billing's: only its shape is checked here).
      auto tax = ledger.FindTransfer(LeaseHourTransferId(id, hour, "tax"));
      if (tax.ok() &&
          (tax->credit != AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd) ||
           tax->debit != pay->debit || tax->amount_micros > total ||
           tax->state != ledger::TransferState::kPosted)) {
        return fail(where + ": tax leg is wrong");
      }
      auto fx = ledger.FindTransfer(LeaseHourTransferId(id, hour, "fx"));
      if (l.currency == Currency::kUsd) {
        if (pay->debit != AccountKey::Wallet(l.customer_id, Currency::kUsd) || fx.ok()) {
          return fail(where + ": not paid from the USD wallet");
        }
      } else if (!fx.ok() || fx->debit != AccountKey::Wallet(l.customer_id, l.currency) ||
                 pay->debit != AccountKey::System(AccountKind::kFxConversion, Currency::kUsd)) {
        return fail(where + ": FX legs are wrong");
      }
    }
    if (l.hold_micros > 0) {
      // The first hour's hold: open while provisioning, voided once it started or ended.
      auto hold = ledger.FindTransfer(LeaseHoldTransferId(id));
      const auto want = l.Provisioning() ? ledger::TransferState::kPending
                                         : ledger::TransferState::kVoided;
      if (!hold.ok() || hold->state != want || hold->amount_micros != l.hold_micros ||
          hold->debit != AccountKey::Wallet(l.customer_id, l.currency)) {
        return fail("lease " + std::to_string(id) + " hold of its first hour is wrong");
      }
    }
    if (ledger.FindTransfer(LeaseHourTransferId(id, l.hours_paid + 1, "provider")).ok()) {
      return fail("lease " + std::to_string(id) + " was charged for an hour it does not count");
    }
    // Downtime credits: back to the customer's wallet (or the FX account that paid for it), never
    // more than the hour cost, adding up to what the lease says.
    std::int64_t credited = 0, credited_provider = 0;
    const AccountKey back_to = l.currency == Currency::kUsd
                                   ? AccountKey::Wallet(l.customer_id, Currency::kUsd)
                                   : AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
    for (std::int64_t hour = 1; l.credited_micros > 0 && hour <= l.hours_paid; ++hour) {
      std::int64_t in_hour = 0;
      for (const char* leg : {"provider", "fee", "advance"}) {
        auto t = ledger.FindTransfer(LeaseCreditTransferId(id, hour, leg));
        if (!t.ok()) continue;
        const AccountKey from =
            std::string_view(leg) == "provider"
                ? AccountKey::Payable(l.provider_id, Currency::kUsd)
                : AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
        if (t->debit != from || t->credit != back_to) {
          return fail("lease " + std::to_string(id) + " hour " + std::to_string(hour) +
                      ": downtime credit legs are wrong");
        }
        in_hour += t->amount_micros;
        if (std::string_view(leg) == "provider") credited_provider += t->amount_micros;
      }
      if (in_hour > total) {
        return fail("lease " + std::to_string(id) + " hour " + std::to_string(hour) +
                    " was credited more than it cost");
      }
      credited += in_hour;
    }
    if (credited != l.credited_micros || credited_provider != l.credited_provider_micros) {
      return fail("lease " + std::to_string(id) + " downtime credits disagree with the ledger");
    }
    ProviderTotals& s = sums[l.provider_id];
    s.credited_micros += credited_provider;
    s.gross_micros += total * l.hours_paid;
    s.fee_micros += fee * l.hours_paid;
    s.lease_hours += l.hours_paid;
    s.gpu_hours += l.gpus * l.hours_paid;
  }
  // Every closed bid's hold was released (voided; a fill voids it and pays the hour).
  for (const auto& [id, bid] : bids) {
    if (bid->status == BidStatus::kResting || bid->hold_micros == 0) continue;
    auto hold = ledger.FindTransfer(BidHoldTransferId(id));
    if (!hold.ok() || hold->state != ledger::TransferState::kVoided) {
      return fail("closed bid " + std::to_string(id) + " did not release its hold");
    }
  }
  if (history == nullptr) return Status::Ok();
  for (const auto& [provider, t] : totals_) {
    const ProviderTotals& s = sums[provider];
    if (s.gross_micros != t.gross_micros || s.fee_micros != t.fee_micros ||
        s.lease_hours != t.lease_hours || s.gpu_hours != t.gpu_hours ||
        s.credited_micros != t.credited_micros) {
      return fail("earnings totals of provider " + std::to_string(provider));
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::market
