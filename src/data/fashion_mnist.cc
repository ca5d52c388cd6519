// Fashion-MNIST from the IDX files of Debian's dataset-fashion-mnist
// package (gzip-compressed: train-images-idx3-ubyte.gz, ...).
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/limits.h"
#include "core/status.h"
#include "data/datasets.h"

namespace hydrozoa::data {
namespace {

std::uint32_t bigEndian(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

// Reads up to `n` bytes; fewer only at the end of the data.
Result<size_t> gzReadFully(gzFile f, unsigned char* out, size_t n, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
    const int r = ::gzread(f, out + got, chunk);
    if (r < 0) {
      int err = Z_OK;
      return parseError(fmt::format("{}: corrupt or truncated gzip data ({})", path, ::gzerror(f, &err)));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

// An IDX file: magic (0x0000 08 <dims>), big-endian sizes, then the bytes.
// NOTE [Decompressing into the tensor]: the data bytes are decompressed
// straight into the tensor that keeps them, sized from the header, so
// loading holds them once: through a growing buffer copied into the tensor,
// a worker's peak resident memory was ~40 MB above what it kept (the
// 47 MB of training images, then the buffer's freed steps in glibc's heap),
// memory that the plan does not count. The header's size is checked against
// what a gzip file of this size can hold (zlib's best ratio is about
// 1032:1) before anything is allocated, and the file must end where the
// header says.
Result<torch::Tensor> readIdx(const std::string& path, int dims, const std::string& hint) {
  if (!std::filesystem::exists(path)) return notFound(fmt::format("data.path: {} does not exist ({})", path, hint));
  std::error_code ec;
  const auto compressed = std::filesystem::file_size(path, ec);
  if (ec) return ioError(fmt::format("{}: cannot read its size ({})", path, ec.message()));
  gzFile f = ::gzopen(path.c_str(), "rb");
  if (!f) return ioError(fmt::format("{}: cannot open", path));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, ::gzclose);
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  unsigned char head[4 + 4 * 4];
  HZ_CHECK(header <= sizeof(head));
  HZ_ASSIGN_OR_RETURN(size_t got, gzReadFully(f, head, 4, path));
  if (got < 4) return parseError(fmt::format("{}: too short for an IDX file (truncated?)", path));
  const std::uint32_t magic = bigEndian(head);
  if (magic != (0x800u | static_cast<std::uint32_t>(dims))) {
    return parseError(fmt::format("{}: not an IDX file of {} dimensions (magic 0x{:08x})", path, dims, magic));
  }
  HZ_ASSIGN_OR_RETURN(got, gzReadFully(f, head + 4, header - 4, path));
  if (got < header - 4) return parseError(fmt::format("{}: too short for an IDX header (truncated?)", path));
  std::vector<std::int64_t> shape;
  std::int64_t count = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(bigEndian(head + 4 + 4 * d));
    count = saturatingMul(count, shape.back());
  }
  const std::int64_t most = saturatingMul(static_cast<std::int64_t>(compressed), 1100);
  if (count > most) {
    return parseError(fmt::format("{}: its header declares {} data bytes, more than a gzip file of {} bytes can hold "
                                  "(corrupt?)",
                                  path, count, compressed));
  }
  torch::Tensor t = torch::empty(shape, torch::kUInt8);
  HZ_ASSIGN_OR_RETURN(got, gzReadFully(f, t.data_ptr<unsigned char>(), static_cast<size_t>(count), path));
  unsigned char extra = 0;
  HZ_ASSIGN_OR_RETURN(size_t more, gzReadFully(f, &extra, 1, path));
  if (got != static_cast<size_t>(count)) {
    return parseError(fmt::format("{}: holds {} of {} data bytes (truncated?)", path, got, count));
  }
  if (more != 0) {
    return parseError(fmt::format("{}: holds more than the {} data bytes its header declares (corrupt?)", path, count));
  }
  return t;
}

}  // namespace

Result<std::shared_ptr<const Dataset>> openFashionMnist(const std::string& dir, Split split) {
  const std::string hint = "install the dataset-fashion-mnist package, or set data.path to a directory with the "
                           "Fashion-MNIST .gz files";
  if (!std::filesystem::is_directory(dir)) return notFound(fmt::format("data.path: {} is not a directory ({})", dir, hint));
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  HZ_ASSIGN_OR_RETURN(torch::Tensor images, readIdx(dir + "/" + prefix + "-images-idx3-ubyte.gz", 3, hint));
  HZ_ASSIGN_OR_RETURN(torch::Tensor labels, readIdx(dir + "/" + prefix + "-labels-idx1-ubyte.gz", 1, hint));
  if (images.size(0) != labels.size(0)) {
    return parseError(fmt::format("{}: {} images but {} labels", dir, images.size(0), labels.size(0)));
  }
  if (labels.max().item<int>() > 9) return parseError(fmt::format("{}: labels beyond the 10 classes", dir));
  const auto n = images.size(0);
  return std::shared_ptr<const Dataset>(new ImageDataset(
      images.view({n, 1, images.size(1), images.size(2)}), labels.to(torch::kLong), {0.2860f}, {0.3530f}, 10,
      fmt::format("Fashion-MNIST {} ({} samples) from {}", split == Split::kTrain ? "train" : "test", n, dir)));
}

}  // namespace hydrozoa::data
