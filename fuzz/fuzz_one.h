// The body of every libFuzzer target: one input through one parser of
// tests/fuzz/parsers.h. A violated property (an accepted input that does not
// read back, an error that does not name the file in one line) aborts with
// the reason, which libFuzzer reports as a crash and saves the input for;
// so do escaped exceptions, sanitizer findings and timeouts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz/parsers.h"

namespace hydrozoa::fuzz {

inline int fuzzOne(Parser parse, const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string origin = "fuzz-input";
  const std::string wrong = violation(parse(text, origin), origin);
  if (!wrong.empty()) {
    std::fprintf(stderr, "property violated: %s\n", wrong.c_str());
    std::abort();
  }
  return 0;
}

}  // namespace hydrozoa::fuzz
