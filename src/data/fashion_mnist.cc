// Fashion-MNIST from the IDX files of Debian's dataset-fashion-mnist
// package (gzip-compressed: train-images-idx3-ubyte.gz, ...).
#include <fmt/format.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "data/datasets.h"

namespace hydrozoa::data {
namespace {

std::uint32_t bigEndian(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
}

// The whole decompressed file.
Result<std::vector<unsigned char>> readGz(const std::string& path, const std::string& hint) {
  if (!std::filesystem::exists(path)) return notFound(fmt::format("data.path: {} does not exist ({})", path, hint));
  gzFile f = ::gzopen(path.c_str(), "rb");
  if (!f) return ioError(fmt::format("{}: cannot open", path));
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n = 0;
  while ((n = ::gzread(f, buf, sizeof(buf))) > 0) out.insert(out.end(), buf, buf + n);
  int err = Z_OK;
  const char* message = ::gzerror(f, &err);
  ::gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    return parseError(fmt::format("{}: corrupt or truncated gzip data ({})", path, message));
  }
  return out;
}

// An IDX file: magic (0x0000 08 <dims>), big-endian sizes, then the bytes.
Result<torch::Tensor> readIdx(const std::string& path, int dims, const std::string& hint) {
  HZ_ASSIGN_OR_RETURN(std::vector<unsigned char> bytes, readGz(path, hint));
  if (bytes.size() < 4) return parseError(fmt::format("{}: too short for an IDX file (truncated?)", path));
  const std::uint32_t magic = bigEndian(bytes.data());
  if (magic != (0x800u | static_cast<std::uint32_t>(dims))) {
    return parseError(fmt::format("{}: not an IDX file of {} dimensions (magic 0x{:08x})", path, dims, magic));
  }
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) return parseError(fmt::format("{}: too short for an IDX header (truncated?)", path));
  std::vector<std::int64_t> shape;
  std::int64_t count = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(bigEndian(bytes.data() + 4 + 4 * d));
    count *= shape.back();
  }
  if (bytes.size() - header != static_cast<size_t>(count)) {
    return parseError(fmt::format("{}: holds {} of {} data bytes (truncated?)", path, bytes.size() - header, count));
  }
  torch::Tensor t = torch::empty(shape, torch::kUInt8);
  std::memcpy(t.data_ptr(), bytes.data() + header, static_cast<size_t>(count));
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
