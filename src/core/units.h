// Units: bytes, seconds, bandwidth and money, with parsing of what users type
// ("12GB", "1.5GiB", "10Gbit/s", "100MB/s") and printing for tables.
//
// The aliases document units in signatures; every quantity that crosses a
// module boundary carries its unit in its type alias or its name.
//
// Decimal prefixes are powers of 1000 (GB = 1e9 bytes), binary ones powers of
// 1024 (GiB = 2^30 bytes). In bandwidths, "bit"/"bps"/lower-case "b" mean
// bits and "B"/"byte" mean bytes: 10Gbit/s == 1.25GB/s.
#pragma once

#include <cstdint>
#include <string>

#include "core/limits.h"
#include "core/status.h"

namespace hydrozoa {

using Bytes = std::int64_t;
using Seconds = double;
using BytesPerSecond = double;
using Usd = double;
using UsdPerHour = double;

constexpr Bytes kKB = 1000;
constexpr Bytes kMB = 1000 * kKB;
constexpr Bytes kGB = 1000 * kMB;
constexpr Bytes kKiB = 1024;
constexpr Bytes kMiB = 1024 * kKiB;
constexpr Bytes kGiB = 1024 * kMiB;

// Parses a size: a non-negative number with an optional unit (B, KB, MB, GB,
// TB, KiB, MiB, GiB, TiB; case-insensitive). A bare number is bytes.
// `what` names the value in the error ("--memory").
Result<Bytes> parseBytes(const std::string& text, const std::string& what);

// Parses a bandwidth: a positive number and a unit per second, e.g. 10Gbit/s,
// 10Gbps, 100Mb/s (bits) or 100MB/s, 1.25GB/s, 70MBps (bytes).
Result<BytesPerSecond> parseBandwidth(const std::string& text, const std::string& what);

// Parses a duration: a non-negative number with s, ms, us, min, h or d ("2.5s").
// A bare number is seconds.
Result<Seconds> parseSeconds(const std::string& text, const std::string& what);

// Parses a strictly positive integer ("16"), naming `what` in errors.
Result<std::int64_t> parsePositiveInt(const std::string& text, const std::string& what);

// Parses a whole number within `range`; anything else (0 or less when the
// range starts at 1, past the range, "1e30", "nan", "abc") is one error that
// names `what`, the value and the range: "--data-parallel: 4294967296 is out of
// range; expected a whole number from 1 to 65,536".
Result<std::int64_t> parseCount(const std::string& text, const std::string& what, Range range);

// "a whole number from 1 to 65,536", for messages.
std::string describeRange(Range range);

// "12.0 GB", "512 MB", "3 B": decimal units, three significant digits.
std::string formatBytes(Bytes bytes);
// "1.25 GB/s" (bytes per second).
std::string formatBandwidth(BytesPerSecond bandwidth);
// "1.23 s", "45.6 ms", "12.0 us".
std::string formatSeconds(Seconds seconds);
// "$1.23", "$0.0042", "$12,345".
std::string formatUsd(Usd usd);
// A count with thousands separators: "1,234,567".
std::string formatCount(double value);
// "1 microbatch", "4 microbatches": the count and the noun that agrees with it.
std::string countOf(std::int64_t n, const char* one, const char* many);

}  // namespace hydrozoa
