// Files through the Redis channel: a function worker's checkpoint goes to
// the store it already reaches, and a fresh invocation reads it back from
// there (docs/functions.md, "Function workers"; NOTE [State through the
// store] in cluster/coordinator.cc). A file is one list of chunks of at most
// kFileChunk bytes, under one key.
#pragma once

#include <cstdint>
#include <string>

#include "core/units.h"
#include "core/status.h"
#include "runtime/comm/redis/redis_client.h"

namespace hydrozoa::runtime::redis {

constexpr std::int64_t kFileChunk = std::int64_t{1} << 20;

// Writes the file at `path` under `key` (replacing what was there); returns
// its size. A store that refuses it (full) is the error.
Result<Bytes> putFile(Connection& c, const std::string& key, const std::string& path);

// Reads `key` into `dest` (written as dest.part, renamed once complete).
// `expected` >= 0: the size it must have; at most `maxBytes` in any case.
// No such key: NotFound.
Status getFile(Connection& c, const std::string& key, const std::string& dest, Bytes expected, Bytes maxBytes);

}  // namespace hydrozoa::runtime::redis
