// Checkpoint files over the control plane (wire/file_transfer.h): a file
// shipped in chunks and fetched back arrives byte for byte over a real
// ZeroMQ connection, and everything a hostile or broken worker could send
// (paths, other files, other stages' layers, chunks out of order or past the
// size, bad hex) is refused without writing under a layer's name.
#include "wire/file_transfer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "wire/control.h"
#include "wire/store.h"

namespace hydrozoa::wire {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  Scratch() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("hz-files-" + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~Scratch() { fs::remove_all(path); }
  fs::path path;
};

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string randomBytes(std::size_t n) {
  std::mt19937 gen(7);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen());
  return s;
}

bool anyLayer(int) { return true; }

TEST(FileTransfer, LayerFileNamesAndNothingElse) {
  EXPECT_EQ(layerOfFileName("layer-0000.pt"), 0);
  EXPECT_EQ(layerOfFileName("layer-0017.pt"), 17);
  for (const char* bad : {"layer-17.pt", "layer-00017.pt", "../layer-0001.pt", "layer-0001.pt/..", "layer-00a1.pt",
                          "manifest.json", "latest", "", "layer-0001.ptx", "/etc/passwd"}) {
    EXPECT_EQ(layerOfFileName(bad), -1) << bad;
  }
}

TEST(FileTransfer, AFileShippedAndFetchedBackOverARealConnectionIsTheSame) {
  Scratch dir;
  const std::string bytes = randomBytes(3 * kUploadChunk + 123);  // several chunks and a short last one
  fs::create_directories(dir.path / "worker");
  std::ofstream(dir.path / "worker" / "layer-0003.pt", std::ios::binary) << bytes;
  std::ofstream(dir.path / "worker" / "layer-0004.pt", std::ios::binary);  // empty: one chunk all the same

  auto server = ControlServer::bind("127.0.0.1", 0, "tok");
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto client = ControlClient::connect((*server)->endpoint(), "w0", (*server)->credential("tok"));
  ASSERT_TRUE(client.ok()) << client.status().message();
  ASSERT_TRUE(sendFile(**client, {{"step", 5}}, (dir.path / "worker" / "layer-0003.pt").string()).ok());
  ASSERT_TRUE(sendFile(**client, {{"step", 5}}, (dir.path / "worker" / "layer-0004.pt").string()).ok());
  const std::string partial = (dir.path / "coordinator").string();
  int chunks = 0;
  while (!fs::exists(partial + "/layer-0004.pt")) {
    std::string from;
    Json m;
    ASSERT_TRUE((*server)->receive(&from, &m, 5000)) << "chunks stopped after " << chunks;
    ASSERT_TRUE(checkWorkerMessage(m).ok()) << checkWorkerMessage(m).message();
    EXPECT_EQ(m["step"], 5);
    ASSERT_TRUE(acceptChunk(m, partial, anyLayer).ok());
    ++chunks;
  }
  EXPECT_EQ(chunks, 5);
  EXPECT_EQ(readAll(partial + "/layer-0003.pt"), bytes);
  EXPECT_TRUE(fs::is_empty(partial + "/layer-0004.pt"));
  EXPECT_FALSE(fs::exists(partial + "/layer-0003.pt.part"));

  // And back, in 1 MiB replies, answered by the server's loop.
  std::thread answer([&] {
    for (int served = 0; served < 2;) {
      std::string from;
      Json m;
      if (!(*server)->receive(&from, &m, 5000)) return;
      auto reply = serveFetch(m, partial, anyLayer);
      ASSERT_TRUE(reply.ok()) << reply.status().message();
      (*server)->send(from, *reply);
      if ((*reply)["offset"].get<std::int64_t>() + kDownloadChunk >= (*reply)["size"].get<std::int64_t>()) ++served;
    }
  });
  const std::string back = (dir.path / "back.pt").string();
  auto keepGoing = [](const Json&) { return true; };
  EXPECT_TRUE(fetchFile(**client, {{"stage", 1}}, "layer-0003.pt", back, keepGoing).ok());
  EXPECT_TRUE(fetchFile(**client, {{"stage", 1}}, "layer-0004.pt", back + "4", keepGoing).ok());
  answer.join();
  EXPECT_EQ(readAll(back), bytes);
  EXPECT_TRUE(fs::is_empty(back + "4"));
}

Json chunk(const std::string& file, std::int64_t offset, std::int64_t size, const std::string& data) {
  return {{"type", "file_chunk"}, {"step", 1}, {"file", file}, {"offset", offset}, {"size", size},
          {"data", toHex(data)}};
}

TEST(FileTransfer, HostileChunksAreRefusedAndNothingLandsUnderALayersName) {
  Scratch dir;
  const std::string d = dir.path.string();
  auto stageOne = [](int layer) { return layer >= 1 && layer <= 2; };
  struct Case {
    Json chunk;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {chunk("../layer-0001.pt", 0, 3, "abc"), "not a checkpoint's layer file"},
      {chunk("manifest.json", 0, 3, "abc"), "not a checkpoint's layer file"},
      {chunk("layer-0007.pt", 0, 3, "abc"), "not in the sender's stage"},
      {chunk("layer-0001.pt", 0, 2, "abc"), "does not fit its size"},
      {chunk("layer-0001.pt", 0, kMaxFileBytes + 1, "abc"), "at most"},
      {chunk("layer-0001.pt", 5, 10, "abc"), "arrived before it"},
      {chunk("layer-0001.pt", 0, 10, ""), "does not fit its size"},
  };
  for (const Case& c : cases) {
    const Status s = acceptChunk(c.chunk, d, stageOne);
    ASSERT_FALSE(s.ok()) << c.chunk.dump();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  }
  Json notHex = chunk("layer-0001.pt", 0, 3, "abc");
  notHex["data"] = "zz";
  EXPECT_FALSE(acceptChunk(notHex, d, stageOne).ok());
  Json tooBig = chunk("layer-0001.pt", 0, 3 * kUploadChunk, std::string(2 * kUploadChunk, 'x'));
  EXPECT_NE(acceptChunk(tooBig, d, stageOne).message().find("at most"), std::string::npos);
  // A file in progress is only ever a .part.
  ASSERT_TRUE(acceptChunk(chunk("layer-0001.pt", 0, 6, "abc"), d, stageOne).ok());
  EXPECT_FALSE(fs::exists(d + "/layer-0001.pt"));
  ASSERT_TRUE(acceptChunk(chunk("layer-0001.pt", 3, 6, "def"), d, stageOne).ok());
  EXPECT_EQ(readAll(d + "/layer-0001.pt"), "abcdef");
  EXPECT_FALSE(fs::exists(dir.path.parent_path() / "layer-0001.pt"));

  // A link planted where the .part goes is never written through: the
  // first chunk replaces it with a new file; a later one refuses it.
  const std::string outside = (dir.path.parent_path() / ("outside-" + std::to_string(::getpid()))).string();
  { std::ofstream(outside) << "precious"; }
  fs::create_symlink(outside, d + "/layer-0002.pt.part");
  ASSERT_TRUE(acceptChunk(chunk("layer-0002.pt", 0, 6, "abc"), d, stageOne).ok());
  EXPECT_FALSE(fs::is_symlink(d + "/layer-0002.pt.part"));
  fs::remove(d + "/layer-0002.pt.part");
  fs::create_symlink(outside, d + "/layer-0002.pt.part");
  EXPECT_FALSE(acceptChunk(chunk("layer-0002.pt", 3, 6, "def"), d, stageOne).ok());
  EXPECT_EQ(readAll(outside), "precious");
  fs::remove(d + "/layer-0002.pt.part");
  fs::remove(outside);

  // Fetches: only the stage's own layers, only inside the file.
  auto r = serveFetch({{"file", "layer-0001.pt"}, {"offset", 7}}, d, stageOne);
  EXPECT_FALSE(r.ok());
  r = serveFetch({{"file", "layer-0002.pt"}, {"offset", 0}}, d, stageOne);
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  r = serveFetch({{"file", "layer-0003.pt"}, {"offset", 0}}, d, stageOne);
  EXPECT_NE(r.status().message().find("not in the sender's stage"), std::string::npos);
  r = serveFetch({{"file", "../../etc/passwd"}, {"offset", 0}}, d, anyLayer);
  EXPECT_FALSE(r.ok());
  r = serveFetch({{"file", "layer-0001.pt"}, {"offset", 2}}, d, stageOne);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["data"], toHex("cdef"));
}

TEST(FileTransfer, TheLocalAddressTowardAHost) {
  EXPECT_EQ(*localAddressToward("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(*localAddressToward("tcp://127.0.0.1:5555"), "127.0.0.1");
  EXPECT_FALSE(localAddressToward("no-such-host.invalid").ok());
}

}  // namespace
}  // namespace hydrozoa::wire
