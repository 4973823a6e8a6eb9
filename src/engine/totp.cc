#include "engine/totp.h"

#include <sodium.h>

#include <algorithm>

#include "core/strings.h"
#include "core/totp.h"
#include "engine/accounts.h"

namespace gpuhub::engine {
namespace {

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

void WriteTotp(Txn& txn, const AccountTotp& t) {
  txn.writes.Upsert("account_totp", {{"user_id", t.user_id},
                                     {"secret", Base32Encode(t.secret)},
                                     {"enabled", std::int64_t{t.enabled ? 1 : 0}},
                                     {"last_step", t.last_step},
                                     {"recovery_hashes", Join(t.recovery_hashes)},
                                     {"created_at_us", t.created_at},
                                     {"enabled_at_us", t.enabled_at}});
}

bool LooksLikeTotpCode(std::string_view code) {
  return code.size() == 6 &&
         std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::int64_t UnixSeconds(TimestampMicros t) {
  return t >= 0 ? t / kMicrosPerSecond : (t - kMicrosPerSecond + 1) / kMicrosPerSecond;
}

Status WrongCode(TotpPurpose purpose) {
  std::string what = purpose == TotpPurpose::kFreshCode
                         ? "the current 6-digit code of your authenticator app"
                         : "the current 6-digit code of your authenticator app or an unused "
                           "recovery code";
  return Status::InvalidArgument("totp_code is wrong or was already used: send " + what)
      .WithField(std::string(kTotpCodeField));
}

Result<AccountTotp*> Enabled(Txn& txn, std::int64_t user_id) {
  auto it = txn.state.totp->by_user.find(user_id);
  if (it == txn.state.totp->by_user.end() || !it->second.enabled) {
    return Status::FailedPrecondition("two-factor sign-in is not enabled on this account");
  }
  return &it->second;
}

}  // namespace

std::string RandomBytes(std::size_t n) {
  std::string out(n, '\0');
  randombytes_buf(out.data(), out.size());
  return out;
}

std::vector<std::string> RecoveryCodesFrom(std::string_view random_bytes) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i + 7 <= random_bytes.size() && out.size() < kTotpRecoveryCodes; i += 7) {
    // 7 bytes are 56 bits: the first 10 base32 symbols carry 50 of them.
    std::string symbols = ToLower(Base32Encode(random_bytes.substr(i, 7)).substr(0, 10));
    out.push_back(symbols.substr(0, 5) + "-" + symbols.substr(5));
  }
  return out;
}

std::string NormalizeRecoveryCode(std::string_view code) {
  std::string out;
  for (char c : code) {
    if (c == '-' || c == ' ') continue;
    out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return out;
}

bool TotpEnabled(const State& state, std::int64_t user_id) {
  const AccountTotp* t = FindTotp(state, user_id);
  return t && t->enabled;
}

const AccountTotp* FindTotp(const State& state, std::int64_t user_id) {
  auto it = state.totp->by_user.find(user_id);
  return it == state.totp->by_user.end() ? nullptr : &it->second;
}

Result<TotpEnrolment> StartTotp(Txn& txn, const User& user, const std::string& secret) {
  if (secret.size() != kTotpSecretBytes) return Status::Internal("TOTP secret of the wrong size");
  auto& by_user = txn.state.totp->by_user;
  auto it = by_user.find(user.id);
  if (it != by_user.end() && it->second.enabled) {
    return Status::Conflict(
        "two-factor sign-in is already enabled; disable it first to enrol a new authenticator");
  }
  AccountTotp t;
  t.user_id = user.id;
  t.secret = secret;
  t.created_at = txn.now;
  by_user[user.id] = t;
  WriteTotp(txn, t);
  std::string base32 = Base32Encode(secret);
  return TotpEnrolment{base32, OtpauthUri(kTotpIssuer, user.username, base32)};
}

Status ConfirmTotp(Txn& txn, std::int64_t user_id, std::string_view code,
                   const std::vector<std::string>& recovery_codes) {
  auto it = txn.state.totp->by_user.find(user_id);
  if (it == txn.state.totp->by_user.end()) {
    return Status::FailedPrecondition(
        "no two-factor enrolment to confirm: start one (POST /v1/accounts/me/totp)");
  }
  AccountTotp& t = it->second;
  if (t.enabled) return Status::FailedPrecondition("two-factor sign-in is already enabled");
  auto step = MatchTotp(t.secret, code, UnixSeconds(txn.now), t.last_step);
  if (!step) return WrongCode(TotpPurpose::kFreshCode);
  t.enabled = true;
  t.enabled_at = txn.now;
  t.last_step = *step;
  t.recovery_hashes.clear();
  for (const auto& c : recovery_codes)
    t.recovery_hashes.push_back(Sha256Hex(NormalizeRecoveryCode(c)));
  WriteTotp(txn, t);
  return Status::Ok();
}

Result<TotpUse> VerifyTotp(const State& state, TimestampMicros now, std::int64_t user_id,
                           const std::optional<std::string>& code, TotpPurpose purpose) {
  const AccountTotp* t = FindTotp(state, user_id);
  TotpUse use;
  if (!t || !t->enabled) return use;
  use.user_id = user_id;
  if (!code || code->empty()) {
    return Status::InvalidArgument(
               "this account has two-factor sign-in: totp_code (the current 6-digit code of "
               "your authenticator app) is required")
        .WithField(std::string(kTotpCodeField));
  }
  if (LooksLikeTotpCode(*code)) {
    use.step = MatchTotp(t->secret, *code, UnixSeconds(now), t->last_step);
    if (!use.step) return WrongCode(purpose);
    return use;
  }
  if (purpose == TotpPurpose::kFreshCode || code->size() > 32) return WrongCode(purpose);
  std::string hash = Sha256Hex(NormalizeRecoveryCode(*code));
  if (std::find(t->recovery_hashes.begin(), t->recovery_hashes.end(), hash) ==
      t->recovery_hashes.end()) {
    return WrongCode(purpose);
  }
  use.recovery_hash = hash;
  return use;
}

void UseTotp(Txn& txn, const TotpUse& use) {
  auto it = txn.state.totp->by_user.find(use.user_id);
  if (use.user_id == 0 || it == txn.state.totp->by_user.end()) return;
  AccountTotp& t = it->second;
  if (use.step) t.last_step = std::max(t.last_step, *use.step);
  if (!use.recovery_hash.empty()) {
    auto used = std::find(t.recovery_hashes.begin(), t.recovery_hashes.end(), use.recovery_hash);
    if (used != t.recovery_hashes.end()) t.recovery_hashes.erase(used);
  }
  WriteTotp(txn, t);
}

Status CheckTotp(Txn& txn, std::int64_t user_id, const std::optional<std::string>& code,
                 TotpPurpose purpose) {
  GPUHUB_ASSIGN_OR_RETURN(TotpUse use, VerifyTotp(txn.state, txn.now, user_id, code, purpose));
  UseTotp(txn, use);
  return Status::Ok();
}

Status DisableTotp(Txn& txn, std::int64_t user_id, const std::optional<std::string>& code) {
  GPUHUB_RETURN_IF_ERROR(Enabled(txn, user_id).status());
  GPUHUB_RETURN_IF_ERROR(
      VerifyTotp(txn.state, txn.now, user_id, code, TotpPurpose::kDisable).status());
  txn.state.totp->by_user.erase(user_id);
  txn.writes.Delete("account_totp", {{"user_id", user_id}});
  return Status::Ok();
}

Status ReplaceRecoveryCodes(Txn& txn, std::int64_t user_id, const std::optional<std::string>& code,
                            const std::vector<std::string>& recovery_codes) {
  GPUHUB_ASSIGN_OR_RETURN(AccountTotp * t, Enabled(txn, user_id));
  GPUHUB_RETURN_IF_ERROR(CheckTotp(txn, user_id, code, TotpPurpose::kFreshCode));
  t->recovery_hashes.clear();
  for (const auto& c : recovery_codes)
    t->recovery_hashes.push_back(Sha256Hex(NormalizeRecoveryCode(c)));
  WriteTotp(txn, *t);
  return Status::Ok();
}

Status LoadTotp(store::Store& store, TotpState& state) {
  return store.Scan("account_totp",
                    {"user_id", "secret", "enabled", "last_step", "recovery_hashes",
                     "created_at_us", "enabled_at_us"},
                    "user_id", [&](const store::Row& row) -> Status {
                      AccountTotp t;
                      GPUHUB_ASSIGN_OR_RETURN(t.user_id, row.Int(0));
                      GPUHUB_ASSIGN_OR_RETURN(std::string secret, row.Text(1));
                      GPUHUB_ASSIGN_OR_RETURN(t.secret, Base32Decode(secret));
                      GPUHUB_ASSIGN_OR_RETURN(std::int64_t enabled, row.Int(2));
                      t.enabled = enabled != 0;
                      GPUHUB_ASSIGN_OR_RETURN(t.last_step, row.Int(3));
                      GPUHUB_ASSIGN_OR_RETURN(std::string hashes, row.Text(4));
                      for (const auto& h : Split(hashes, ',')) {
                        if (!h.empty()) t.recovery_hashes.push_back(h);
                      }
                      GPUHUB_ASSIGN_OR_RETURN(t.created_at, row.Int(5));
                      GPUHUB_ASSIGN_OR_RETURN(t.enabled_at, row.Int(6));
                      state.by_user[t.user_id] = std::move(t);
                      return Status::Ok();
                    });
}

}  // namespace gpuhub::engine
