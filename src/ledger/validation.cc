// Ledger: checking a transfer request before anything moves (shape, accounts, amounts, the
// pending transfer it resolves) and against a transfer with the same id.
#include "ledger/ledger.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "ledger/ledger_internal.h"

namespace gpuhub::ledger {

namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '_' || c == '-' || c == '.' || c == '/' || c == '@';
}

bool IsCodeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

bool AllOf(std::string_view text, bool (*pred)(char)) {
  return std::all_of(text.begin(), text.end(), pred);
}

// Well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF) without C0/C1 control characters
// or DEL: a memo ends up in JSON, logs and web pages.
bool IsCleanUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto b0 = static_cast<unsigned char>(text[i]);
    if (b0 < 0x80) {
      if (b0 < 0x20 || b0 == 0x7F) return false;
      ++i;
      continue;
    }
    int extra;
    std::uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      extra = 1;
      cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      extra = 2;
      cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      extra = 3;
      cp = b0 & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(extra) >= text.size()) return false;  // truncated
    for (int k = 1; k <= extra; ++k) {
      auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x80 && cp <= 0x9F)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

bool IsKnownTransferKind(TransferKind kind) {
  return static_cast<int>(kind) <= 3;  // uint8_t: never negative
}

}  // namespace

TransferResult Ledger::Validate(const TransferRequest& r, std::string* message) const {
  auto fail = [&](TransferResult result, std::string why) {
    *message = std::move(why);
    return result;
  };
  if (r.id.empty()) return fail(TransferResult::kIdMustNotBeEmpty, "transfer id is empty");
  if (r.id.size() > kMaxTransferIdBytes) {
    return fail(TransferResult::kIdTooLong, "transfer id " + Quoted(r.id) + " is longer than " +
                                                std::to_string(kMaxTransferIdBytes) + " bytes");
  }
  if (!AllOf(r.id, IsIdChar)) {
    return fail(TransferResult::kIdHasInvalidCharacters,
                "transfer id " + Quoted(r.id) + " may only contain A-Z a-z 0-9 : _ - . / @");
  }
  const Prefix in{r.id};
  if (!IsKnownTransferKind(r.kind)) {
    return fail(TransferResult::kKindInvalid,
                in + "unknown kind " + std::to_string(static_cast<int>(r.kind)));
  }
  if (r.code.empty()) return fail(TransferResult::kCodeMustNotBeEmpty, in + "code is empty");
  if (r.code.size() > kMaxTransferCodeBytes) {
    return fail(TransferResult::kCodeTooLong,
                in + "code is longer than " + std::to_string(kMaxTransferCodeBytes) + " bytes");
  }
  if (!AllOf(r.code, IsCodeChar)) {
    return fail(TransferResult::kCodeHasInvalidCharacters,
                in + "code " + Quoted(r.code) + " may only contain a-z 0-9 _ - . :");
  }
  if (r.memo.size() > kMaxTransferMemoBytes) {
    return fail(TransferResult::kMemoTooLong,
                in + "memo is longer than " + std::to_string(kMaxTransferMemoBytes) + " bytes");
  }
  if (!IsCleanUtf8(r.memo)) {
    return fail(TransferResult::kMemoHasInvalidCharacters,
                in + "memo must be UTF-8 text without control characters");
  }
  if (r.timestamp <= 0) {
    return fail(TransferResult::kTimestampMustBePositive, in + "timestamp must be > 0");
  }
  const bool resolution = IsResolution(r.kind);
  if (!resolution) {
    if (!r.debit) return fail(TransferResult::kDebitAccountRequired, in + "debit account missing");
    if (!r.credit) {
      return fail(TransferResult::kCreditAccountRequired, in + "credit account missing");
    }
  }
  if (r.debit) {
    if (Status s = ValidateAccountKey(*r.debit); !s.ok()) {
      return fail(TransferResult::kDebitAccountInvalid, in + "debit account: " + s.message());
    }
  }
  if (r.credit) {
    if (Status s = ValidateAccountKey(*r.credit); !s.ok()) {
      return fail(TransferResult::kCreditAccountInvalid, in + "credit account: " + s.message());
    }
  }
  if (!resolution) {
    if (*r.debit == *r.credit) {
      return fail(TransferResult::kAccountsMustBeDifferent,
                  in + "debit and credit are the same account " + AccountKeyName(*r.debit));
    }
    if (r.debit->currency != r.credit->currency) {
      return fail(TransferResult::kAccountsMustHaveSameCurrency,
                  in + "debit " + AccountKeyName(*r.debit) + " and credit " +
                      AccountKeyName(*r.credit) + " have different currencies");
    }
  }
  if (r.kind == TransferKind::kVoidPending) {
    if (r.amount_micros < 0) {
      return fail(TransferResult::kAmountMustNotBeNegative, in + "amount must not be negative");
    }
  } else if (r.amount_micros <= 0) {
    return fail(TransferResult::kAmountMustBePositive,
                in + "amount must be positive, got " + FormatMicros(r.amount_micros));
  }
  if (r.amount_micros > kMaxTransferAmountMicros) {
    return fail(TransferResult::kAmountExceedsMaximum,
                in + "amount " + FormatMicros(r.amount_micros) + " exceeds the maximum " +
                    FormatMicros(kMaxTransferAmountMicros));
  }
  if (!resolution) {
    if (!r.pending_id.empty()) {
      return fail(TransferResult::kPendingIdMustBeEmpty,
                  in + "pending_id is only for post_pending and void_pending");
    }
  } else {
    if (r.pending_id.empty()) {
      return fail(TransferResult::kPendingIdMustNotBeEmpty,
                  in + std::string(TransferKindName(r.kind)) + " needs a pending_id");
    }
    if (r.pending_id.size() > kMaxTransferIdBytes || !AllOf(r.pending_id, IsIdChar)) {
      return fail(TransferResult::kPendingIdInvalid,
                  in + "pending_id " + Quoted(r.pending_id) + " is not a valid transfer id");
    }
    if (r.pending_id == r.id) {
      return fail(TransferResult::kPendingIdMustBeDifferent,
                  in + "pending_id must name another transfer");
    }
  }
  return TransferResult::kOk;
}

TransferResult Ledger::CheckExisting(const TransferRequest& r, const Transfer& existing,
                                     std::string* message) const {
  const char* field = nullptr;
  if (r.kind != existing.kind) {
    field = "kind";
  } else if (r.debit && *r.debit != existing.debit) {
    field = "debit account";
  } else if (r.credit && *r.credit != existing.credit) {
    field = "credit account";
  } else if (r.kind == TransferKind::kVoidPending
                 ? (r.amount_micros != 0 && r.amount_micros != existing.amount_micros)
                 : r.amount_micros != existing.amount_micros) {
    field = "amount";
  } else if (r.pending_id != existing.pending_id) {
    field = "pending_id";
  } else if (r.code != existing.code) {
    field = "code";
  } else if (r.memo != existing.memo) {
    field = "memo";
  }
  if (field == nullptr) return TransferResult::kExists;
  *message = "transfer " + Quoted(r.id) + " already exists (sequence " +
             std::to_string(existing.sequence) + ") with a different " + field;
  return TransferResult::kExistsWithDifferentFields;
}

}  // namespace gpuhub::ledger
