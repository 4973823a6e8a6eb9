// SSH public keys on the signed-in account (engine/ssh_keys.h): the host agent writes them into
// the authorized_keys of every machine the account rents.
//
//   GET    /v1/ssh-keys                             -> 200 {"ssh_keys": [key]}
//   POST   /v1/ssh-keys {"public_key", "name"?}     -> 201 key (400 naming "public_key" unless it
//          is an ed25519, ecdsa P-256/384/521 or RSA >= 2048 key; 409 when already there)
//   DELETE /v1/ssh-keys/{id}                        -> 204
// key: {"id", "name", "type", "bits", "fingerprint", "public_key", "created_at"}
#include "engine/ssh_keys.h"
#include "http/api.h"

namespace gpuhub::http {
namespace {

json KeyJson(const engine::SshKey& k) {
  return {{"id", k.id},
          {"name", k.name},
          {"type", k.key.type},
          {"bits", k.key.bits},
          {"fingerprint", k.key.fingerprint},
          {"public_key", k.key.Line()},
          {"created_at", FormatTimestamp(k.created_at)}};
}

struct NewKey {
  std::string name;
  engine::ParsedSshKey key;
};

Result<NewKey> ParseNewKey(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"public_key", "name"}));
  GPUHUB_ASSIGN_OR_RETURN(std::string line, RequiredString(body, "public_key"));
  GPUHUB_ASSIGN_OR_RETURN(auto name, OptionalString(body, "name"));
  NewKey out;
  GPUHUB_ASSIGN_OR_RETURN(out.key, engine::ParseSshPublicKey(line));
  out.name = name.value_or("");
  return out;
}

}  // namespace

void RegisterSshKeyRoutes(Router& router, ApiContext& api) {
  using engine::Txn;
  using engine::User;
  router.Add("GET", "/v1/ssh-keys",
             Authenticated<Empty>(api, 0, NoInput,
                                  [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                                    json list = json::array();
                                    for (const auto& k : engine::ListSshKeys(txn.state, me.id)) {
                                      list.push_back(KeyJson(k));
                                    }
                                    return Reply{200, {{"ssh_keys", list}}};
                                  }));
  router.Add("POST", "/v1/ssh-keys",
             Authenticated<NewKey>(api, 0, ParseNewKey,
                                   [](Txn& txn, const User& me, const NewKey& k) -> Result<Reply> {
                                     GPUHUB_ASSIGN_OR_RETURN(
                                         auto key, engine::AddSshKey(txn, me.id, k.name, k.key));
                                     engine::RecordAudit(txn, me.id,
                                                         engine::AuditKind::kSshKeyAdded,
                                                         {{"ssh_key_id", key.id},
                                                          {"name", key.name},
                                                          {"fingerprint", key.key.fingerprint}});
                                     return Reply{201, KeyJson(key)};
                                   }));
  router.Add("DELETE", "/v1/ssh-keys/{id}",
             Authenticated<std::int64_t>(
                 api, 0, [](const Request& r) { return IdOnly(r, "SSH key"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_RETURN_IF_ERROR(engine::DeleteSshKey(txn, me.id, id));
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kSshKeyRemoved,
                                       {{"ssh_key_id", id}});
                   return Reply{204, nullptr};
                 }));
}

}  // namespace gpuhub::http
