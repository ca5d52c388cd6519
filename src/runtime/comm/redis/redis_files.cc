#include "runtime/comm/redis/redis_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

namespace hydrozoa::runtime::redis {

namespace {

constexpr int kWindow = 8;  // chunks in flight, as the transport's

}  // namespace

Result<Bytes> putFile(Connection& c, const std::string& key, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ioError(fmt::format("{}: cannot read it: {}", path, std::strerror(errno)));
  HZ_RETURN_IF_ERROR(c.run({"UNLINK", key}).status());
  // Chunks are copied into the connection's buffer as they are queued; the
  // last is shorter than kFileChunk (empty for a file of whole chunks).
  std::string chunk;
  Bytes total = 0;
  for (bool last = false; !last;) {
    int queued = 0;
    for (; queued < kWindow && !last; ++queued) {
      chunk.resize(static_cast<size_t>(kFileChunk));
      in.read(chunk.data(), kFileChunk);
      if (in.bad()) return ioError(fmt::format("{}: cannot read it: {}", path, std::strerror(errno)));
      chunk.resize(static_cast<size_t>(in.gcount()));
      last = static_cast<Bytes>(chunk.size()) < kFileChunk;
      c.append({"RPUSH", key, chunk});
      total += static_cast<Bytes>(chunk.size());
    }
    for (int i = 0; i < queued; ++i) HZ_RETURN_IF_ERROR(c.next().status());
  }
  return total;
}

Status getFile(Connection& c, const std::string& key, const std::string& dest, Bytes expected, Bytes maxBytes) {
  HZ_ASSIGN_OR_RETURN(Reply n, c.run({"LLEN", key}));
  const std::int64_t count = n.integer();
  if (count == 0) return notFound(fmt::format("{} holds no {} (deleted or never written)", c.address().url(), key));
  const Bytes bound = expected >= 0 ? std::min(expected, maxBytes) : maxBytes;
  if (count - 1 > bound / kFileChunk) {
    return invalidArgument(fmt::format("{} in {} has {} chunks, more than {} bytes can be", key, c.address().url(),
                                       count, bound));
  }
  const std::string part = dest + ".part";
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  if (!out) return ioError(fmt::format("{}: cannot write it: {}", part, std::strerror(errno)));
  auto fail = [&](Status s) {
    out.close();
    std::remove(part.c_str());
    return s;
  };
  Bytes total = 0;
  for (std::int64_t first = 0; first < count; first += kWindow) {
    const std::int64_t last = std::min<std::int64_t>(count, first + kWindow);
    std::vector<std::string> at;
    for (std::int64_t i = first; i < last; ++i) at.push_back(std::to_string(i));
    for (const std::string& i : at) c.append({"LINDEX", key, i});
    for (std::int64_t i = first; i < last; ++i) {
      auto r = c.next();
      if (!r.ok()) return fail(r.status());
      if (r->type() != Reply::Type::kString) {
        return fail(notFound(fmt::format("{} lost chunk {} of {} while it was read", c.address().url(), i, key)));
      }
      const std::string_view data = r->str();
      total += static_cast<Bytes>(data.size());
      if (static_cast<Bytes>(data.size()) > kFileChunk || total > bound) {
        return fail(invalidArgument(fmt::format("{} in {} is larger than the {} bytes {}", key, c.address().url(),
                                                bound, bound == expected ? "announced" : "it can be")));
      }
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
    }
  }
  out.close();
  if (!out) return fail(ioError(fmt::format("{}: cannot write it: {}", part, std::strerror(errno))));
  if (expected >= 0 && total != expected) {
    return fail(invalidArgument(
        fmt::format("{} in {} has {} bytes where {} were announced", key, c.address().url(), total, expected)));
  }
  std::error_code ec;
  std::filesystem::rename(part, dest, ec);
  if (ec) return fail(ioError(fmt::format("{}: cannot rename it into place: {}", dest, ec.message())));
  return Status();
}

}  // namespace hydrozoa::runtime::redis
