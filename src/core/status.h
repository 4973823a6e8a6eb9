// Status and Result<T>: how every component reports an expected failure.
//
// Contract: functions that can fail on input they do not control (user input, files, the network,
// the database) return Status or Result<T>; they never throw for those and never assert on them.
// Assertions (GPUHUB_CHECK) guard programmer errors and stay on in release builds.
// The HTTP layer maps codes to statuses: invalid_argument 400, unauthenticated 401,
// permission_denied 403, not_found 404, conflict 409, failed_precondition 409,
// insufficient_funds 402, payload_too_large 413, resource_exhausted 429, unavailable 503, internal 500.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gpuhub {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kFailedPrecondition,
  kConflict,
  kInsufficientFunds,
  kUnauthenticated,
  kPermissionDenied,
  kPayloadTooLarge,
  kResourceExhausted,
  kUnavailable,
  kInternal,
};

// The stable, snake_case name used in JSON error bodies ("invalid_argument").
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
  static Status InsufficientFunds(std::string m) {
    return {StatusCode::kInsufficientFunds, std::move(m)};
  }
  static Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status PayloadTooLarge(std::string m) { return {StatusCode::kPayloadTooLarge, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: context must be at least 1 token"
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `; used to say where an error happened
  // ("data/catalog.toml:12: gpu.vram_gb: ...").
  Status WithContext(std::string_view context) const;

  // The request field the error concerns ("amount"), when there is one: the HTTP layer adds it to
  // the error body ({"error": {..., "field": "amount"}}) so that a form can show the message next
  // to that field. Empty when the error is not about one field.
  const std::string& field() const { return field_; }
  Status WithField(std::string field) const {
    Status copy = *this;
    if (!copy.ok()) copy.field_ = std::move(field);
    return copy;
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
};

// A value or the Status that explains why there is none. Accessing value() of an error Result is a
// programmer error and aborts.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
  Result(Status status) : data_(std::move(status)) {  // NOLINT
    if (std::get<Status>(data_).ok()) {
      std::fprintf(stderr, "Result constructed from an ok Status\n");
      std::abort();
    }
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked() {
    if (!ok()) {
      std::fprintf(stderr, "Result::value() on error: %s\n", std::get<Status>(data_).ToString().c_str());
      std::abort();
    }
    return std::get<T>(data_);
  }
  std::variant<T, Status> data_;
};

[[noreturn]] void CheckFailed(const char* expr, const char* file, int line, const char* message);

}  // namespace gpuhub

// Invariant checks that stay on in release builds (money and state machines depend on them).
#define GPUHUB_CHECK(cond)                                                   \
  do {                                                                       \
    if (!(cond)) ::gpuhub::CheckFailed(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)
#define GPUHUB_CHECK_MSG(cond, msg)                                       \
  do {                                                                    \
    if (!(cond)) ::gpuhub::CheckFailed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)

// Propagates an error Status from an expression returning Status.
#define GPUHUB_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::gpuhub::Status gpuhub_status_ = (expr); \
    if (!gpuhub_status_.ok()) return gpuhub_status_; \
  } while (0)

#define GPUHUB_CONCAT_INNER(a, b) a##b
#define GPUHUB_CONCAT(a, b) GPUHUB_CONCAT_INNER(a, b)
// GPUHUB_ASSIGN_OR_RETURN(auto x, FunctionReturningResult());
#define GPUHUB_ASSIGN_OR_RETURN(lhs, expr) \
  GPUHUB_ASSIGN_OR_RETURN_IMPL(GPUHUB_CONCAT(gpuhub_result_, __LINE__), lhs, expr)
#define GPUHUB_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
