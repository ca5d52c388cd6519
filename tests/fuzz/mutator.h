// A small seeded mutator for the parsers' mutation tests (mutation_test.cc).
//
// mutate(text, seed) applies one to three edits of the kinds that break
// parsers: flipped and replaced bytes, truncation, duplicated, deleted and
// swapped lines, swapped numbers, numbers replaced by huge, negative or
// non-finite ones (and tokens by numbers), deleted and duplicated spans, and
// inserted structure ("{", "- ", ": ", "&a"). The result depends on the text
// and the seed only: the generator is SplitMix64 and every choice is
// `next() % n`, not a standard distribution (whose output differs between
// standard libraries), so a failing seed reproduces anywhere.
//
// Header-only; tests only.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hydrozoa::fuzz {

// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n). REQUIRES: n > 0.
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  template <class T, size_t N>
  const T& pick(const T (&items)[N]) {
    return items[below(N)];
  }

 private:
  std::uint64_t state_;
};

// The values that find range bugs: the edges of int, int64 and double,
// non-finite and non-numbers (in the spellings of JSON, YAML and C).
inline constexpr const char* kInterestingValues[] = {
    "0",  "-1",     "-0",    "1",     "2147483647", "2147483648", "4294967296", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "18446744073709551616", "99999999999999999999999999",
    "1e30", "1e308", "1e400", "-1e400", "1e-400", "4.9e-324", "nan", "NaN", ".nan", "inf", ".inf", "-inf",
    "0x10", "1.5",  "abc",   "\"\"",  "null",       "true",       "[]",         "{}"};

// Bytes and snippets that change structure in JSON, YAML and graph.txt.
inline constexpr const char* kInterestingSnippets[] = {
    "{", "}", "[", "]", "\"", "'", ":", ": ", ",", "- ", "\n", "\n  ", "\t", " -- ", "#", "&a ", "*a", "!!binary ",
    "? ", "|", ">", "%", "\\", "=", ";", "null", "~", "\xff", "\xc3", "\x80", ""};  // "": a NUL byte

struct Mutation {
  std::string text;
  std::string description;  // the edits, in order, for failure messages
};

namespace detail {

// [begin, end) of every line, the newline excluded.
inline std::vector<std::pair<size_t, size_t>> lines(const std::string& s) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  while (begin <= s.size()) {
    size_t end = s.find('\n', begin);
    if (end == std::string::npos) end = s.size();
    out.emplace_back(begin, end);
    begin = end + 1;
  }
  return out;
}

inline bool isNumberChar(char c) {
  return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
}
inline bool isWordChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
         c == '-' || c == '+';
}

// [begin, end) of every number ("12", "-3.5e9") or, with words, of every
// run of word characters ("k80", "per_second", "12GB").
inline std::vector<std::pair<size_t, size_t>> tokens(const std::string& s, bool words) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    const bool starts = words ? isWordChar(s[i])
                              : (s[i] >= '0' && s[i] <= '9') ||
                                    (s[i] == '-' && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '9');
    if (!starts) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && (words ? isWordChar(s[j]) : isNumberChar(s[j]))) ++j;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

inline std::string shown(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 24)) {
    out += c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", c);
  }
  return out + (s.size() > 24 ? "..." : "");
}

// One edit of `s` in place; returns what it did.
inline std::string mutateOnce(std::string& s, Rng& rng) {
  const size_t n = s.size();
  switch (rng.below(13)) {
    case 0: {  // flip one bit
      if (n == 0) break;
      const size_t at = rng.below(n);
      const int bit = static_cast<int>(rng.below(8));
      s[at] = static_cast<char>(s[at] ^ (1 << bit));
      return fmt::format("flip bit {} of byte {}", bit, at);
    }
    case 1: {  // replace a byte with a structural one
      if (n == 0) break;
      const size_t at = rng.below(n);
      const std::string b = rng.pick(kInterestingSnippets);
      s[at] = b.empty() ? '\0' : b[0];
      return fmt::format("set byte {} to \"{}\"", at, shown(std::string(1, s[at])));
    }
    case 2: {  // truncate
      const size_t at = rng.below(n + 1);
      s.resize(at);
      return fmt::format("truncate at {}", at);
    }
    case 3:
    case 4:
    case 5: {  // duplicate, delete or swap lines
      auto ls = lines(s);
      const size_t a = rng.below(ls.size()), b = rng.below(ls.size());
      const std::string la = s.substr(ls[a].first, ls[a].second - ls[a].first);
      const std::string lb = s.substr(ls[b].first, ls[b].second - ls[b].first);
      const int kind = static_cast<int>(rng.below(3));
      if (kind == 0) {
        s.insert(ls[a].first, la + "\n");
        return fmt::format("duplicate line {}", a + 1);
      }
      if (kind == 1) {
        s.erase(ls[a].first, std::min(ls[a].second + 1, s.size()) - ls[a].first);
        return fmt::format("delete line {}", a + 1);
      }
      if (a == b) break;
      const auto [first, second] = a < b ? std::pair{ls[a], ls[b]} : std::pair{ls[b], ls[a]};
      const std::string lf = a < b ? la : lb, lsec = a < b ? lb : la;
      s.replace(second.first, second.second - second.first, lf);
      s.replace(first.first, first.second - first.first, lsec);
      return fmt::format("swap lines {} and {}", a + 1, b + 1);
    }
    case 6: {  // swap two numbers
      auto ts = tokens(s, /*words=*/false);
      if (ts.size() < 2) break;
      size_t a = rng.below(ts.size()), b = rng.below(ts.size());
      if (a == b) break;
      if (a > b) std::swap(a, b);
      const std::string ta = s.substr(ts[a].first, ts[a].second - ts[a].first);
      const std::string tb = s.substr(ts[b].first, ts[b].second - ts[b].first);
      s.replace(ts[b].first, ts[b].second - ts[b].first, ta);
      s.replace(ts[a].first, ts[a].second - ts[a].first, tb);
      return fmt::format("swap numbers {} and {} ({} and {})", a, b, shown(ta), shown(tb));
    }
    case 7:
    case 8:
    case 9: {  // replace a number (mostly) or a word with an interesting value
      auto ts = tokens(s, /*words=*/rng.below(3) == 0);
      if (ts.empty()) break;
      const size_t t = rng.below(ts.size());
      const std::string value = rng.pick(kInterestingValues);
      const std::string old = s.substr(ts[t].first, ts[t].second - ts[t].first);
      s.replace(ts[t].first, ts[t].second - ts[t].first, value);
      return fmt::format("replace \"{}\" at {} with {}", shown(old), ts[t].first, value);
    }
    case 10: {  // delete a span
      if (n == 0) break;
      const size_t at = rng.below(n), len = 1 + rng.below(16);
      s.erase(at, len);
      return fmt::format("delete {} bytes at {}", len, at);
    }
    case 11: {  // duplicate a span somewhere else
      if (n == 0) break;
      const size_t at = rng.below(n), len = 1 + rng.below(64), to = rng.below(n + 1);
      const std::string span = s.substr(at, len);
      s.insert(to, span);
      return fmt::format("copy {} bytes from {} to {}", span.size(), at, to);
    }
    case 12: {  // insert a structural snippet
      const size_t at = rng.below(n + 1);
      const char* raw = rng.pick(kInterestingSnippets);
      const std::string snippet = *raw ? std::string(raw) : std::string(1, '\0');
      s.insert(at, snippet);
      return fmt::format("insert \"{}\" at {}", shown(snippet), at);
    }
  }
  // The chosen edit did not apply (empty text, one token): flip a byte or add one.
  if (s.empty()) {
    s = "\n";
    return "replace the empty text with a newline";
  }
  const size_t at = rng.below(s.size());
  s[at] = static_cast<char>(s[at] ^ 0x20);
  return fmt::format("flip bit 5 of byte {}", at);
}

}  // namespace detail

// One to three edits of `text`, chosen by `seed` only.
inline Mutation mutate(const std::string& text, std::uint64_t seed) {
  Rng rng(seed);
  Mutation m{text, ""};
  const size_t edits = 1 + rng.below(3);
  for (size_t i = 0; i < edits; ++i) {
    m.description += (i ? "; " : "") + detail::mutateOnce(m.text, rng);
  }
  return m;
}

}  // namespace hydrozoa::fuzz
