#include "core/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

namespace hydrozoa {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Splits "12.5 GB" into (12.5, "GB"). Fails when there is no leading number.
bool splitNumber(const std::string& text, double* number, std::string* unit) {
  const char* begin = text.c_str();
  while (*begin == ' ') ++begin;
  char* end = nullptr;
  *number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(*number)) return false;
  std::string rest(end);
  rest.erase(0, rest.find_first_not_of(' '));
  rest.erase(rest.find_last_not_of(' ') + 1);
  *unit = rest;
  return true;
}

double decimalPrefix(char p) {
  switch (std::tolower(static_cast<unsigned char>(p))) {
    case 'k': return 1e3;
    case 'm': return 1e6;
    case 'g': return 1e9;
    case 't': return 1e12;
    default: return 0;
  }
}

}  // namespace

Result<Bytes> parseBytes(const std::string& text, const std::string& what) {
  const std::string hint = "use a size like 512MB, 12GB or 16GiB";
  double number = 0;
  std::string unit;
  if (!splitNumber(text, &number, &unit)) {
    return invalidArgument(fmt::format("{}: \"{}\" is not a size; {}", what, text, hint));
  }
  if (number < 0) return invalidArgument(fmt::format("{}: size {} is negative; {}", what, text, hint));
  static const std::vector<std::pair<std::string, double>> kUnits = {
      {"", 1},      {"b", 1},     {"kb", 1e3},          {"mb", 1e6},          {"gb", 1e9},
      {"tb", 1e12}, {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
      {"k", 1e3},   {"m", 1e6},   {"g", 1e9},           {"t", 1e12},
  };
  const std::string u = lower(unit);
  for (const auto& [name, scale] : kUnits) {
    if (u != name) continue;
    if (!(number * scale <= static_cast<double>(kMaxBytes))) {
      return invalidArgument(fmt::format("{}: size {} is out of range; the largest accepted is {}", what, text,
                                         formatBytes(kMaxBytes)));
    }
    return static_cast<Bytes>(std::llround(number * scale));
  }
  return invalidArgument(fmt::format("{}: unknown size unit \"{}\" in \"{}\"; {}", what, unit, text, hint));
}

Result<BytesPerSecond> parseBandwidth(const std::string& text, const std::string& what) {
  const std::string hint = "use a bandwidth like 10Gbit/s, 100Mbps, 100MB/s or 1.25GB/s";
  double number = 0;
  std::string unit;
  if (!splitNumber(text, &number, &unit)) {
    return invalidArgument(fmt::format("{}: \"{}\" is not a bandwidth; {}", what, text, hint));
  }
  if (number <= 0) return invalidArgument(fmt::format("{}: bandwidth {} must be positive; {}", what, text, hint));
  auto unknown = [&] {
    return invalidArgument(fmt::format("{}: unknown bandwidth unit \"{}\" in \"{}\"; {}", what, unit, text, hint));
  };
  // Normalise "/s", "ps" and "per second" spellings to a per-second suffix.
  std::string u = unit;
  bool perSecond = false;
  for (const char* suffix : {"/s", "/sec", "ps"}) {
    const std::string s(suffix);
    if (u.size() >= s.size() && lower(u.substr(u.size() - s.size())) == s) {
      u = u.substr(0, u.size() - s.size());
      perSecond = true;
      break;
    }
  }
  if (!perSecond || u.empty()) return unknown();
  double scale = 1;
  if (u.size() > 1 && decimalPrefix(u[0]) > 0 && u != "bit" && u != "byte" && u != "b" && u != "B") {
    scale = decimalPrefix(u[0]);
    u = u.substr(1);
  }
  double bytesPerUnit = 0;
  if (u == "bit" || u == "b") {
    bytesPerUnit = 1.0 / 8.0;
  } else if (u == "B" || lower(u) == "byte") {
    bytesPerUnit = 1.0;
  } else {
    return unknown();
  }
  const double bandwidth = number * scale * bytesPerUnit;
  if (!(bandwidth <= static_cast<double>(kMaxBytes))) {
    return invalidArgument(fmt::format("{}: bandwidth {} is out of range; the largest accepted is {}", what, text,
                                       formatBandwidth(static_cast<double>(kMaxBytes))));
  }
  return bandwidth;
}

Result<Seconds> parseSeconds(const std::string& text, const std::string& what) {
  const std::string hint = "use a duration like 10s, 500ms or 2min";
  double number = 0;
  std::string unit;
  if (!splitNumber(text, &number, &unit)) {
    return invalidArgument(fmt::format("{}: \"{}\" is not a duration; {}", what, text, hint));
  }
  if (number < 0) return invalidArgument(fmt::format("{}: duration {} is negative; {}", what, text, hint));
  // 1e9 s (thirty years) is longer than any job, timeout or delay anyone means.
  if (number > 1e9) {
    return invalidArgument(fmt::format("{}: duration {} is out of range; {}", what, text, hint));
  }
  const std::string u = lower(unit);
  if (u.empty() || u == "s" || u == "sec") return number;
  if (u == "ms") return number * 1e-3;
  if (u == "us") return number * 1e-6;
  if (u == "min" || u == "m") return number * 60;
  if (u == "h") return number * 3600;
  if (u == "d") return number * 86400;
  return invalidArgument(fmt::format("{}: unknown time unit \"{}\" in \"{}\"; {}", what, unit, text, hint));
}

Result<std::int64_t> parsePositiveInt(const std::string& text, const std::string& what) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    return invalidArgument(fmt::format("{}: \"{}\" is not a whole number", what, text));
  }
  if (v <= 0) return invalidArgument(fmt::format("{}: {} must be at least 1", what, text));
  return static_cast<std::int64_t>(v);
}

namespace {
// 1234567 -> "1,234,567", exactly (formatCount goes through a double).
std::string groupDigits(std::int64_t v) {
  std::string digits = std::to_string(v);
  const bool negative = v < 0;
  if (negative) digits.erase(0, 1);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}
}  // namespace

std::string describeRange(Range range) {
  return fmt::format("a whole number from {} to {}", groupDigits(range.min), groupDigits(range.max));
}

Result<std::int64_t> parseCount(const std::string& text, const std::string& what, Range range) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  const std::string shown = text.size() > 40 ? text.substr(0, 37) + "..." : text;
  if (text.empty() || *end != '\0' || (errno != 0 && errno != ERANGE)) {
    return invalidArgument(fmt::format("{}: \"{}\" is not {}", what, shown, describeRange(range)));
  }
  if (errno == ERANGE || v < range.min || v > range.max) {
    return invalidArgument(fmt::format("{}: {} is out of range; expected {}", what, shown, describeRange(range)));
  }
  return static_cast<std::int64_t>(v);
}

namespace {
std::string threeDigits(double v) {
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}
}  // namespace

std::string formatBytes(Bytes bytes) {
  const double b = static_cast<double>(bytes);
  if (b < 1e3) return fmt::format("{} B", bytes);
  if (b < 1e6) return threeDigits(b / 1e3) + " KB";
  if (b < 1e9) return threeDigits(b / 1e6) + " MB";
  if (b < 1e12) return threeDigits(b / 1e9) + " GB";
  return threeDigits(b / 1e12) + " TB";
}

std::string formatBandwidth(BytesPerSecond bw) {
  if (bw < 1e3) return threeDigits(bw) + " B/s";
  if (bw < 1e6) return threeDigits(bw / 1e3) + " KB/s";
  if (bw < 1e9) return threeDigits(bw / 1e6) + " MB/s";
  return threeDigits(bw / 1e9) + " GB/s";
}

std::string formatSeconds(Seconds s) {
  if (!std::isfinite(s)) return "inf";
  if (s >= 3600) return fmt::format("{:.2f} h", s / 3600);
  if (s >= 1) return threeDigits(s) + " s";
  if (s >= 1e-3) return threeDigits(s * 1e3) + " ms";
  return threeDigits(s * 1e6) + " us";
}

std::string formatCount(double value) {
  if (!std::isfinite(value)) return "inf";
  std::string digits = fmt::format("{:.0f}", std::fabs(value));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string countOf(std::int64_t n, const char* one, const char* many) {
  return formatCount(static_cast<double>(n)) + " " + (n == 1 ? one : many);
}

std::string formatUsd(Usd usd) {
  if (!std::isfinite(usd)) return "inf";
  if (std::fabs(usd) >= 1000) return "$" + formatCount(usd);
  if (std::fabs(usd) >= 0.1) return fmt::format("${:.2f}", usd);
  if (usd == 0) return "$0";
  return fmt::format("${:.2g}", usd);
}

}  // namespace hydrozoa
