#include "core/status.h"

namespace hydrozoa {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kParseError: return "parse error";
    case ErrorCode::kInfeasible: return "infeasible";
    case ErrorCode::kIoError: return "i/o error";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown";
}

Status Status::withPrefix(const std::string& prefix) const {
  if (ok()) return *this;
  return Status(code_, prefix + ": " + message_);
}

void checkFailed(const char* file, int line, const char* expr, const std::string& detail) {
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": check failed: " + expr;
  if (!detail.empty()) msg += " (" + detail + ")";
  throw InternalError(msg);
}

}  // namespace hydrozoa
