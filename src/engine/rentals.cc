#include "engine/rentals.h"

#include <spdlog/spdlog.h>

#include <cctype>

#include "engine/accounts.h"
#include "engine/agent_watch.h"
#include "engine/billing.h"
#include "engine/limits.h"
#include "engine/notifications.h"
#include "engine/rental_billing.h"
#include "engine/rentals_rows.h"
#include "engine/storage.h"

namespace gpuhub::engine {
namespace {

using rentals::Changes;

rentals::Fleet& F(Txn& txn) { return txn.state.rentals->fleet; }
ledger::Ledger& L(Txn& txn) { return txn.state.wallets->ledger; }

// Queues the rows of what changed, records the notices and hands every charge to billing.
Status Write(Txn& txn, Changes& changes) {
  changes.Normalize();
  WriteRentalRows(txn, F(txn), changes);
  for (auto id : changes.rentals) {  // its node's long-poll (agent_watch.h)
    if (const rentals::Rental* r = F(txn).FindRental(id); r != nullptr) {
      NoteNodeDesiredChanged(txn.state, r->node_id);
    }
  }
  // A released rental's volumes are detached in the same commit (engine/storage.h).
  GPUHUB_RETURN_IF_ERROR(SyncStorageWithRentals(txn, changes.rentals));
  for (const auto& charge : changes.charges) {
    GPUHUB_RETURN_IF_ERROR(OnRentalCharged(txn, charge));
  }
  RecordNotices(txn, changes.notices);
  return Status::Ok();
}

// Runs a fleet command and queues its rows when it succeeds. The lifecycle is not advanced here:
// a command that fails has its rows dropped, and transitions must never be (the tick runs them,
// every second with the real clock, in the same command as a manual clock advance).
template <typename T, typename Fn>
Result<T> Run(Txn& txn, Fn&& fn) {
  Changes changes;
  Result<T> result = fn(changes);
  if (result.ok()) GPUHUB_RETURN_IF_ERROR(Write(txn, changes));
  return result;
}

}  // namespace

Result<rentals::Node> AddRentalNode(Txn& txn, const rentals::NodeSpec& spec) {
  return Run<rentals::Node>(txn,
                            [&](Changes& c) { return F(txn).AddNode(spec, txn.now, &c); });
}

Result<rentals::Node> SetRentalNodeState(Txn& txn, rentals::NodeId id, rentals::NodeState state) {
  return Run<rentals::Node>(
      txn, [&](Changes& c) { return F(txn).SetNodeState(id, state, txn.now, &c); });
}

Result<rentals::Quote> QuoteRental(Txn& txn, std::int64_t customer,
                                   const rentals::OrderSpec& spec) {
  return F(txn).QuoteOrder(customer, spec, L(txn), RentalTaxFunction(txn.state), txn.now);
}

Result<rentals::Rental> OrderRental(Txn& txn, std::int64_t customer,
                                    const rentals::OrderSpec& spec, const RequestOrigin* origin) {
  GPUHUB_RETURN_IF_ERROR(CheckCanPurchase(txn.state, customer));
  return Run<rentals::Rental>(txn, [&](Changes& c) {
    auto rental =
        F(txn).Order(customer, spec, L(txn), RentalTaxFunction(txn.state), txn.now, &c);
    // Noted once the order can no longer fail and before its invoice is written (Write), so the
    // invoice carries this request's evidence.
    if (rental.ok() && origin != nullptr) NoteEvidence(txn, customer, *origin);
    return rental;
  });
}

Result<rentals::Renewal> PayRentalRenewal(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                          std::optional<Currency> currency,
                                          const RequestOrigin* origin) {
  return Run<rentals::Renewal>(txn, [&](Changes& c) {
    auto renewal = F(txn).PayRenewal(customer, id, currency, L(txn),
                                     RentalTaxFunction(txn.state), txn.now, &c);
    if (renewal.ok() && origin != nullptr) NoteEvidence(txn, customer, *origin);
    return renewal;
  });
}

Result<rentals::Rental> ReleaseRental(Txn& txn, std::int64_t customer, rentals::RentalId id) {
  return Run<rentals::Rental>(
      txn, [&](Changes& c) { return F(txn).Release(customer, id, L(txn), txn.now, &c); });
}

Result<rentals::Rental> SetRentalAutoRenew(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                           bool on) {
  return Run<rentals::Rental>(
      txn, [&](Changes& c) { return F(txn).SetAutoRenew(customer, id, on, txn.now, &c); });
}

Result<rentals::Rental> AddRentalExtraNvme(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                           std::int64_t add_tb) {
  return Run<rentals::Rental>(txn, [&](Changes& c) {
    return F(txn).AddExtraNvme(customer, id, add_tb, L(txn), RentalTaxFunction(txn.state),
                               txn.now, &c);
  });
}

Result<rentals::Rental> ReportRentalInstance(Txn& txn, rentals::RentalId id,
                                             const rentals::InstanceReport& report) {
  return Run<rentals::Rental>(
      txn, [&](Changes& c) { return F(txn).ReportInstance(id, report, L(txn), txn.now, &c); });
}

Result<rentals::Rental> RecordRentalWipe(Txn& txn, rentals::RentalId id) {
  return Run<rentals::Rental>(txn,
                              [&](Changes& c) { return F(txn).RecordWipe(id, txn.now, &c); });
}

Result<Shortfall> ComputeShortfall(const Txn& txn, std::int64_t user_id, Currency currency,
                                   std::int64_t needed_micros) {
  GPUHUB_ASSIGN_OR_RETURN(auto wallet, txn.state.wallets->ledger.GetAccount(
                                           ledger::AccountKey::Wallet(user_id, currency)));
  Shortfall s;
  s.currency = currency;
  s.available_micros = wallet.available();
  s.needed_micros = needed_micros;
  s.shortfall_micros = needed_micros - s.available_micros;
  if (s.shortfall_micros <= 0) return Status::Internal("no shortfall");
  // Top-ups are whole cents: round the shortfall up, and up to the smallest top-up.
  constexpr std::int64_t kCent = 10'000;
  std::int64_t amount = (s.shortfall_micros + kCent - 1) / kCent * kCent;
  amount = std::max(amount, kMinTopupMicros);
  if (amount > kMaxTopupMicros) {
    s.topup_note = "the shortfall is more than one top-up can carry (" +
                   FormatMicros(kMaxTopupMicros, 2) + "); top up in several invoices";
    return s;
  }
  for (const auto& inv : ListTopups(txn, user_id, kMaxOpenInvoicesPerUser)) {
    if (inv.status == InvoiceStatus::kNew && inv.currency == currency &&
        inv.amount_micros == amount) {
      s.open_topup = inv;
      break;
    }
  }
  if (!s.open_topup) {
    Status can_open = CheckCanOpenTopup(txn, user_id);
    if (!can_open.ok()) {
      s.topup_note = can_open.message();
      return s;
    }
  }
  s.topup_micros = amount;
  return s;
}

void RecordNotices(Txn& txn, std::vector<rentals::Notice>& notices) {
  for (auto& notice : notices) {
    auto n = Notify(txn, {notice.user_id, notice.kind, notice.subject, notice.message,
                          std::move(notice.data)});
    if (!n.ok()) spdlog::error("event=notification_refused error=\"{}\"", n.status().ToString());
  }
}

Status AdvanceRentals(Txn& txn) {
  if (F(txn).NextEventAt() > txn.now) return Status::Ok();
  Changes changes;
  F(txn).AdvanceTo(L(txn), RentalTaxFunction(txn.state), txn.now, &changes);
  return Write(txn, changes);
}

void AddRentalsTickHooks(Engine& engine) { engine.AddTickHook(AdvanceRentals); }

Status SeedDemoFleet(Engine& engine, const std::vector<DemoFleetCard>& cards) {
  return engine
      .ExecuteSync<int>([&](Txn& txn) -> Result<int> {
        if (F(txn).node_count() != 0) return 0;
        int added = 0;
        for (const auto& demo : cards) {
          GPUHUB_ASSIGN_OR_RETURN(std::string name, F(txn).CardName(demo.gpu));
          const rentals::CardConfig* card = nullptr;
          for (const auto& c : F(txn).config().cards) {
            if (c.name == name) card = &c;
          }
          if (card == nullptr || card->counts.empty() || card->regions.empty()) continue;
          const int per_node = card->counts.back();
          int left = demo.free_now;
          std::size_t i = 0;
          const std::string key = rentals::CardKey(name);
          while (left >= card->counts.front()) {
            const std::string& region = card->regions[i % card->regions.size()];
            std::string host;
            for (char ch : region) {
              if (ch != '-') host += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
            }
            host += "-" + key + "-" + std::to_string(++i);
            rentals::NodeSpec spec{name, region, std::min(per_node, left), host, std::nullopt,
                                   std::nullopt};
            GPUHUB_RETURN_IF_ERROR(AddRentalNode(txn, spec).status());
            left -= spec.cards;
            ++added;
          }
        }
        return added;
      })
      .status();
}

Status LoadRentals(store::Store& store, const rentals::FleetConfig& config,
                   const ledger::Ledger& ledger, RentalsState& state) {
  GPUHUB_ASSIGN_OR_RETURN(rentals::Snapshot snapshot, ReadRentalRows(store));
  GPUHUB_ASSIGN_OR_RETURN(state.fleet, rentals::Fleet::Restore(config, std::move(snapshot)));
  return state.fleet.CheckSettlement(ledger);
}

}  // namespace gpuhub::engine
