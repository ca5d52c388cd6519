#include "wire/file_transfer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "wire/control.h"
#include "wire/store.h"

namespace hydrozoa::wire {
namespace {

std::int64_t countField(const Json& m, const char* key) {
  const auto it = m.find(key);
  if (it == m.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) return -1;
  return it->get<std::int64_t>();
}

std::string textField(const Json& m, const char* key) {
  const auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : "";
}

// The file a chunk or a fetch names, checked: a layer file the sender may touch.
Result<std::string> checkedFile(const Json& m, const std::function<bool(int)>& allowed) {
  const std::string file = textField(m, "file");
  const int layer = layerOfFileName(file);
  if (layer < 0) {
    return invalidArgument(fmt::format("\"{}\" is not a checkpoint's layer file (layer-NNNN.pt)", file.substr(0, 60)));
  }
  if (!allowed(layer)) return invalidArgument(fmt::format("{}: layer {} is not in the sender's stage", file, layer));
  return file;
}

}  // namespace

int layerOfFileName(const std::string& name) {
  // Exactly "layer-" + 4 digits + ".pt".
  if (name.size() != 13 || name.compare(0, 6, "layer-") != 0 || name.compare(10, 3, ".pt") != 0) return -1;
  int layer = 0;
  for (int i = 6; i < 10; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    layer = layer * 10 + (name[i] - '0');
  }
  return layer;
}

Status sendFile(ControlClient& control, const Json& header, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ioError(fmt::format("{}: cannot read it to send: {}", path, std::strerror(errno)));
  struct stat st {};
  ::fstat(fd, &st);
  const std::int64_t size = st.st_size;
  const std::string name = std::filesystem::path(path).filename().string();
  std::string buffer(static_cast<std::size_t>(kUploadChunk), '\0');
  std::int64_t offset = 0;
  do {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (n < 0 || (n == 0 && offset < size)) {
      ::close(fd);
      return ioError(fmt::format("{}: cannot read it to send: {}", path, n < 0 ? std::strerror(errno) : "truncated"));
    }
    Json chunk = header;
    chunk["type"] = "file_chunk";
    chunk["file"] = name;
    chunk["offset"] = offset;
    chunk["size"] = size;
    chunk["data"] = toHex(buffer.substr(0, static_cast<std::size_t>(n)));
    control.send(std::move(chunk));
    offset += n;
  } while (offset < size);
  ::close(fd);
  return Status();
}

Status fetchFile(ControlClient& control, const Json& request, const std::string& file, const std::string& dest,
                 const std::function<bool(const Json&)>& other, double timeoutSeconds) {
  const std::string part = dest + ".part";
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ioError(fmt::format("{}: cannot write the fetched file: {}", part, std::strerror(errno)));
  std::int64_t offset = 0, size = -1;
  Status failed;
  while (failed.ok() && offset != size) {
    Json ask = request;
    ask["type"] = "fetch";
    ask["file"] = file;
    ask["offset"] = offset;
    control.send(std::move(ask));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    Json reply;
    for (;;) {
      if (std::chrono::steady_clock::now() > deadline) {
        failed = unavailable(fmt::format("{}: no answer from the coordinator within {:.0f} s", file, timeoutSeconds));
        break;
      }
      if (!control.receive(&reply, 1000)) continue;
      const std::string type = textField(reply, "type");
      if (type == "fetch_failed" && textField(reply, "file") == file) {
        failed = unavailable(fmt::format("the coordinator cannot send {}: {}", file, textField(reply, "message")));
        break;
      }
      if (type == "file_data" && textField(reply, "file") == file && countField(reply, "offset") == offset) break;
      if (!other(reply)) {
        failed = unavailable(fmt::format("stopped while fetching {}", file));
        break;
      }
    }
    if (!failed.ok()) break;
    std::string bytes;
    size = countField(reply, "size");
    if (size < 0 || size > kMaxFileBytes || !fromHex(textField(reply, "data"), &bytes) ||
        offset + static_cast<std::int64_t>(bytes.size()) > size || (bytes.empty() && offset < size)) {
      failed = invalidArgument(fmt::format("{}: a malformed reply from the coordinator", file));
      break;
    }
    if (::pwrite(fd, bytes.data(), bytes.size(), offset) != static_cast<ssize_t>(bytes.size())) {
      failed = ioError(fmt::format("{}: cannot write the fetched file: {}", part, std::strerror(errno)));
      break;
    }
    offset += static_cast<std::int64_t>(bytes.size());
  }
  ::close(fd);
  if (failed.ok() && std::rename(part.c_str(), dest.c_str()) != 0) {
    failed = ioError(fmt::format("{}: cannot rename the fetched file: {}", dest, std::strerror(errno)));
  }
  if (!failed.ok()) std::remove(part.c_str());
  return failed;
}

Status acceptChunk(const Json& chunk, const std::string& dir, const std::function<bool(int)>& allowed) {
  HZ_ASSIGN_OR_RETURN(const std::string file, checkedFile(chunk, allowed));
  const std::int64_t offset = countField(chunk, "offset"), size = countField(chunk, "size");
  if (offset < 0 || size < 0 || size > kMaxFileBytes) {
    return invalidArgument(fmt::format("{}: offset and size must be whole numbers, the size at most {} bytes", file,
                                       kMaxFileBytes));
  }
  const std::string hex = textField(chunk, "data");
  std::string bytes;
  if (hex.size() > 2 * static_cast<std::size_t>(kUploadChunk) || !fromHex(hex, &bytes)) {
    return invalidArgument(fmt::format("{}: \"data\" must be at most {} bytes as hex", file, kUploadChunk));
  }
  const std::int64_t end = offset + static_cast<std::int64_t>(bytes.size());
  if (end > size || (bytes.empty() && end < size)) {
    return invalidArgument(fmt::format("{}: a chunk of {} bytes at {} does not fit its size {}", file, bytes.size(),
                                       offset, size));
  }
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec)) ::chmod(dir.c_str(), 0700);  // the directory it made: private
  const std::string part = dir + "/" + file + ".part";
  struct stat st {};
  const std::int64_t have = ::lstat(part.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
  if (offset != 0 && offset != have) {
    return invalidArgument(fmt::format("{}: a chunk at {} but {} bytes arrived before it", file, offset, have));
  }
  // The first chunk starts the file afresh (a worker that saves a step
  // again): whatever was there, a link included, goes, and the file is
  // made new (O_EXCL); later chunks never follow a link (O_NOFOLLOW).
  if (offset == 0) ::unlink(part.c_str());
  const int fd = ::open(part.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (offset == 0 ? O_CREAT | O_EXCL : 0), 0600);
  if (fd < 0) return ioError(fmt::format("{}: cannot write: {}", part, std::strerror(errno)));
  const bool wrote = ::pwrite(fd, bytes.data(), bytes.size(), offset) == static_cast<ssize_t>(bytes.size());
  ::close(fd);
  if (!wrote) return ioError(fmt::format("{}: cannot write: {}", part, std::strerror(errno)));
  if (end == size && std::rename(part.c_str(), (dir + "/" + file).c_str()) != 0) {
    return ioError(fmt::format("{}: cannot rename it into place: {}", part, std::strerror(errno)));
  }
  return Status();
}

Result<Json> serveFetch(const Json& request, const std::string& dir, const std::function<bool(int)>& allowed) {
  HZ_ASSIGN_OR_RETURN(const std::string file, checkedFile(request, allowed));
  const std::int64_t offset = countField(request, "offset");
  const std::string path = dir + "/" + file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return notFound(fmt::format("{}: {}", path, std::strerror(errno)));
  struct stat st {};
  ::fstat(fd, &st);
  const std::int64_t size = st.st_size;
  if (offset < 0 || offset > size) {
    ::close(fd);
    return invalidArgument(fmt::format("{}: offset {} is outside its {} bytes", file, offset, size));
  }
  std::string bytes(static_cast<std::size_t>(std::min(kDownloadChunk, size - offset)), '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), offset);
  ::close(fd);
  if (n != static_cast<ssize_t>(bytes.size())) return ioError(fmt::format("{}: cannot read it", path));
  return Json{{"type", "file_data"}, {"file", file}, {"offset", offset}, {"size", size}, {"data", toHex(bytes)}};
}

}  // namespace hydrozoa::wire
