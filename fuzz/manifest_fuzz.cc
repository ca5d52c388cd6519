// libFuzzer target: the checkpoint manifest parser, and the scaling record
// that --resume reads from an accepted manifest (tests/fuzz/parsers.h).
// fuzz/README.md.
#include "fuzz_one.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hydrozoa::fuzz::fuzzOne(hydrozoa::fuzz::parseManifest, data, size);
  return hydrozoa::fuzz::fuzzOne(hydrozoa::fuzz::parseScalingRecord, data, size);
}
