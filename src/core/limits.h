// The accepted range of every count and size a user or a peer can give, in
// one place, and arithmetic on them that cannot overflow.
//
// Counts are parsed into std::int64_t and checked against these ranges
// before anything narrows them to int or divides by them (parseCount,
// ObjectReader::integer). The ranges are generous for real jobs and small
// enough that products of two of them (A·B, M·m, M·bytes with bytes below
// kMaxBytes) stay far from 2^63; checkedMul and saturatingMul cover the
// products that are not bounded that way.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace hydrozoa {

struct Range {
  std::int64_t min, max;
};

// Workers, data-parallel replicas and pipeline stages.
constexpr Range kWorkersRange{1, 65536};
// Samples: global batch, microbatch size, dataset sizes.
constexpr Range kSamplesRange{1, std::int64_t{1} << 30};
// Microbatches per iteration.
constexpr Range kMicrobatchesRange{1, std::int64_t{1} << 20};
// Epochs, steps and other counts of iterations.
constexpr Range kStepsRange{1, std::int64_t{1} << 40};
// Compute threads per worker.
constexpr Range kThreadsRange{1, 4096};
// Layers in a model or profile.
constexpr Range kLayersRange{1, 1 << 20};
// Model chunks per pipeline stage (the interleaved schedule's v).
constexpr Range kChunksRange{1, 16};
// A size in bytes (1 PB): any one tensor, layer, worker or dataset.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 50;
// Arrays and objects inside each other in any JSON or YAML input (a job
// spec nests 4 deep, a profile 3): deeper input is refused before anything
// recurses over it.
constexpr int kMaxNesting = 64;
// The values a YAML document may expand to once its aliases are followed
// (a billion laughs is 10^9): far above any catalog, trace or spec.
constexpr std::int64_t kMaxYamlValues = 1'000'000;

inline bool inRange(std::int64_t v, Range r) { return v >= r.min && v <= r.max; }

// a·b, or nullopt when it does not fit in int64.
inline std::optional<std::int64_t> checkedMul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
inline std::optional<std::int64_t> checkedAdd(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a·b and a+b clamped to int64's range: for costs compared against a limit,
// where "more than any limit" is the right answer to an overflow.
inline std::int64_t saturatingMul(std::int64_t a, std::int64_t b) {
  if (auto v = checkedMul(a, b)) return *v;
  return (a < 0) != (b < 0) ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
}
inline std::int64_t saturatingAdd(std::int64_t a, std::int64_t b) {
  if (auto v = checkedAdd(a, b)) return *v;
  return a < 0 ? std::numeric_limits<std::int64_t>::min() : std::numeric_limits<std::int64_t>::max();
}

}  // namespace hydrozoa
