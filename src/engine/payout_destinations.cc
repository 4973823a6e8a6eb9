#include "engine/payout_destinations.h"

#include <algorithm>

#include "engine/accounts.h"

namespace gpuhub::engine {
namespace {

void WriteDestination(Txn& txn, const PayoutDestination& d) {
  txn.writes.Upsert("payout_destinations", {{"id", d.id},
                                            {"user_id", d.user_id},
                                            {"kind", std::string(PayoutKindName(d.kind))},
                                            {"address", d.address},
                                            {"label", d.label},
                                            {"created_at_us", d.created_at}});
}

bool Printable(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

}  // namespace

Status CheckNewPayoutDestination(const State& state, const User& user, PayoutKind kind,
                                 const std::string& address, const std::string& label) {
  if (!user.Has(kRoleProvider)) {
    return Status::PermissionDenied(
        "payout destinations are for providers (POST /v1/accounts/me/roles {\"role\": "
        "\"provider\"})");
  }
  if (label.empty() || label.size() > kMaxPayoutLabelBytes || !Printable(label)) {
    return Status::InvalidArgument("label must be 1 to " + std::to_string(kMaxPayoutLabelBytes) +
                                   " printable characters")
        .WithField("label");
  }
  const PayoutDestinationsState& s = *state.payout_destinations;
  auto mine = s.by_user.find(user.id);
  if (mine != s.by_user.end()) {
    for (std::int64_t id : mine->second) {
      const PayoutDestination& d = s.by_id.at(id);
      if (d.kind == kind && d.address == address) {
        return Status::Conflict("this " + std::string(PayoutKindName(kind)) +
                                " address is already payout destination " + std::to_string(id))
            .WithField("address");
      }
    }
    if (mine->second.size() >= kMaxPayoutDestinationsPerUser) {
      return Status::ResourceExhausted("an account holds at most " +
                                       std::to_string(kMaxPayoutDestinationsPerUser) +
                                       " payout destinations: remove one first");
    }
  }
  return Status::Ok();
}

Result<PayoutDestination> AddPayoutDestination(Txn& txn, const User& user, PayoutKind kind,
                                               const std::string& address,
                                               const std::string& label) {
  GPUHUB_RETURN_IF_ERROR(CheckNewPayoutDestination(txn.state, user, kind, address, label));
  PayoutDestinationsState& s = *txn.state.payout_destinations;
  PayoutDestination d;
  d.id = s.next_id++;
  d.user_id = user.id;
  d.kind = kind;
  d.address = address;
  d.label = label;
  d.created_at = txn.now;
  s.by_user[user.id].insert(d.id);
  s.by_id[d.id] = d;
  WriteDestination(txn, d);
  return d;
}

Status RemovePayoutDestination(Txn& txn, std::int64_t user_id, std::int64_t id) {
  PayoutDestinationsState& s = *txn.state.payout_destinations;
  auto it = s.by_id.find(id);
  if (it == s.by_id.end() || it->second.user_id != user_id) {
    return Status::NotFound("no payout destination " + std::to_string(id) + " of yours");
  }
  auto mine = s.by_user.find(user_id);
  if (mine != s.by_user.end()) {
    mine->second.erase(id);
    if (mine->second.empty()) s.by_user.erase(mine);
  }
  s.by_id.erase(it);
  txn.writes.Delete("payout_destinations", {{"id", id}});
  return Status::Ok();
}

std::vector<PayoutDestination> ListPayoutDestinations(const State& state, std::int64_t user_id) {
  std::vector<PayoutDestination> out;
  const PayoutDestinationsState& s = *state.payout_destinations;
  auto mine = s.by_user.find(user_id);
  if (mine == s.by_user.end()) return out;
  for (std::int64_t id : mine->second) out.push_back(s.by_id.at(id));
  return out;
}

const PayoutDestination* FindPayoutDestination(const State& state, std::int64_t user_id,
                                               std::int64_t id) {
  const PayoutDestinationsState& s = *state.payout_destinations;
  auto it = s.by_id.find(id);
  return it == s.by_id.end() || it->second.user_id != user_id ? nullptr : &it->second;
}

Result<PayoutDestination> PayoutDestinationFor(const State& state, std::int64_t user_id,
                                               std::int64_t id) {
  const PayoutDestination* d = FindPayoutDestination(state, user_id, id);
  if (!d) {
    return Status::NotFound("no payout destination " + std::to_string(id) +
                            " of yours (GET /v1/payout-destinations)")
        .WithField("destination_id");
  }
  return *d;
}

void RecordPayoutTarget(Txn& txn, std::int64_t payout_id, const PayoutDestination& destination) {
  PayoutTarget t{payout_id, destination.id, destination.kind, destination.address,
                 destination.label};
  txn.state.payout_destinations->targets[payout_id] = t;
  txn.writes.Upsert("payout_targets", {{"payout_id", t.payout_id},
                                       {"destination_id", t.destination_id},
                                       {"kind", std::string(PayoutKindName(t.kind))},
                                       {"address", t.address},
                                       {"label", t.label}});
}

const PayoutTarget* FindPayoutTarget(const State& state, std::int64_t payout_id) {
  const auto& targets = state.payout_destinations->targets;
  auto it = targets.find(payout_id);
  return it == targets.end() ? nullptr : &it->second;
}

Status LoadPayoutDestinations(store::Store& store, PayoutDestinationsState& state) {
  GPUHUB_RETURN_IF_ERROR(store.Scan("payout_targets",
                                    {"payout_id", "destination_id", "kind", "address", "label"},
                                    "payout_id", [&](const store::Row& row) -> Status {
                                      PayoutTarget t;
                                      GPUHUB_ASSIGN_OR_RETURN(t.payout_id, row.Int(0));
                                      GPUHUB_ASSIGN_OR_RETURN(t.destination_id, row.Int(1));
                                      GPUHUB_ASSIGN_OR_RETURN(std::string kind, row.Text(2));
                                      GPUHUB_ASSIGN_OR_RETURN(t.kind, ParsePayoutKind(kind));
                                      GPUHUB_ASSIGN_OR_RETURN(t.address, row.Text(3));
                                      GPUHUB_ASSIGN_OR_RETURN(t.label, row.Text(4));
                                      state.targets[t.payout_id] = std::move(t);
                                      return Status::Ok();
                                    }));
  return store.Scan("payout_destinations",
                    {"id", "user_id", "kind", "address", "label", "created_at_us"}, "id",
                    [&](const store::Row& row) -> Status {
                      PayoutDestination d;
                      GPUHUB_ASSIGN_OR_RETURN(d.id, row.Int(0));
                      GPUHUB_ASSIGN_OR_RETURN(d.user_id, row.Int(1));
                      GPUHUB_ASSIGN_OR_RETURN(std::string kind, row.Text(2));
                      GPUHUB_ASSIGN_OR_RETURN(d.kind, ParsePayoutKind(kind));
                      GPUHUB_ASSIGN_OR_RETURN(d.address, row.Text(3));
                      GPUHUB_ASSIGN_OR_RETURN(d.label, row.Text(4));
                      GPUHUB_ASSIGN_OR_RETURN(d.created_at, row.Int(5));
                      state.by_user[d.user_id].insert(d.id);
                      state.next_id = std::max(state.next_id, d.id + 1);
                      state.by_id[d.id] = std::move(d);
                      return Status::Ok();
                    });
}

}  // namespace gpuhub::engine
