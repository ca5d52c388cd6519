// Status and Result<T>: how expected failures travel.
//
// A caller's mistake (bad config, missing file, infeasible memory limit,
// unknown model) is an expected failure: functions return a Status or a
// Result<T> whose message names the thing that is wrong and the fix. The CLI
// turns it into one line and a non-zero exit. Bugs are not Statuses: they are
// HZ_CHECK failures that throw with file:line.
//
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace hydrozoa {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // a value the user gave is wrong (flag, field, size)
  kNotFound,         // a file, model, device or catalog entry does not exist
  kParseError,       // a file exists but is malformed or truncated
  kInfeasible,       // the request is well-formed but cannot be satisfied
  kIoError,          // the operating system refused (permissions, disk)
  kUnavailable,      // a peer or service could not be reached
  kInternal,         // a bug surfaced as a status (prefer HZ_CHECK)
};

const char* errorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status okStatus() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix>: <message>". OK stays OK.
  Status withPrefix(const std::string& prefix) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status invalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status notFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status parseError(std::string m) { return {ErrorCode::kParseError, std::move(m)}; }
inline Status infeasible(std::string m) { return {ErrorCode::kInfeasible, std::move(m)}; }
inline Status ioError(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
inline Status unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status internalError(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// A value or the Status that says why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }

  // REQUIRES: ok().
  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Result*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->checked(); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->checked(); }

 private:
  T& checked() {
    if (!ok()) throw std::logic_error("Result::value() on error: " + std::get<Status>(v_).message());
    return std::get<T>(v_);
  }
  std::variant<T, Status> v_;
};

// Thrown by HZ_CHECK: a bug, never a user's mistake.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void checkFailed(const char* file, int line, const char* expr, const std::string& detail);

}  // namespace hydrozoa

#define HZ_CHECK(cond)                                                  \
  do {                                                                  \
    if (!(cond)) ::hydrozoa::checkFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define HZ_CHECK_MSG(cond, detail)                                          \
  do {                                                                      \
    if (!(cond)) ::hydrozoa::checkFailed(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)

#define HZ_CONCAT_INNER(a, b) a##b
#define HZ_CONCAT(a, b) HZ_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define HZ_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    ::hydrozoa::Status hz_status_ = (expr);        \
    if (!hz_status_.ok()) return hz_status_;       \
  } while (0)

// `lhs = value of expr`, or returns its Status from the enclosing function.
#define HZ_ASSIGN_OR_RETURN(lhs, expr) HZ_ASSIGN_OR_RETURN_IMPL(HZ_CONCAT(hz_result_, __LINE__), lhs, expr)
#define HZ_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
