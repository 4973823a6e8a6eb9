// Storage: the daily bill, the unpaid path, egress, rentals released under volumes, and time.
//
// Scheduling works like the fleet's: each volume and snapshot has at most one entry in the
// timeline, the next step its bill says is due (NextDue, a pure function of the record), and
// every change reschedules it; a rental with unpaid egress has one entry for its next retry. So
// the timeline is rebuilt from the records on Restore, and a step cannot run twice: running it
// changes the record so that it is no longer due.
#include <algorithm>

#include "rentals/format.h"
#include "rentals/payment.h"
#include "rentals/storage.h"
#include "rentals/storage_item.h"

namespace gpuhub::rentals {
namespace {

// Whole days' cost from day 1 through `day`: R(P S day / 30).
std::int64_t CumulativeMicros(std::int64_t price, std::int64_t size_tb, std::int64_t day) {
  return MulDivHalfEven(price * size_tb, day, kDaysPerStorageMonth).value();
}

// The day (1, 2, ...) whose span contains `t`.
std::int64_t DayAt(const StorageBill& bill, TimestampMicros t) {
  return t < bill.anchor ? 1 : (t - bill.anchor) / kMicrosPerDay + 1;
}

}  // namespace

// ----- Prices --------------------------------------------------------------------------------

std::int64_t Storage::DayMicros(std::int64_t price, std::int64_t size_tb, std::int64_t day) {
  return CumulativeMicros(price, size_tb, day) - CumulativeMicros(price, size_tb, day - 1);
}

std::int64_t Storage::DueMicros(const StorageBill& bill, std::int64_t size_tb,
                                TimestampMicros now) const {
  if (bill.state == StorageState::kActive || bill.state == StorageState::kDeleted) return 0;
  const std::int64_t through = std::max(DayAt(bill, now), bill.days_paid + 1);
  return CumulativeMicros(bill.price_micros_per_tb_month, size_tb, through) -
         CumulativeMicros(bill.price_micros_per_tb_month, size_tb, bill.days_paid);
}

std::int64_t Storage::EgressAllowanceBytes(Term term) const {
  // 20 TB x days / 30, rounded up to the byte (in the customer's favour).
  const std::int64_t days = TermMicros(term) / kMicrosPerDay;
  const std::int64_t numerator = config_.egress_included_bytes_per_month * days;
  return (numerator + kDaysPerStorageMonth - 1) / kDaysPerStorageMonth;
}

// ----- Scheduling ----------------------------------------------------------------------------

std::optional<Storage::Schedule> Storage::NextDue(const StorageBill& b) const {
  switch (b.state) {
    case StorageState::kActive:
      return Schedule{b.PaidThrough(), Due::kBill};
    case StorageState::kReadOnly:
      // A retry due together with the detach runs first: paying then still keeps it attached.
      return b.retry_at <= b.detach_at ? Schedule{b.retry_at, Due::kRetry}
                                       : Schedule{b.detach_at, Due::kDetach};
    case StorageState::kDetached:
      return b.retry_at <= b.delete_at ? Schedule{b.retry_at, Due::kRetry}
                                       : Schedule{b.delete_at, Due::kDelete};
    case StorageState::kDeleted:
      return std::nullopt;
  }
  return std::nullopt;
}

StorageNext Storage::Next(const StorageBill& bill) const {
  auto next = NextDue(bill);
  if (!next) return {};
  switch (next->due) {
    case Due::kBill:
      return {next->at, "bill"};
    case Due::kRetry:
      return {next->at, "retry"};
    case Due::kDetach:
      return {next->at, "detach"};
    case Due::kDelete:
      return {next->at, "delete"};
    case Due::kFail:
      return {next->at, "fail"};
  }
  return {};
}

void Storage::Reschedule(Item item) {
  auto& scheduled = item.scheduled();
  if (scheduled) {
    timeline_.erase({*scheduled, item.kind(), item.id()});
    scheduled.reset();
  }
  if (auto next = NextDueOf(item)) {
    timeline_.insert({next->at, item.kind(), item.id()});
    scheduled = next->at;
  }
}

void Storage::RescheduleEgress(RentalId rental) {
  if (auto it = egress_retry_.find(rental); it != egress_retry_.end()) {
    timeline_.erase({it->second, ItemKind::kEgress, rental});
    egress_retry_.erase(it);
  }
  TimestampMicros next = kNever;
  for (auto it = meters_.lower_bound({rental, 0}); it != meters_.end() && it->first.first == rental;
       ++it) {
    if (it->second.owed_gb > 0) next = std::min(next, it->second.retry_at);
  }
  if (next != kNever) {
    egress_retry_[rental] = next;
    timeline_.insert({next, ItemKind::kEgress, rental});
  }
}

TimestampMicros Storage::NextEventAt() const {
  return timeline_.empty() ? kNever : std::get<0>(*timeline_.begin());
}

void Storage::AdvanceTo(ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                        StorageChanges* changes) {
  while (!timeline_.empty() && std::get<0>(*timeline_.begin()) <= now) {
    auto [due_at, kind, id] = *timeline_.begin();
    // A step that came due while time stood still happens now, never before the latest time
    // already seen: history never runs backwards.
    const TimestampMicros at = std::max(due_at, now_);
    now_ = at;
    if (kind == ItemKind::kEgress) {
      timeline_.erase(timeline_.begin());
      egress_retry_.erase(id);
      for (auto it = meters_.lower_bound({id, 0}); it != meters_.end() && it->first.first == id;
           ++it) {
        EgressMeter& m = it->second;
        if (m.owed_gb > 0 && m.retry_at <= at) ChargeEgress(m, ledger, tax, at, changes);
      }
      RescheduleEgress(id);
      continue;
    }
    Item item = kind == ItemKind::kVolume ? Item::Of(volumes_.at(id)) : Item::Of(snapshots_.at(id));
    auto due = NextDueOf(item);
    GPUHUB_CHECK(due.has_value() && due->at == due_at);
    RunDue(item, due->due, ledger, tax, at, changes);
    Reschedule(item);
  }
  now_ = std::max(now_, now);
}

void Storage::RunDue(Item item, Due due, ledger::Ledger& ledger, const TaxFunction& tax,
                     TimestampMicros at, StorageChanges* changes) {
  StorageBill& b = item.bill();
  switch (due) {
    case Due::kFail:
      return FailProvisioning(*item.volume,
                              "not ready within " +
                                  std::to_string(config_.ceph_ready_timeout_micros /
                                                 kMicrosPerSecond) +
                                  " s of its creation (the Ceph cluster did not answer)",
                              at, changes);
    case Due::kBill: {
      // The next day, in advance, at its start.
      auto charge = PayDays(item, b.PaidThrough(), ledger, tax, at, changes);
      if (!charge.ok()) return MarkUnpaid(item, charge.status(), at, changes);
      b.days_paid = charge->last_day;
      StoreCharge(std::move(charge).value(), &item.charges(), changes);
      Touch(item, at, changes);
      return;
    }
    case Due::kRetry: {
      auto charge = PayDays(item, at, ledger, tax, at, changes);
      if (charge.ok()) return Restored(item, std::move(charge).value(), at, changes);
      b.retry_at = at + kUnpaidRetryMicros;
      Touch(item, at, changes);
      return;
    }
    case Due::kDetach: {
      b.state = StorageState::kDetached;
      std::string when = FormatTimestamp(b.delete_at);
      if (item.is_volume()) {
        DetachAll(*item.volume, "unpaid for 72 h", at, changes);
        Record(item, StorageEventKind::kSuspended, at,
               "unpaid for 72 h: detached from every instance; deleted at " + when +
                   " unless paid before",
               changes);
      } else {
        Record(item, StorageEventKind::kSuspended, at,
               "unpaid for 72 h: suspended; deleted at " + when + " unless paid before", changes);
      }
      Notify(item, "storage.detached",
             "Your " + item.title() + " is still unpaid" +
                 (item.is_volume() ? " and was detached from every instance" : "") +
                 ". It will be deleted at " + when + " unless you pay " +
                 AmountText(DueMicros(b, item.size_tb(), at), b.currency) + " before then.",
             {{"delete_at", when}}, at, changes);
      return;
    }
    case Due::kDelete:
      Delete(item, DeleteReason::kUnpaid, at, changes);
      return;
  }
}

// ----- Money ---------------------------------------------------------------------------------

Result<StorageCharge> Storage::PayDays(Item item, TimestampMicros through, ledger::Ledger& ledger,
                                       const TaxFunction& tax, TimestampMicros now,
                                       StorageChanges* changes) {
  const StorageBill& b = item.bill();
  StorageCharge c;
  c.customer_id = item.customer();
  c.kind = item.is_volume() ? StorageChargeKind::kVolumeDays : StorageChargeKind::kSnapshotDays;
  c.subject_id = item.id();
  c.size_tb = item.size_tb();
  c.first_day = b.days_paid + 1;
  c.last_day = std::max(DayAt(b, through), c.first_day);
  const std::int64_t net =
      CumulativeMicros(b.price_micros_per_tb_month, c.size_tb, c.last_day) -
      CumulativeMicros(b.price_micros_per_tb_month, c.size_tb, c.first_day - 1);
  GPUHUB_ASSIGN_OR_RETURN(c.amount, tax(c.customer_id, net, now));
  if (c.amount.net_micros != net) return Status::Internal("the tax function changed the net");
  c.paid_currency = b.currency;
  c.period_start = b.anchor + (c.first_day - 1) * kMicrosPerDay;
  c.period_end = b.anchor + c.last_day * kMicrosPerDay;
  c.at = now;
  const std::string days = c.first_day == c.last_day
                               ? "day " + std::to_string(c.first_day)
                               : "days " + std::to_string(c.first_day) + "-" +
                                     std::to_string(c.last_day);
  PaymentPart part{c.amount, StorageChargeTransferBase(c),
                   item.is_volume() ? "storage_volume" : "storage_snapshot", "storage",
                   item.title() + " " + days + " until " + FormatTimestamp(c.period_end)};
  GPUHUB_ASSIGN_OR_RETURN(
      auto paid, PayParts(ledger, c.customer_id, b.currency, {&part, 1}, now,
                          days + " of " + std::string(item.noun()) + " " +
                              std::to_string(item.id()),
                          &changes->transfers));
  c.paid_micros = paid[0].paid_micros;
  c.transfer_ids = std::move(paid[0].transfer_ids);
  return c;
}

void Storage::StoreCharge(StorageCharge charge, std::vector<StorageChargeId>* of,
                          StorageChanges* changes) {
  charge.id = next_charge_id_++;
  of->push_back(charge.id);
  changes->charges.push_back(charge);
  charges_.emplace(charge.id, std::move(charge));
}

// ----- Records of what happened --------------------------------------------------------------

void Storage::Record(Item item, StorageEventKind kind, TimestampMicros at, std::string detail,
                     StorageChanges* changes) {
  StorageEvent e{!item.is_volume(), item.id(), ++item.events(), at, kind, std::move(detail)};
  changes->events.push_back(e);
  auto& history = item.history();
  history.push_back(std::move(e));
  if (history.size() > kMaxEventsKeptPerStorageItem) history.erase(history.begin());
  Touch(item, at, changes);
}

void Storage::Notify(Item item, std::string kind, std::string message,
                     std::vector<std::pair<std::string, std::string>> data, TimestampMicros at,
                     StorageChanges* changes) {
  data.insert(data.begin(), {std::string(item.noun()) + "_id", std::to_string(item.id())});
  data.push_back({"state", std::string(StorageStateName(item.bill().state))});
  changes->notices.push_back(
      {item.customer(), std::move(kind), item.subject(), std::move(message), std::move(data), at});
}

void Storage::Touch(Item item, TimestampMicros at, StorageChanges* changes) {
  item.updated_at() = std::max(item.updated_at(), at);
  if (item.is_volume()) {
    changes->volumes.push_back(item.id());
  } else {
    changes->snapshots.push_back(item.id());
  }
}

// ----- The unpaid path -----------------------------------------------------------------------

void Storage::MarkUnpaid(Item item, const Status& why, TimestampMicros at,
                         StorageChanges* changes) {
  StorageBill& b = item.bill();
  b.state = StorageState::kReadOnly;
  b.unpaid_since = b.PaidThrough();
  // Counted from the moment the customer is told, never from before it.
  b.detach_at = at + kReadOnlyBeforeDetachMicros;
  b.delete_at = b.detach_at + kDetachedBeforeDeleteMicros;
  b.retry_at = at + kUnpaidRetryMicros;
  const std::string detach = FormatTimestamp(b.detach_at);
  const std::string gone = FormatTimestamp(b.delete_at);
  Record(item, StorageEventKind::kReadOnly, at,
         why.message() + ": read-only; " + (item.is_volume() ? "detached" : "suspended") +
             " at " + detach + ", deleted at " + gone + " unless paid before",
         changes);
  Notify(item, "storage.read_only",
         "Your " + item.title() + " could not be paid for the day from " +
             FormatTimestamp(b.unpaid_since) + " (" + why.message() + "). It is read-only now" +
             (item.is_volume() ? " (attached instances can still read it)" : "") + ". At " +
             detach + " it is " +
             (item.is_volume() ? "detached from every instance" : "suspended") +
             ", and at " + gone +
             " it is deleted for good. Top up the " + std::string(CurrencyCode(b.currency)) +
             " wallet (it is retried every hour) or pay it to restore it at once.",
         {{"unpaid_since", FormatTimestamp(b.unpaid_since)},
          {"detach_at", detach},
          {"delete_at", gone},
          {"currency", std::string(CurrencyCode(b.currency))}},
         at, changes);
}

void Storage::Restored(Item item, StorageCharge charge, TimestampMicros at,
                       StorageChanges* changes) {
  StorageBill& b = item.bill();
  const StorageState was = b.state;
  b.days_paid = charge.last_day;
  b.state = StorageState::kActive;
  b.unpaid_since = b.detach_at = b.delete_at = b.retry_at = 0;
  const std::string paid = AmountText(charge.paid_micros, charge.paid_currency);
  const std::string until = FormatTimestamp(b.PaidThrough());
  StoreCharge(std::move(charge), &item.charges(), changes);
  Record(item, StorageEventKind::kRestored, at,
         "paid " + paid + " through " + until + ": active again" +
             (was == StorageState::kDetached && item.is_volume() ? " (attach it again)" : ""),
         changes);
  Notify(item, "storage.restored",
         "Your " + item.title() + " is paid through " + until + " (" + paid +
             ") and active again" +
             (was == StorageState::kDetached && item.is_volume()
                  ? "; it was detached, attach it to your instances again"
                  : "") +
             ".",
         {{"paid_through", until}}, at, changes);
}

void Storage::DetachAll(VolumeSlot& slot, const std::string& why, TimestampMicros at,
                        StorageChanges* changes) {
  Volume& v = slot.volume;
  for (RentalId r : v.attachments) {
    auto it = volumes_by_rental_.find(r);
    if (it != volumes_by_rental_.end()) {
      it->second.erase(v.id);
      if (it->second.empty()) volumes_by_rental_.erase(it);
    }
    Record(Item::Of(slot), StorageEventKind::kDetached, at,
           "detached from rental " + std::to_string(r) + ": " + why, changes);
  }
  v.attachments.clear();
  Touch(Item::Of(slot), at, changes);
}

void Storage::Delete(Item item, DeleteReason reason, TimestampMicros at, StorageChanges* changes) {
  StorageBill& b = item.bill();
  GPUHUB_CHECK(b.state != StorageState::kDeleted);
  GPUHUB_CHECK_MSG(reason != DeleteReason::kUnpaid || at >= b.delete_at,
                   "unpaid storage deleted before its notified time");
  if (item.is_volume()) {
    GPUHUB_CHECK_MSG(item.volume->volume.attachments.empty(), "deleting an attached volume");
  }
  Free(item.hosts(), item.size_tb());
  item.hosts().clear();
  b.state = StorageState::kDeleted;
  b.deleted_at = at;
  b.delete_reason = reason;
  b.retry_at = 0;
  auto& live = item.is_volume() ? live_volumes_by_customer_ : live_snapshots_by_customer_;
  if (--live[item.customer()] == 0) live.erase(item.customer());
  Record(item, StorageEventKind::kDeleted, at,
         reason == DeleteReason::kUnpaid   ? "unpaid: deleted, its data destroyed"
         : reason == DeleteReason::kFailed ? "failed on Ceph: nothing was charged"
                                           : "deleted on request; its data destroyed",
         changes);
  if (reason == DeleteReason::kUnpaid) {
    Notify(item, "storage.deleted",
           "Your " + item.title() + " was deleted: it was unpaid since " +
               FormatTimestamp(b.unpaid_since) + ". Its data cannot be recovered.",
           {{"reason", "unpaid"}}, at, changes);
  }
}

// ----- Rentals -------------------------------------------------------------------------------

void Storage::SyncRentals(const Fleet& fleet, const std::vector<RentalId>& rentals,
                          TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  for (RentalId id : rentals) {
    auto it = volumes_by_rental_.find(id);
    if (it == volumes_by_rental_.end()) continue;
    const Rental* r = fleet.FindRental(id);
    if (r != nullptr && r->state != RentalState::kReleased) continue;
    const std::set<VolumeId> attached = it->second;
    volumes_by_rental_.erase(it);
    for (VolumeId v : attached) {
      VolumeSlot& slot = volumes_.at(v);
      auto& list = slot.volume.attachments;
      list.erase(std::remove(list.begin(), list.end(), id), list.end());
      Record(Item::Of(slot), StorageEventKind::kDetached, now,
             "detached from rental " + std::to_string(id) +
                 ": the rental was released (the volume and its data are kept)",
             changes);
    }
  }
}

// ----- Egress --------------------------------------------------------------------------------

Result<EgressResult> Storage::RecordEgress(const EgressSample& sample, const Fleet& fleet,
                                           ledger::Ledger& ledger, const TaxFunction& tax,
                                           TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  const Rental* r = fleet.FindRental(sample.rental_id);
  if (r == nullptr) {
    return Status::NotFound("no rental " + std::to_string(sample.rental_id))
        .WithField("rental_id");
  }
  if (sample.bytes < 0 || sample.bytes > kMaxEgressSampleBytes) {
    return Status::InvalidArgument("bytes must be 0.." + std::to_string(kMaxEgressSampleBytes) +
                                   " (the bytes sent since the previous sample)")
        .WithField("bytes");
  }
  if (sample.at <= 0 || sample.at > now + kMaxEgressSampleAheadMicros) {
    return Status::InvalidArgument("at must be a time no later than the server's clock")
        .WithField("at");
  }
  if (r->term_start == 0) {
    return Status::FailedPrecondition("rental " + std::to_string(r->id) +
                                      " never ran: it has no egress to meter")
        .WithField("rental_id");
  }
  // A resend: at or before the last sample of this rental, in any of its terms.
  TimestampMicros last = 0;
  for (const auto& m : MetersOf(r->id)) last = std::max(last, m.last_sample_at);
  EgressResult out;
  if (sample.at <= last) return out;
  auto key = std::make_pair(r->id, r->period);
  EgressMeter& m = meters_[key];
  if (m.rental_id == 0) {
    m.rental_id = r->id;
    m.period = r->period;
    m.customer_id = r->customer_id;
    m.currency = r->currency;
    m.allowance_bytes = EgressAllowanceBytes(r->term);
  }
  m.used_bytes += sample.bytes;
  ++m.samples;
  m.last_sample_at = sample.at;
  m.updated_at = now;
  const std::int64_t excess = std::max<std::int64_t>(0, m.used_bytes - m.allowance_bytes);
  const std::int64_t over_gb = (excess + kBytesPerGb - 1) / kBytesPerGb;
  const bool was_owed = m.owed_gb > 0;
  m.owed_gb = over_gb - m.billed_gb;
  out.recorded = true;
  if (m.owed_gb > 0) {
    m.retry_at = now;
    out.charged_gb = ChargeEgress(m, ledger, tax, now, changes);
    if (m.owed_gb > 0 && !was_owed) {
      changes->notices.push_back(
          {m.customer_id, "rental.egress_unpaid", "rental:" + std::to_string(r->id),
           "The egress of " + RentalName(*r) + " beyond its included " +
               FormatMicros(m.allowance_bytes / kBytesPerGb * 1'000'000 / kGbPerTb, 3) +
               " TB could not be charged: the " + std::string(CurrencyCode(m.currency)) +
               " wallet is short. " + std::to_string(m.owed_gb) +
               " GB are owed; they are charged as soon as the wallet holds them (retried hourly).",
           {{"rental_id", std::to_string(r->id)}, {"owed_gb", std::to_string(m.owed_gb)}},
           now});
    }
  }
  out.owed_gb = m.owed_gb;
  changes->meters.push_back(key);
  RescheduleEgress(r->id);
  return out;
}

std::int64_t Storage::ChargeEgress(EgressMeter& m, ledger::Ledger& ledger, const TaxFunction& tax,
                                   TimestampMicros at, StorageChanges* changes) {
  changes->meters.push_back({m.rental_id, m.period});
  StorageCharge c;
  c.customer_id = m.customer_id;
  c.kind = StorageChargeKind::kEgress;
  c.subject_id = m.rental_id;
  c.period = m.period;
  c.egress_gb = m.owed_gb;
  c.egress_gb_from = m.billed_gb;
  const std::int64_t net = m.owed_gb * (config_.egress_micros_per_tb / kGbPerTb);
  auto amount = tax(c.customer_id, net, at);
  Result<std::vector<PaidPart>> paid = Status::Internal("the tax function changed the net");
  if (!amount.ok()) {
    paid = amount.status();
  } else if (amount->net_micros == net) {
    c.amount = *amount;
    c.paid_currency = m.currency;
    c.at = c.period_start = c.period_end = at;
    PaymentPart part{c.amount, StorageChargeTransferBase(c), "egress", "egress",
                     "rental " + std::to_string(m.rental_id) + " term " +
                         std::to_string(m.period) + ": " + std::to_string(m.owed_gb) +
                         " GB of egress beyond the allowance"};
    paid = PayParts(ledger, c.customer_id, m.currency, {&part, 1}, at, "this egress",
                    &changes->transfers);
  }
  if (!paid.ok()) {
    m.retry_at = at + kUnpaidRetryMicros;
    return 0;
  }
  c.paid_micros = (*paid)[0].paid_micros;
  c.transfer_ids = std::move((*paid)[0].transfer_ids);
  const std::int64_t gb = m.owed_gb;
  m.billed_gb += gb;
  m.owed_gb = 0;
  m.retry_at = 0;
  m.updated_at = at;
  StoreCharge(std::move(c), &egress_charges_[m.rental_id], changes);
  return gb;
}

}  // namespace gpuhub::rentals
