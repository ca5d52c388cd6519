// libFuzzer target: the plan parser (tests/fuzz/parsers.h). fuzz/README.md.
#include "fuzz_one.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return hydrozoa::fuzz::fuzzOne(hydrozoa::fuzz::parsePlanJson, data, size);
}
