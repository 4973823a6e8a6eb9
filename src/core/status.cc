#include "core/status.h"

namespace gpuhub {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kConflict: return "conflict";
    case StatusCode::kInsufficientFunds: return "insufficient_funds";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kPayloadTooLarge: return "payload_too_large";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal";
  }
  return "internal";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  Status out(code_, std::move(message));
  out.field_ = field_;
  return out;
}

void CheckFailed(const char* expr, const char* file, int line, const char* message) {
  std::fprintf(stderr, "%s:%d: invariant violated: %s%s%s\n", file, line, expr,
               message ? " — " : "", message ? message : "");
  std::abort();
}

}  // namespace gpuhub
