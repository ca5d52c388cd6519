// Reading and writing the project's files (JSON artifacts, YAML specs and
// catalogs) with errors that name the file, the field and the fix.
//
// YAML is read into the same nlohmann::json value as JSON, so one reader
// (ObjectReader) validates both. Plain YAML scalars become numbers, booleans
// or null where they parse as such; quoted scalars stay strings.
//
// Thread-safety: free functions are thread-safe; an ObjectReader is not.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"
#include "core/status.h"

namespace hydrozoa {

using Json = nlohmann::json;

// Whole file as text; the error names the path and the OS reason.
Result<std::string> readTextFile(const std::string& path);

// Writes `content` to `path` atomically: a temporary file beside it, fsync,
// then rename. Readers never see a half-written file.
Status writeFileAtomically(const std::string& path, const std::string& content);

// Parses JSON text; `origin` (usually the path) prefixes errors, which give
// the line and column and hint at truncation when the text ends early.
// Text nested deeper than kMaxNesting is refused.
Result<Json> parseJson(const std::string& text, const std::string& origin);
// The same for a peer's message or a log's line, where the caller counts
// the refusal itself: a discarded value (is_discarded()) when `text` is not
// JSON or nests deeper than kMaxNesting.
Json parseJsonOrDiscarded(std::string_view text);
Result<Json> readJsonFile(const std::string& path);

// YAML text for a Json value (block style), e.g. a resolved job spec.
std::string toYaml(const Json& value);

// Parses YAML text into a Json value (see the note at the top). Refused:
// nesting deeper than kMaxNesting (an alias that contains itself is
// infinitely deep) and aliases that expand past kMaxYamlValues values.
Result<Json> parseYaml(const std::string& text, const std::string& origin);
Result<Json> readYamlFile(const std::string& path);

// Text from a file or a peer made fit for a one-line message: control
// characters (a terminal's escape sequences) and bytes that are not UTF-8
// escaped as JSON does, cut to 40 characters.
std::string printable(const std::string& text);

// Validates one JSON object field by field. Each accessor returns a value
// (a neutral one after a failure) and records the first failure, so callers
// read every field and check status() once:
//
//   ObjectReader r(j, "p.json: layers[3]");
//   layer.forward_ms = r.nonNegative("forward_ms");
//   HZ_RETURN_IF_ERROR(r.status());
//
// Messages read "p.json: layers[3].forward_ms: expected a number, got \"x\"".
class ObjectReader {
 public:
  // `where` names the object for messages. A non-object `j` records an error.
  ObjectReader(const Json& j, std::string where);

  // Present and not null. Asking makes `key` a known key (rejectUnknownKeys).
  bool has(const char* key) const;
  const Json* raw(const char* key);  // nullptr when absent (no error)

  double number(const char* key);
  double nonNegative(const char* key);
  double positive(const char* key);
  // A whole number in [min, max]; 4.0 reads as 4; anything else (1e30, "abc",
  // 2^64) fails with "... is out of range; expected a whole number from ...".
  std::int64_t integer(const char* key, std::int64_t min = INT64_MIN, std::int64_t max = INT64_MAX);
  std::int64_t count(const char* key, Range range);
  std::optional<std::int64_t> optCount(const char* key, Range range);
  std::string string(const char* key);
  bool boolean(const char* key);
  // REQUIRED array / object; an empty array is allowed unless nonEmpty.
  const Json& array(const char* key, bool nonEmpty = false);
  const Json& object(const char* key);

  // Quantities with units: a number (bytes, bytes/s, seconds) or a string
  // with a unit ("12GB", "10Gbit/s", "30us"); fraction() takes 0.1 or "10%".
  std::int64_t bytes(const char* key);
  double bandwidth(const char* key);
  double seconds(const char* key);
  double fraction(const char* key);
  std::optional<std::int64_t> optBytes(const char* key);

  // Optional variants: std::nullopt when the key is absent or null.
  std::optional<double> optNumber(const char* key);
  std::optional<std::int64_t> optInteger(const char* key, std::int64_t min = INT64_MIN,
                                         std::int64_t max = INT64_MAX);
  std::optional<std::string> optString(const char* key);

  // Records an error for every key not read through this reader (or listed in
  // `alsoAllowed`): "job.yaml: training: unknown key \"lr\" (known: ...)".
  void rejectUnknownKeys(const std::set<std::string>& alsoAllowed = {});

  // Records a custom failure for `key` (message is appended after the path).
  void fail(const char* key, const std::string& message);
  void fail(const std::string& message);
  // Records the failure of a nested reader (or a parser given child(key) as
  // its name), whose message names its place already. OK is ignored.
  void adopt(const Status& status);

  // Where a child of this object is, for nested readers: "p.json: layers[3]".
  std::string child(const char* key) const;
  std::string element(const char* key, size_t index) const;

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

 private:
  const Json* require(const char* key, const char* expected);

  const Json& j_;
  std::string where_;
  Status status_;
  mutable std::set<std::string> seen_;  // keys asked about: the known keys
};

// The name in `names` closest to `word` (a typo's likely intent), or "" when
// none is close: for "did you mean" hints.
std::string closestName(const std::string& word, const std::set<std::string>& names);

// Short description of a JSON value's kind for messages: "a string \"x\"".
std::string describeJson(const Json& value);

}  // namespace hydrozoa
