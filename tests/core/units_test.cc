#include "core/units.h"

#include <gtest/gtest.h>

namespace hydrozoa {
namespace {

TEST(ParseBytes, DecimalAndBinaryUnits) {
  EXPECT_EQ(*parseBytes("12GB", "--memory"), 12 * kGB);
  EXPECT_EQ(*parseBytes("12 gb", "--memory"), 12 * kGB);
  EXPECT_EQ(*parseBytes("1.5GiB", "--memory"), 3 * kGiB / 2);
  EXPECT_EQ(*parseBytes("512MB", "--memory"), 512 * kMB);
  EXPECT_EQ(*parseBytes("4096", "--memory"), 4096);
  EXPECT_EQ(*parseBytes("16KiB", "--memory"), 16 * 1024);
}

TEST(ParseBytes, UnknownUnitNamesTheUnitAndTheFlag) {
  auto r = parseBytes("12GX", "--memory");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--memory"), std::string::npos);
  EXPECT_NE(r.status().message().find("\"GX\""), std::string::npos);
  EXPECT_NE(r.status().message().find("12GB"), std::string::npos);  // suggests a valid form
}

TEST(ParseBytes, RejectsNegativeAndGarbage) {
  EXPECT_FALSE(parseBytes("-1GB", "x").ok());
  EXPECT_FALSE(parseBytes("GB", "x").ok());
  EXPECT_FALSE(parseBytes("", "x").ok());
}

TEST(ParseBandwidth, BitsAndBytes) {
  EXPECT_DOUBLE_EQ(*parseBandwidth("10Gbit/s", "b"), 1.25e9);
  EXPECT_DOUBLE_EQ(*parseBandwidth("10Gbps", "b"), 1.25e9);
  EXPECT_DOUBLE_EQ(*parseBandwidth("100Mb/s", "b"), 12.5e6);
  EXPECT_DOUBLE_EQ(*parseBandwidth("100MB/s", "b"), 100e6);
  EXPECT_DOUBLE_EQ(*parseBandwidth("1.25GB/s", "b"), 1.25e9);
  EXPECT_DOUBLE_EQ(*parseBandwidth("70MBps", "b"), 70e6);
  EXPECT_DOUBLE_EQ(*parseBandwidth("800 B/s", "b"), 800);
  EXPECT_DOUBLE_EQ(*parseBandwidth("8 bit/s", "b"), 1);
}

TEST(ParseBandwidth, UnknownUnitsAreErrors) {
  for (const char* bad : {"10Gfoo/s", "100MB", "10G/s", "fast", "0MB/s", "-5MB/s", "10 parsecs"}) {
    auto r = parseBandwidth(bad, "--bandwidth");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--bandwidth"), std::string::npos) << bad;
  }
}

TEST(ParseSeconds, Units) {
  EXPECT_DOUBLE_EQ(*parseSeconds("10s", "t"), 10);
  EXPECT_DOUBLE_EQ(*parseSeconds("500ms", "t"), 0.5);
  EXPECT_DOUBLE_EQ(*parseSeconds("2min", "t"), 120);
  EXPECT_DOUBLE_EQ(*parseSeconds("7d", "t"), 7 * 86400);
  EXPECT_DOUBLE_EQ(*parseSeconds("3", "t"), 3);
  EXPECT_FALSE(parseSeconds("3 fortnights", "t").ok());
}

TEST(ParsePositiveInt, RejectsZeroNegativeAndText) {
  EXPECT_EQ(*parsePositiveInt("16", "--workers"), 16);
  EXPECT_FALSE(parsePositiveInt("0", "--workers").ok());
  EXPECT_FALSE(parsePositiveInt("-3", "--workers").ok());
  EXPECT_FALSE(parsePositiveInt("4x", "--workers").ok());
}

TEST(ParseCount, RangesNameTheFlagTheValueAndTheRange) {
  EXPECT_EQ(*parseCount("16", "--workers", kWorkersRange), 16);
  for (const char* bad : {"0", "-1", "65537", "4294967296", "9223372036854775807", "99999999999999999999"}) {
    auto r = parseCount(bad, "--workers", kWorkersRange);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              std::string("--workers: ") + bad + " is out of range; expected a whole number from 1 to 65,536");
  }
  for (const char* bad : {"1e30", "nan", "inf", "abc", "", "4x", "2.5"}) {
    auto r = parseCount(bad, "--workers", kWorkersRange);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--workers: \""), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("is not a whole number from 1 to 65,536"), std::string::npos);
  }
  EXPECT_EQ(*parseCount("0", "--max-recoveries", {0, 1000}), 0);
}

TEST(ParseBytes, HugeSizesAreErrorsNotWrappedNumbers) {
  EXPECT_FALSE(parseBytes("1e30", "--memory").ok());
  EXPECT_FALSE(parseBytes("1e30GB", "--memory").ok());
  EXPECT_FALSE(parseBytes("nan", "--memory").ok());
  EXPECT_FALSE(parseBandwidth("1e300GB/s", "--bandwidth").ok());
  EXPECT_FALSE(parseSeconds("1e30s", "--latency").ok());
}

TEST(CheckedArithmetic, OverflowIsSeen) {
  EXPECT_EQ(*checkedMul(1 << 20, 1 << 20), std::int64_t{1} << 40);
  EXPECT_FALSE(checkedMul(std::int64_t{1} << 32, std::int64_t{1} << 32).has_value());
  EXPECT_EQ(saturatingMul(std::int64_t{1} << 40, std::int64_t{1} << 40), INT64_MAX);
  EXPECT_EQ(saturatingMul(-(std::int64_t{1} << 40), std::int64_t{1} << 40), INT64_MIN);
  EXPECT_EQ(saturatingAdd(INT64_MAX, 1), INT64_MAX);
  EXPECT_EQ(saturatingAdd(3, 4), 7);
}

TEST(CountOf, AgreesWithTheCount) {
  EXPECT_EQ(countOf(1, "microbatch", "microbatches"), "1 microbatch");
  EXPECT_EQ(countOf(4, "microbatch", "microbatches"), "4 microbatches");
  EXPECT_EQ(countOf(1200, "step", "steps"), "1,200 steps");
}

TEST(Format, HumanUnits) {
  EXPECT_EQ(formatBytes(12 * kGB), "12.0 GB");
  EXPECT_EQ(formatBytes(512), "512 B");
  EXPECT_EQ(formatBytes(1536 * kMB), "1.54 GB");
  EXPECT_EQ(formatSeconds(1.234), "1.23 s");
  EXPECT_EQ(formatSeconds(0.0456), "45.6 ms");
  EXPECT_EQ(formatBandwidth(1.25e9), "1.25 GB/s");
  EXPECT_EQ(formatUsd(12.3456), "$12.35");
  EXPECT_EQ(formatUsd(0.5), "$0.50");
  EXPECT_EQ(formatUsd(0.0042), "$0.0042");
  EXPECT_EQ(formatCount(1234567), "1,234,567");
}

}  // namespace
}  // namespace hydrozoa
