// Tags of the point-to-point messages between stages. Messages with equal
// (peer, tag) arrive in the order sent; distinct transfers have distinct
// tags, so a receive may be posted before or after others.
//
// A training transfer is keyed by what it carries, the microbatch, the edge
// between virtual stages it crosses (its chunk index: edge / stages) and the
// step modulo 4, so that the transfers of consecutive steps never share a
// tag and an asynchronous schedule's steps may overlap. Bits: 0 payload,
// 1–20 microbatch (kMicrobatchesRange), 21–24 chunk, 25–26 step; an
// asynchronous schedule's drain word (bit 27, with the step's bits),
// evaluation and the shape exchange sit above (bits 28, 29).
#pragma once

#include <cstdint>

#include "core/limits.h"

namespace hydrozoa::runtime {

inline constexpr int kMaxChunks = static_cast<int>(kChunksRange.max);  // 4 bits of the tag

inline int transferTag(bool gradient, int microbatch, int chunk, std::int64_t step) {
  return (gradient ? 1 : 0) | microbatch << 1 | chunk << 21 | static_cast<int>(step & 3) << 25;
}
inline int drainTag(std::int64_t step) { return 1 << 27 | static_cast<int>(step & 3) << 25; }
inline int evalTag(int microbatch, int chunk) { return 1 << 28 | microbatch << 1 | chunk << 21; }
inline int shapeTag(int chunk) { return 1 << 29 | chunk << 21; }

}  // namespace hydrozoa::runtime
