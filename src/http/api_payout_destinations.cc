// Providers' payout destinations (engine/payout_destinations.h).
//
//   POST   /v1/payout-destinations {"kind": "btc"|"usdt"|"usdc"|"bank", "address", "label",
//                                   "totp_code"?} -> 201 destination (a fresh two-factor code
//                                   when the account has two-factor)
//   GET    /v1/payout-destinations          -> 200 {"payout_destinations": [destination]}
//   DELETE /v1/payout-destinations/{id}     -> 204
// destination: {"id", "kind", "address", "label", "created_at"}
// Writes are session only (api_key_scopes.h: routes it does not list are closed to keys); a read
// key may list them.
#include "engine/audit_log.h"
#include "engine/payout_destinations.h"

#include "http/api.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;

json DestinationJson(const engine::PayoutDestination& d) {
  return {{"id", d.id},
          {"kind", std::string(engine::PayoutKindName(d.kind))},
          {"address", d.address},
          {"label", d.label},
          {"created_at", FormatTimestamp(d.created_at)}};
}

struct NewDestination {
  engine::PayoutKind kind = engine::PayoutKind::kBtc;
  std::string address;
  std::string label;
  std::optional<std::string> code;
  std::string remote_address;
};

Result<NewDestination> ParseNewDestination(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"kind", "address", "label", "totp_code"}));
  NewDestination out;
  GPUHUB_ASSIGN_OR_RETURN(std::string kind, RequiredString(body, "kind"));
  GPUHUB_ASSIGN_OR_RETURN(out.kind, engine::ParsePayoutKind(kind));
  GPUHUB_ASSIGN_OR_RETURN(std::string address, RequiredString(body, "address"));
  GPUHUB_ASSIGN_OR_RETURN(out.address, engine::ValidatePayoutAddress(out.kind, address));
  GPUHUB_ASSIGN_OR_RETURN(out.label, RequiredString(body, "label"));
  GPUHUB_ASSIGN_OR_RETURN(out.code, TotpCodeField(body));
  out.remote_address = CallerOf(r).remote_address;
  return out;
}

}  // namespace

void RegisterPayoutDestinationRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/payout-destinations",
             Authenticated<Empty>(
                 api, 0, NoInput, [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                   json list = json::array();
                   for (const auto& d : engine::ListPayoutDestinations(txn.state, me.id)) {
                     list.push_back(DestinationJson(d));
                   }
                   return Reply{200, {{"payout_destinations", list}}};
                 }));
  router.Add("POST", "/v1/payout-destinations",
             Authenticated<NewDestination>(
                 api, engine::kRoleProvider, ParseNewDestination,
                 [&api](Txn& txn, const User& me, const NewDestination& in) -> Result<Reply> {
                   GPUHUB_RETURN_IF_ERROR(engine::CheckNewPayoutDestination(txn.state, me, in.kind,
                                                                            in.address, in.label));
                   GPUHUB_ASSIGN_OR_RETURN(engine::TotpUse use,
                                           VerifyFreshCode(api, txn, me, in.remote_address, in.code,
                                                           engine::TotpPurpose::kFreshCode));
                   GPUHUB_ASSIGN_OR_RETURN(
                       engine::PayoutDestination d,
                       engine::AddPayoutDestination(txn, me, in.kind, in.address, in.label));
                   engine::UseTotp(txn, use);
                   // The kind and label; not the address (a bank reference is personal data).
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kPayoutDestinationAdded,
                                       {{"payout_destination_id", d.id},
                                        {"kind", std::string(engine::PayoutKindName(d.kind))},
                                        {"label", d.label}});
                   return Reply{201, DestinationJson(d)};
                 }));
  router.Add("DELETE", "/v1/payout-destinations/{id}",
             Authenticated<std::int64_t>(
                 api, 0, [](const Request& r) { return IdOnly(r, "payout destination"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_RETURN_IF_ERROR(engine::RemovePayoutDestination(txn, me.id, id));
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kPayoutDestinationRemoved,
                                       {{"payout_destination_id", id}});
                   return Reply{204, nullptr};
                 }));
}

}  // namespace gpuhub::http
