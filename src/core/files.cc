#include "core/files.h"

#include "core/units.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace hydrozoa {

Result<std::string> readTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return notFound(fmt::format("{}: no such file", path));
    return ioError(fmt::format("{}: cannot read: {}", path, std::strerror(err)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return ioError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
  return ss.str();
}

Status writeFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ioError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ioError(fmt::format("{}: write failed: {}", path, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ioError(fmt::format("{}: write failed: {}", path, std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ioError(fmt::format("{}: cannot replace: {}", path, std::strerror(err)));
  }
  return Status();
}

namespace {

// Line and column (from 1) of byte `at` of `text`, as editors show them.
std::pair<size_t, size_t> lineColumn(std::string_view text, size_t at) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < std::min(at, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// Where JSON text first nests deeper than kMaxNesting (the byte of the
// bracket that does), else npos. Brackets inside strings do not count; the
// text need not be valid (the parser judges that).
size_t tooDeepAt(std::string_view text) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

}  // namespace

Json parseJsonOrDiscarded(std::string_view text) {
  if (tooDeepAt(text) != std::string_view::npos) return Json(Json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

Result<Json> parseJson(const std::string& text, const std::string& origin) {
  if (const size_t deep = tooDeepAt(text); deep != std::string_view::npos) {
    const auto [line, col] = lineColumn(text, deep);
    return parseError(fmt::format("{}: arrays and objects nested more than {} deep at line {}, column {}; no "
                                  "hydrozoa file nests that deep",
                                  origin, kMaxNesting, line, col));
  }
  try {
    return Json::parse(text);
  } catch (const Json::out_of_range& e) {
    // 1e400: "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    const std::string what = e.what();
    const auto bracket = what.find("] ");
    return parseError(fmt::format("{}: not valid JSON: {}", origin,
                                  bracket == std::string::npos ? what : what.substr(bracket + 2)));
  } catch (const Json::parse_error& e) {
    // Turn the byte offset into line:column, which is what editors show.
    const auto [line, col] = lineColumn(text, e.byte == 0 ? 0 : e.byte - 1);
    const bool atEnd = e.byte >= text.size();
    std::string what = e.what();
    // nlohmann's message starts "[json.exception.parse_error.101] parse error at line..": keep the reason.
    const auto colon = what.rfind(": ");
    const std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
    return parseError(fmt::format("{}: not valid JSON at line {}, column {}: {}{}", origin, line, col, reason,
                                  atEnd ? " (the file ends early: is it truncated?)" : ""));
  }
}

Result<Json> readJsonFile(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return parseError(fmt::format("{}: the file is empty", path));
  }
  return parseJson(text, path);
}


std::string closestName(const std::string& word, const std::set<std::string>& names) {
  // Levenshtein distance, case-insensitive; a close name is at most a third
  // of the word's letters away (at least one).
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string w = lower(word);
  std::string best;
  size_t bestDistance = std::max<size_t>(1, w.size() / 3) + 1;
  for (const auto& name : names) {
    const std::string n = lower(name);
    std::vector<size_t> row(n.size() + 1);
    for (size_t j = 0; j <= n.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= w.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= n.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (w[i - 1] == n[j - 1] ? 0 : 1)});
        diagonal = up;
      }
    }
    if (row[n.size()] < bestDistance) {
      bestDistance = row[n.size()];
      best = name;
    }
  }
  return best;
}

std::string printable(const std::string& text) {
  const std::string cut = text.size() > 40 ? text.substr(0, 37) + "..." : text;
  const std::string quoted = Json(cut).dump(-1, ' ', false, Json::error_handler_t::replace);
  return quoted.substr(1, quoted.size() - 2);
}

std::string describeJson(const Json& v) {
  // YAML strings may hold any bytes; dump() would throw on invalid UTF-8.
  std::string dumped = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (dumped.size() > 40) dumped = dumped.substr(0, 37) + "...";
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean " + dumped;
    case Json::value_t::string: return "a string " + dumped;
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    default: return "the number " + dumped;
  }
}

// ---------------------------------------------------------------------------

ObjectReader::ObjectReader(const Json& j, std::string where) : j_(j), where_(std::move(where)) {
  if (!j_.is_object()) {
    status_ = parseError(fmt::format("{}: expected an object, got {}", where_, describeJson(j_)));
  }
}

bool ObjectReader::has(const char* key) const {
  seen_.insert(key);  // a key the reader asks about is a known key
  return j_.is_object() && j_.contains(key) && !j_.at(key).is_null();
}

const Json* ObjectReader::raw(const char* key) {
  seen_.insert(key);
  if (!has(key)) return nullptr;
  return &j_.at(key);
}

std::string ObjectReader::child(const char* key) const { return where_ + "." + key; }

std::string ObjectReader::element(const char* key, size_t index) const {
  return fmt::format("{}.{}[{}]", where_, key, index);
}

void ObjectReader::fail(const char* key, const std::string& message) {
  if (status_.ok()) status_ = parseError(fmt::format("{}.{}: {}", where_, key, message));
}

void ObjectReader::adopt(const Status& status) {
  if (status_.ok() && !status.ok()) status_ = status;
}

void ObjectReader::fail(const std::string& message) {
  if (status_.ok()) status_ = parseError(fmt::format("{}: {}", where_, message));
}

const Json* ObjectReader::require(const char* key, const char* expected) {
  seen_.insert(key);
  if (!status_.ok() || !j_.is_object()) return nullptr;
  if (!has(key)) {
    fail(key, fmt::format("missing (expected {})", expected));
    return nullptr;
  }
  return &j_.at(key);
}

double ObjectReader::number(const char* key) {
  const Json* v = require(key, "a number");
  if (!v) return 0;
  if (!v->is_number()) {
    fail(key, "expected a number, got " + describeJson(*v));
    return 0;
  }
  return v->get<double>();
}

double ObjectReader::nonNegative(const char* key) {
  const double v = number(key);
  if (status_.ok() && v < 0) fail(key, fmt::format("must not be negative (got {})", v));
  return v;
}

double ObjectReader::positive(const char* key) {
  const double v = number(key);
  if (status_.ok() && !(v > 0)) fail(key, fmt::format("must be positive (got {})", v));
  return v;
}

std::int64_t ObjectReader::integer(const char* key, std::int64_t min, std::int64_t max) {
  const Json* v = require(key, "a whole number");
  if (!v) return 0;
  const Range range{min, max};
  auto outOfRange = [&] {
    if (min == INT64_MIN && max == INT64_MAX) {
      fail(key, fmt::format("{} does not fit in a 64-bit whole number", v->dump()));
    } else {
      fail(key, fmt::format("{} is out of range; expected {}", v->dump(), describeRange(range)));
    }
    return std::int64_t{0};
  };
  std::int64_t i = 0;
  if (v->is_number_unsigned()) {
    if (v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) return outOfRange();
    i = static_cast<std::int64_t>(v->get<std::uint64_t>());
  } else if (v->is_number_integer()) {
    i = v->get<std::int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             std::floor(v->get<double>()) == v->get<double>()) {
    // 4.0 is a fine way to write 4; 1e30 is a whole number out of range.
    const double d = v->get<double>();
    if (!(d >= -9e18 && d <= 9e18)) return outOfRange();
    i = static_cast<std::int64_t>(d);
  } else {
    fail(key, "expected a whole number, got " + describeJson(*v));
    return 0;
  }
  if (i < min || i > max) return outOfRange();
  return i;
}

std::int64_t ObjectReader::count(const char* key, Range range) { return integer(key, range.min, range.max); }

std::optional<std::int64_t> ObjectReader::optCount(const char* key, Range range) {
  seen_.insert(key);
  if (!has(key)) return std::nullopt;
  return integer(key, range.min, range.max);
}

std::string ObjectReader::string(const char* key) {
  const Json* v = require(key, "a string");
  if (!v) return "";
  if (!v->is_string()) {
    fail(key, "expected a string, got " + describeJson(*v));
    return "";
  }
  return v->get<std::string>();
}

bool ObjectReader::boolean(const char* key) {
  const Json* v = require(key, "true or false");
  if (!v) return false;
  if (!v->is_boolean()) {
    fail(key, "expected true or false, got " + describeJson(*v));
    return false;
  }
  return v->get<bool>();
}

const Json& ObjectReader::array(const char* key, bool nonEmpty) {
  static const Json kEmpty = Json::array();
  const Json* v = require(key, "an array");
  if (!v) return kEmpty;
  if (!v->is_array()) {
    fail(key, "expected an array, got " + describeJson(*v));
    return kEmpty;
  }
  if (nonEmpty && v->empty()) {
    fail(key, "must not be empty");
    return kEmpty;
  }
  return *v;
}

const Json& ObjectReader::object(const char* key) {
  static const Json kEmpty = Json::object();
  const Json* v = require(key, "an object");
  if (!v) return kEmpty;
  if (!v->is_object()) {
    fail(key, "expected an object, got " + describeJson(*v));
    return kEmpty;
  }
  return *v;
}

namespace {

// A quantity that may be a plain number or a string with a unit.
template <class T, class Parse>
T quantity(ObjectReader& r, const char* key, const Json* v, Parse parse) {
  if (!v) return T{};
  if (v->is_number()) {
    const double d = v->get<double>();
    if (d < 0) {
      r.fail(key, fmt::format("{} is out of range; expected at least 0", v->dump()));
      return T{};
    }
    if (!(d <= static_cast<double>(kMaxBytes))) {  // also NaN
      r.fail(key, fmt::format("{} is out of range; expected at most {}", v->dump(), kMaxBytes));
      return T{};
    }
    return static_cast<T>(d);
  }
  if (!v->is_string()) {
    r.fail(key, "expected a number or a string with a unit, got " + describeJson(*v));
    return T{};
  }
  auto parsed = parse(v->get<std::string>(), key);
  if (!parsed.ok()) {
    // The parser's message starts with the key; keep only its explanation.
    std::string m = parsed.status().message();
    const auto colon = m.find(": ");
    if (colon != std::string::npos) m = m.substr(colon + 2);
    // It quotes the text, which may hold a newline from the file.
    for (char& c : m) {
      if (static_cast<unsigned char>(c) < 0x20) c = '?';
    }
    r.fail(key, m);
    return T{};
  }
  return static_cast<T>(*parsed);
}

}  // namespace

std::int64_t ObjectReader::bytes(const char* key) {
  return quantity<std::int64_t>(*this, key, require(key, "a size such as 12GB"), parseBytes);
}

double ObjectReader::bandwidth(const char* key) {
  return quantity<double>(*this, key, require(key, "a bandwidth such as 10Gbit/s"), parseBandwidth);
}

double ObjectReader::seconds(const char* key) {
  const double s = quantity<double>(*this, key, require(key, "a duration such as 30us"), parseSeconds);
  // As parseSeconds: thirty years is longer than anything a duration means here.
  if (s > 1e9) {
    fail(key, fmt::format("{} s is out of range; expected a duration of at most 1e9 s", s));
    return 0;
  }
  return s;
}

double ObjectReader::fraction(const char* key) {
  const Json* v = require(key, "a fraction such as 0.1 or 10%");
  if (!v) return 0;
  double f = 0;
  if (v->is_number()) {
    f = v->get<double>();
  } else if (v->is_string() && !v->get<std::string>().empty() && v->get<std::string>().back() == '%') {
    const std::string s = v->get<std::string>();
    char* end = nullptr;
    f = std::strtod(s.c_str(), &end) / 100.0;
    if (end != s.c_str() + s.size() - 1) f = -1;
  } else {
    f = -1;
  }
  if (f < 0 || !std::isfinite(f)) fail(key, "expected a fraction such as 0.1 or 10%, got " + describeJson(*v));
  return f;
}

std::optional<std::int64_t> ObjectReader::optBytes(const char* key) {
  seen_.insert(key);
  if (!has(key)) return std::nullopt;
  return bytes(key);
}

std::optional<double> ObjectReader::optNumber(const char* key) {
  seen_.insert(key);
  if (!has(key)) return std::nullopt;
  return number(key);
}

std::optional<std::int64_t> ObjectReader::optInteger(const char* key, std::int64_t min, std::int64_t max) {
  seen_.insert(key);
  if (!has(key)) return std::nullopt;
  return integer(key, min, max);
}

std::optional<std::string> ObjectReader::optString(const char* key) {
  seen_.insert(key);
  if (!has(key)) return std::nullopt;
  return string(key);
}

void ObjectReader::rejectUnknownKeys(const std::set<std::string>& alsoAllowed) {
  if (!status_.ok() || !j_.is_object()) return;
  for (const auto& item : j_.items()) {
    if (seen_.count(item.key()) || alsoAllowed.count(item.key())) continue;
    std::set<std::string> known(seen_.begin(), seen_.end());
    known.insert(alsoAllowed.begin(), alsoAllowed.end());
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    const std::string guess = closestName(item.key(), known);
    fail(fmt::format("unknown key {}{} (known keys: {})",
                     Json(item.key()).dump(-1, ' ', false, Json::error_handler_t::replace),
                     guess.empty() ? "" : fmt::format("; did you mean \"{}\"?", guess), list));
    return;
  }
}

}  // namespace hydrozoa
