#include "engine/ledger_archive.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "store/read_pool.h"

namespace gpuhub::engine {

using store::Condition;

const std::vector<std::string>& TransferColumns() {
  static const std::vector<std::string> kColumns = {
      "sequence",      "id",          "kind",         "debit_kind", "debit_owner",
      "debit_currency", "credit_kind", "credit_owner", "credit_currency", "amount_micros",
      "pending_id",    "code",        "memo",         "timestamp_us", "state"};
  return kColumns;
}

Result<ledger::Transfer> TransferFromRow(const store::Row& row) {
  ledger::Transfer t;
  GPUHUB_ASSIGN_OR_RETURN(t.sequence, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(t.id, row.Text(1));
  GPUHUB_ASSIGN_OR_RETURN(t.kind, row.Parsed(2, ledger::ParseTransferKind));
  GPUHUB_ASSIGN_OR_RETURN(t.debit.kind, row.Parsed(3, ledger::ParseAccountKind));
  GPUHUB_ASSIGN_OR_RETURN(t.debit.owner_id, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(t.debit.currency, row.Parsed(5, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(t.credit.kind, row.Parsed(6, ledger::ParseAccountKind));
  GPUHUB_ASSIGN_OR_RETURN(t.credit.owner_id, row.Int(7));
  GPUHUB_ASSIGN_OR_RETURN(t.credit.currency, row.Parsed(8, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(t.amount_micros, row.Int(9));
  GPUHUB_ASSIGN_OR_RETURN(t.pending_id, row.Text(10));
  GPUHUB_ASSIGN_OR_RETURN(t.code, row.Text(11));
  GPUHUB_ASSIGN_OR_RETURN(t.memo, row.Text(12));
  GPUHUB_ASSIGN_OR_RETURN(t.timestamp, row.Int(13));
  GPUHUB_ASSIGN_OR_RETURN(t.state, row.Parsed(14, ledger::ParseTransferState));
  return t;
}

const std::vector<std::string>& AccountColumns() {
  static const std::vector<std::string> kColumns = {
      "kind",           "owner_id",       "currency",       "debits_posted",
      "credits_posted", "debits_pending", "credits_pending"};
  return kColumns;
}

Result<ledger::AccountBalance> AccountFromRow(const store::Row& row) {
  ledger::AccountBalance b;
  GPUHUB_ASSIGN_OR_RETURN(b.key.kind, row.Parsed(0, ledger::ParseAccountKind));
  GPUHUB_ASSIGN_OR_RETURN(b.key.owner_id, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(b.key.currency, row.Parsed(2, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(b.debits_posted, row.Int(3));
  GPUHUB_ASSIGN_OR_RETURN(b.credits_posted, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(b.debits_pending, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(b.credits_pending, row.Int(6));
  return b;
}

void WriteAccountRow(store::WriteBatch& writes, const ledger::AccountBalance& a) {
  writes.Upsert("ledger_accounts",
                {{"kind", std::string(ledger::AccountKindName(a.key.kind))},
                 {"owner_id", a.key.owner_id},
                 {"currency", std::string(CurrencyCode(a.key.currency))},
                 {"debits_posted", a.debits_posted},
                 {"credits_posted", a.credits_posted},
                 {"debits_pending", a.debits_pending},
                 {"credits_pending", a.credits_pending}},
                3);
}

void WriteTransferRow(store::WriteBatch& writes, const ledger::Transfer& t, bool upsert) {
  store::WriteBatch::Columns columns = {
      {"sequence", t.sequence},
      {"id", t.id},
      {"kind", std::string(ledger::TransferKindName(t.kind))},
      {"debit_kind", std::string(ledger::AccountKindName(t.debit.kind))},
      {"debit_owner", t.debit.owner_id},
      {"debit_currency", std::string(CurrencyCode(t.debit.currency))},
      {"credit_kind", std::string(ledger::AccountKindName(t.credit.kind))},
      {"credit_owner", t.credit.owner_id},
      {"credit_currency", std::string(CurrencyCode(t.credit.currency))},
      {"amount_micros", t.amount_micros},
      {"pending_id", t.pending_id},
      {"code", t.code},
      {"memo", t.memo},
      {"timestamp_us", t.timestamp},
      {"state", std::string(ledger::TransferStateName(t.state))}};
  if (upsert) {
    writes.Upsert("ledger_transfers", std::move(columns));
  } else {
    writes.Insert("ledger_transfers", std::move(columns));
  }
}

void WriteTransferState(store::WriteBatch& writes, const ledger::Transfer& t) {
  writes.Update("ledger_transfers", {{"sequence", t.sequence},
                                     {"state", std::string(ledger::TransferStateName(t.state))}});
}

store::Select OpenPendingTransfersSelect() {
  // Served by the partial index ledger_transfers_open (migration 16).
  return {"ledger_transfers", TransferColumns(),
          {{"state", Condition::Op::kEq, std::string("pending")}}, {}, "sequence", 0};
}

store::Select TransfersAfterSelect(std::int64_t after_sequence) {
  return {"ledger_transfers", TransferColumns(),
          {{"sequence", Condition::Op::kGt, after_sequence}}, {}, "sequence", 0};
}

store::Select TransferByIdSelect(std::string_view id) {
  return {"ledger_transfers", TransferColumns(), {{"id", Condition::Op::kEq, std::string(id)}},
          {}, "", 1};
}

store::Select OwnerSideSelect(std::string_view side, std::int64_t owner_id,
                              std::int64_t before_sequence, std::size_t limit) {
  const std::string owner = std::string(side) + "_owner";
  return {"ledger_transfers",
          TransferColumns(),
          {{owner, Condition::Op::kEq, owner_id},
           {"sequence", Condition::Op::kLt, before_sequence}},
          {},
          owner + " DESC, sequence DESC",
          limit};
}

store::Select AccountSideSelect(std::string_view side, const ledger::AccountKey& key,
                                std::int64_t before_sequence, std::size_t limit) {
  store::Select select = OwnerSideSelect(side, key.owner_id, before_sequence, limit);
  const std::string p(side);
  select.where.push_back(
      {p + "_kind", Condition::Op::kEq, std::string(ledger::AccountKindName(key.kind))});
  select.where.push_back(
      {p + "_currency", Condition::Op::kEq, std::string(CurrencyCode(key.currency))});
  return select;
}

namespace {

// Newest first, one per sequence, at most `limit`.
std::vector<ledger::Transfer> NewestUnique(std::vector<ledger::Transfer> out, std::size_t limit) {
  std::sort(out.begin(), out.end(), [](const ledger::Transfer& a, const ledger::Transfer& b) {
    return a.sequence > b.sequence;
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const ledger::Transfer& a, const ledger::Transfer& b) {
                          return a.sequence == b.sequence;
                        }),
            out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

// Both sides of a page (debit, credit), each newest first and at most `limit`, read by `query` (the
// writer's store or a reader pool), merged newest first without duplicates, at most `limit`.
Result<std::vector<ledger::Transfer>> BothSides(
    const std::function<Status(const store::Select&, const std::function<Status(const store::Row&)>&)>&
        query,
    const store::Select& debit_side, const store::Select& credit_side, std::size_t limit) {
  std::vector<ledger::Transfer> rows;
  for (const store::Select* select : {&debit_side, &credit_side}) {
    GPUHUB_RETURN_IF_ERROR(query(*select, [&](const store::Row& row) -> Status {
      GPUHUB_ASSIGN_OR_RETURN(ledger::Transfer t, TransferFromRow(row));
      rows.push_back(std::move(t));
      return Status::Ok();
    }));
  }
  return NewestUnique(std::move(rows), limit);
}

}  // namespace

Result<ledger::TransferPage> ReadOwnerTransfers(store::ReadPool& pool, std::int64_t owner_id,
                                                std::int64_t before_sequence, std::size_t limit) {
  if (owner_id <= 0 || before_sequence < 0 || limit == 0 || limit > ledger::kMaxTransfersPageSize) {
    return Status::InvalidArgument("bad transfer page request");
  }
  const std::int64_t below =
      before_sequence == 0 ? std::numeric_limits<std::int64_t>::max() : before_sequence;
  // One more than the page, to know whether another follows.
  ledger::TransferPage page;
  GPUHUB_ASSIGN_OR_RETURN(
      page.transfers,
      BothSides([&](const store::Select& s, const auto& fn) { return pool.Query(s, fn); },
                OwnerSideSelect("debit", owner_id, below, limit + 1),
                OwnerSideSelect("credit", owner_id, below, limit + 1), limit + 1));
  if (page.transfers.size() > limit) {
    page.transfers.resize(limit);
    page.next_before_sequence = page.transfers.back().sequence;
  }
  return page;
}

Result<std::optional<ledger::Transfer>> StoreTransferArchive::Find(std::string_view id) const {
  auto lock = LockStore();
  std::optional<ledger::Transfer> found;
  GPUHUB_RETURN_IF_ERROR(store_.Query(TransferByIdSelect(id), [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(found, TransferFromRow(row));
    return Status::Ok();
  }));
  return found;
}

Status StoreTransferArchive::ScanBefore(
    std::int64_t before_sequence, const std::function<Status(const ledger::Transfer&)>& fn) const {
  auto lock = LockStore();
  store::Select select{"ledger_transfers",
                       TransferColumns(),
                       {{"sequence", Condition::Op::kLt, before_sequence}},
                       {},
                       "sequence",
                       0};
  return store_.Query(select, [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(ledger::Transfer t, TransferFromRow(row));
    return fn(t);
  });
}

Result<std::vector<ledger::Transfer>> StoreTransferArchive::AccountPage(
    const ledger::AccountKey& key, std::int64_t before_sequence, std::size_t limit) const {
  auto lock = LockStore();
  return BothSides([&](const store::Select& s, const auto& fn) { return store_.Query(s, fn); },
                   AccountSideSelect("debit", key, before_sequence, limit),
                   AccountSideSelect("credit", key, before_sequence, limit), limit);
}

Result<std::vector<ledger::Transfer>> StoreTransferArchive::OwnerPage(std::int64_t owner_id,
                                                                      std::int64_t before_sequence,
                                                                      std::size_t limit) const {
  auto lock = LockStore();
  return BothSides([&](const store::Select& s, const auto& fn) { return store_.Query(s, fn); },
                   OwnerSideSelect("debit", owner_id, before_sequence, limit),
                   OwnerSideSelect("credit", owner_id, before_sequence, limit), limit);
}

}  // namespace gpuhub::engine
