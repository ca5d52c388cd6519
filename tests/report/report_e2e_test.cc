// `hydrozoa report`, `show RUN_DIR` and the --json outputs end to end: the
// real binary trains two small runs (a fixed 2×2 pipeline, and AdaBatch from
// 1 to 2 replicas of it), reports them overlaid, and headless Chromium
// renders the page: the screenshot must be a real picture (not blank) and
// the page as Chromium parsed it must hold every run's series.
//
// Chromium (Debian's `chromium`) is required: scripts/setup installs it; a
// machine without it fails here with that message rather than skipping.
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "integration/harness.h"

namespace hydrozoa {
namespace {

using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

namespace fs = std::filesystem;

std::string smallJob(const std::string& name, const std::string& scaling) {
  return "name: " + name +
         "\n"
         "model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 96, synthetic_test: 48}\n"
         "training: {epochs: 3, global_batch: 24, seed: 5,\n"
         "           optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}\n"
         "cluster: {workers: 4, bandwidth: 1Gbit/s}\n"
         "plan: {data_parallel: 2, stages: 2, microbatches: 3}\n"
         "scaling: " + scaling + "\n";
}

// The first of Debian's and other distributions' names on $PATH, or "".
std::string findChromium() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t colon = dirs.find(':', start);
      const std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  return "";
}

// Runs headless Chromium on `html` with `args` (--screenshot=..., --dump-dom)
// from `dir`; its stdout goes to `out`. Returns the exit status.
int chromium(const std::string& binary, const std::string& dir, const std::string& html, const std::string& args,
             const std::string& out) {
  // Its own profile and HOME in the scratch directory: tests run in parallel
  // and HOME may not be writable.
  const std::string cmd = "cd '" + dir + "' && HOME='" + dir + "' timeout 60 '" + binary +
                          "' --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir='" + dir +
                          "/chromium-profile' --window-size=1200,2000 " + args + " 'file://" + html + "' > '" + out +
                          "' 2> '" + dir + "/chromium.log'";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A PNG's pixels as RGB; only what Chromium writes (8-bit RGB or RGBA, not
// interlaced). Empty on anything else.
struct Image {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint32_t> rgb;  // 0xRRGGBB per pixel
};

std::uint32_t bigEndian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

Image decodePng(const std::string& data) {
  Image img;
  static const unsigned char kSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (data.size() < 8 || std::memcmp(data.data(), kSignature, 8) != 0) return img;
  std::string idat;
  int depth = 0, color = 0, interlace = 0;
  for (size_t at = 8; at + 12 <= data.size();) {
    const auto* p = reinterpret_cast<const unsigned char*>(data.data() + at);
    const std::uint32_t length = bigEndian(p);
    const std::string type(data.data() + at + 4, 4);
    if (at + 12 + length > data.size()) return Image{};
    const char* body = data.data() + at + 8;
    if (type == "IHDR") {
      img.width = bigEndian(reinterpret_cast<const unsigned char*>(body));
      img.height = bigEndian(reinterpret_cast<const unsigned char*>(body + 4));
      depth = static_cast<unsigned char>(body[8]);
      color = static_cast<unsigned char>(body[9]);
      interlace = static_cast<unsigned char>(body[12]);
    } else if (type == "IDAT") {
      idat.append(body, length);
    }
    at += 12 + length;
  }
  if (depth != 8 || (color != 2 && color != 6) || interlace != 0 || img.width == 0) return Image{};
  const size_t bpp = color == 6 ? 4 : 3, stride = img.width * bpp;
  std::vector<unsigned char> raw((stride + 1) * img.height);
  uLongf rawSize = raw.size();
  if (::uncompress(raw.data(), &rawSize, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK ||
      rawSize != raw.size()) {
    return Image{};
  }
  std::vector<unsigned char> prev(stride, 0), line(stride);
  img.rgb.reserve(static_cast<size_t>(img.width) * img.height);
  for (std::uint32_t y = 0; y < img.height; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* in = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= bpp ? line[i - bpp] : 0, b = prev[i], c = i >= bpp ? prev[i - bpp] : 0;
      int predicted = 0;
      switch (filter) {
        case 1: predicted = a; break;
        case 2: predicted = b; break;
        case 3: predicted = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predicted = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: break;
      }
      line[i] = static_cast<unsigned char>(in[i] + predicted);
    }
    for (std::uint32_t x = 0; x < img.width; ++x) {
      const unsigned char* px = &line[x * bpp];
      img.rgb.push_back((std::uint32_t{px[0]} << 16) | (std::uint32_t{px[1]} << 8) | px[2]);
    }
    prev.swap(line);
  }
  return img;
}

bool hasSeries(const std::string& html, const std::string& run, const std::string& series) {
  return html.find("data-run=\"" + run + "\" data-series=\"" + series + "\"") != std::string::npos;
}

TEST(Report, TwoRealRunsOverlaidRenderInChromiumWithEverySeries) {
  const std::string browser = findChromium();
  ASSERT_FALSE(browser.empty()) << "chromium is not installed: the report test renders the page with headless "
                                   "Chromium; install Debian's package `chromium` (scripts/setup does)";
  ScratchDir dir;
  const std::string cwd = dir.path().string();
  std::ofstream(dir / "fixed.yaml") << smallJob("fixed", "fixed");
  std::ofstream(dir / "scaled.yaml") << smallJob("scaled", "{policy: adabatch, min_replicas: 1, max_replicas: 2}");
  for (const char* name : {"fixed", "scaled"}) {
    const Outcome r = runHydrozoa(cwd, {"train", std::string(name) + ".yaml", "--launcher", "local", "--no-progress",
                                        "--out", std::string("runs/") + name});
    ASSERT_EQ(r.code, 0) << name << ": " << r.err;
  }

  // One run: its report beside its files.
  Outcome r = runHydrozoa(cwd, {"report", "runs/fixed"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "runs/fixed/report.html"));
  EXPECT_NE(r.out.find("Wrote runs/fixed/report.html (1 run)"), std::string::npos) << r.out;

  // Both overlaid, with their data as JSON.
  r = runHydrozoa(cwd, {"report", "runs/fixed", "runs/scaled", "-o", "both.html", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto json = parseJson(r.out, "report --json");
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ((*json)["output"], "both.html");
  ASSERT_EQ((*json)["runs"].size(), 2u);
  EXPECT_EQ((*json)["runs"][0]["steps"].size(), 12u);  // 3 epochs of 4 steps
  EXPECT_EQ((*json)["runs"][0]["evals"].size(), 3u);
  EXPECT_EQ((*json)["runs"][0]["stages"].size(), 2u);
  EXPECT_GT((*json)["runs"][0]["stages"][1]["measured_compute_seconds"].get<double>(), 0);
  bool scaled = false;
  for (const auto& e : (*json)["runs"][1]["events"]) scaled |= e["event"] == "scaled";
  EXPECT_TRUE(scaled) << (*json)["runs"][1]["events"].dump();

  const std::string page = testing::slurp(dir / "both.html");
  for (const char* run : {"fixed", "scaled"}) {
    for (const char* series : {"loss", "test_accuracy", "samples_per_s", "workers", "cost_usd",
                               "stage_compute_predicted", "stage_compute_measured"}) {
      EXPECT_TRUE(hasSeries(page, run, series)) << run << " " << series;
    }
  }
  EXPECT_NE(page.find("1 \u2192 2 replicas"), std::string::npos);

  // Chromium parses it (every run's series in its DOM) and draws it.
  const std::string html = (dir / "both.html");
  ASSERT_EQ(chromium(browser, cwd, html, "--dump-dom", dir / "dom.html"), 0) << testing::slurp(dir / "chromium.log");
  const std::string dom = testing::slurp(dir / "dom.html");
  for (const char* run : {"fixed", "scaled"}) {
    for (const char* series : {"loss", "test_accuracy", "samples_per_s", "workers", "cost_usd"}) {
      EXPECT_TRUE(hasSeries(dom, run, series)) << "not in Chromium's DOM: " << run << " " << series;
    }
  }
  const std::string png = dir / "report.png";
  ASSERT_EQ(chromium(browser, cwd, html, "--screenshot=" + png, dir / "chromium.out"), 0)
      << testing::slurp(dir / "chromium.log");
  ASSERT_TRUE(fs::exists(png)) << "no screenshot; Chromium said: " << testing::slurp(dir / "chromium.log");
  const Image img = decodePng(testing::slurp(png));
  ASSERT_EQ(img.width, 1200u);
  ASSERT_EQ(img.height, 2000u);
  std::unordered_set<std::uint32_t> colors(img.rgb.begin(), img.rgb.end());
  const std::uint32_t background = img.rgb.front();
  const size_t drawn = static_cast<size_t>(
      std::count_if(img.rgb.begin(), img.rgb.end(), [&](std::uint32_t c) { return c != background; }));
  EXPECT_GE(colors.size(), 50u) << "a blank or nearly blank screenshot";
  EXPECT_GT(drawn, img.rgb.size() / 50) << "under 2% of the screenshot differs from its background";
  // Both runs' colours are on screen (the time charts are in the first 2000 pixels).
  EXPECT_TRUE(colors.count(0x4e79a7)) << "the first run's colour is not drawn";
  EXPECT_TRUE(colors.count(0xe15759)) << "the second run's colour is not drawn";
}

TEST(Report, ShowSumsUpARunAndEveryJsonOutputParses) {
  ScratchDir dir;
  const std::string cwd = dir.path().string();
  std::ofstream(dir / "job.yaml") << smallJob("one", "fixed");
  Outcome r = runHydrozoa(cwd, {"train", "job.yaml", "--launcher", "local", "--no-progress", "--max-steps", "5",
                                "--out", "runs/one"});
  ASSERT_EQ(r.code, 0) << r.err;

  r = runHydrozoa(cwd, {"show", "runs/one"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"Run runs/one", "status", "stopped", "2×2 (2 replicas × 2 stages)", "5 of 12", "step time",
                        "Time per step by stage", "Chosen: 2×2"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  r = runHydrozoa(cwd, {"show", "runs/one", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = parseJson(r.out, "show --json");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ((*j)["steps"].size(), 5u);
  EXPECT_EQ((*j)["status"], "stopped");

  r = runHydrozoa(cwd, {"show", "runs/one/plan.json", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = parseJson(r.out, "show plan --json");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ((*j)["strategy"]["pipeline_stages"], 2);

  r = runHydrozoa(cwd, {"models", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = parseJson(r.out, "models --json");
  ASSERT_TRUE(j.ok()) << j.status().message();
  ASSERT_TRUE(j->is_array());
  bool resnet34 = false;
  for (const auto& m : *j) resnet34 |= m["name"] == "resnet34" && m["parameters"].get<double>() > 21e6;
  EXPECT_TRUE(resnet34) << r.out.substr(0, 400);

  r = runHydrozoa(cwd, {"plan", "--model", "cnn", "--device", "k80", "--workers", "4", "--global-batch", "64",
                        "-o", "-", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = parseJson(r.out, "plan --json");
  ASSERT_TRUE(j.ok()) << j.status().message() << "\n" << r.out.substr(0, 400);
  EXPECT_EQ((*j)["schema"], "hydrozoa.plan/1");
  EXPECT_FALSE((*j)["alternatives"].empty());
  EXPECT_FALSE(fs::exists(dir / "plan.json"));  // -o -

  // Not a run directory: one line saying what it is and what was expected.
  r = runHydrozoa(cwd, {"report", "runs/one/summary.json"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("hydrozoa: error: runs/one/summary.json is a file of a run directory; give the directory: "
                       "runs/one"),
            std::string::npos)
      << r.err;
  r = runHydrozoa(cwd, {"report", "nowhere"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("nowhere: no such directory; expected a run directory"), std::string::npos) << r.err;
  fs::create_directories(dir / "empty");
  r = runHydrozoa(cwd, {"show", "empty"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("empty is a directory but not a run directory"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hydrozoa
