// Two-factor sign-in with TOTP (RFC 6238: HMAC-SHA-1, 6 digits, 30 s steps, one step either side;
// core/totp.h does the arithmetic) and one-time recovery codes.
//
// - Enrolment: StartTotp stores a new secret as pending (nothing changes for the account yet);
//   ConfirmTotp with a code of that secret enables it and stores the hashes of kTotpRecoveryCodes
//   recovery codes, which the caller shows once. Starting again while pending replaces the secret.
// - A code is good once per account: the step it matched is remembered (last_step, on the row),
//   and a code of that step or an earlier one is refused, also after a restart.
// - A recovery code (shape "xxxxx-xxxxx", lower-case base32) is good once: its hash is removed when
//   used. Recovery codes are accepted where Purpose allows (signing in, disabling), not for the
//   other fresh-code checks.
// - Secrets: the TOTP secret must be read in clear to check a code, so, like a webhook's signing
//   secret, the engine holds it in memory and on its row (base32) and never logs or shows it after
//   enrolment; recovery codes are stored as SHA-256 hashes only (they are random, 50 bits).
// - The random parts (secret, recovery codes) are made by the caller off the writer thread.
// - Time is txn.now (the engine's Clock).
//
// The functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

inline constexpr std::size_t kTotpSecretBytes = 20;  // RFC 4226's recommended 160 bits
inline constexpr std::size_t kTotpRecoveryCodes = 10;
inline constexpr std::string_view kTotpIssuer = "gpuhub";
// The request field every check names in its errors.
inline constexpr std::string_view kTotpCodeField = "totp_code";

struct AccountTotp {
  std::int64_t user_id = 0;
  std::string secret;                        // raw bytes (kTotpSecretBytes)
  bool enabled = false;                      // false: enrolment started, not confirmed
  std::int64_t last_step = -1;               // the newest step a code was accepted for
  std::vector<std::string> recovery_hashes;  // Sha256Hex of the unused recovery codes
  TimestampMicros created_at = 0;
  TimestampMicros enabled_at = 0;
};

struct TotpState {
  std::map<std::int64_t, AccountTotp> by_user;
};

// `n` bytes of libsodium's CSPRNG, for the secret and the recovery codes (call it off the writer).
std::string RandomBytes(std::size_t n);
// Recovery codes from random bytes (kTotpRecoveryCodes * 7 of RandomBytes; fewer give fewer codes):
// each "xxxxx-xxxxx" of lower-case base32. Pure, so a test can pass fixed bytes.
std::vector<std::string> RecoveryCodesFrom(std::string_view random_bytes);
// A recovery code as typed ("ABCDE-FGHIJ", "abcde fghij") in the form that is hashed.
std::string NormalizeRecoveryCode(std::string_view code);

// Whether the account signs in with a second factor.
bool TotpEnabled(const State& state, std::int64_t user_id);
const AccountTotp* FindTotp(const State& state, std::int64_t user_id);

struct TotpEnrolment {
  std::string secret_base32;
  std::string otpauth_uri;
};
// Stores `secret` (kTotpSecretBytes random bytes) as the pending secret. conflict when two-factor
// is already enabled (disable it first).
Result<TotpEnrolment> StartTotp(Txn& txn, const User& user, const std::string& secret);
// Enables the pending secret when `code` is its code now, with `recovery_codes` (plain; only their
// hashes are kept). failed_precondition when no enrolment was started or it is enabled already;
// invalid_argument (field totp_code) for a wrong code.
Status ConfirmTotp(Txn& txn, std::int64_t user_id, std::string_view code,
                   const std::vector<std::string>& recovery_codes);

enum class TotpPurpose {
  kSignIn,     // a TOTP code or a recovery code
  kDisable,    // a TOTP code or a recovery code
  kFreshCode,  // a TOTP code only (password change, spending keys, payout destinations, new codes)
};
// The fresh-code check of a sensitive action, in two halves so that a command validates before
// it mutates: VerifyTotp checks and changes nothing; UseTotp, once the rest of the command can no
// longer fail, spends what was verified (the step, or the recovery code).
struct TotpUse {
  std::int64_t user_id = 0;
  std::optional<std::int64_t> step;  // a TOTP code's step
  std::string recovery_hash;         // or the recovery code used ("" when none)
};
// Ok (nothing to use) when the account has no two-factor; else the code's use when `code` is
// good. invalid_argument naming totp_code when `code` is missing (nullopt or empty) or wrong; the
// messages say which, never the expected code.
Result<TotpUse> VerifyTotp(const State& state, TimestampMicros now, std::int64_t user_id,
                           const std::optional<std::string>& code, TotpPurpose purpose);
void UseTotp(Txn& txn, const TotpUse& use);
// VerifyTotp, then UseTotp: for a command whose last fallible step is the code.
Status CheckTotp(Txn& txn, std::int64_t user_id, const std::optional<std::string>& code,
                 TotpPurpose purpose);
// Disables two-factor after CheckTotp(kDisable). failed_precondition when it is not enabled.
Status DisableTotp(Txn& txn, std::int64_t user_id, const std::optional<std::string>& code);
// Replaces the recovery codes after CheckTotp(kFreshCode). failed_precondition when two-factor is
// not enabled.
Status ReplaceRecoveryCodes(Txn& txn, std::int64_t user_id, const std::optional<std::string>& code,
                            const std::vector<std::string>& recovery_codes);

Status LoadTotp(store::Store& store, TotpState& state);

}  // namespace gpuhub::engine
