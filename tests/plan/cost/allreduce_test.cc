#include "plan/cost/allreduce.h"

#include <gtest/gtest.h>

namespace hydrozoa::plan {
namespace {

using Buckets = std::vector<std::vector<int>>;

TEST(GradientBuckets, FromTheLastLayerWithASmallFirstBucketAndTheFirstLayerAlone) {
  // Layer 0 and 3 have no parameters. From the end: 5 and 4 fill the first
  // bucket past 1 MB; 2 starts the next; 1, the first layer with parameters,
  // goes alone because the bucket it would join already holds more.
  const std::vector<Bytes> bytes = {0, 100 * kKB, 2 * kMB, 0, 600 * kKB, 500 * kKB};
  EXPECT_EQ(gradientBuckets(bytes, kFirstBucketBytes, kBucketBytes), (Buckets{{5, 4}, {2}, {1}}));
}

TEST(GradientBuckets, TheFirstLayerJoinsWhenItIsTheLarger) {
  EXPECT_EQ(gradientBuckets({3 * kMB, 500 * kKB}, kFirstBucketBytes, kBucketBytes), (Buckets{{1, 0}}));
  EXPECT_EQ(gradientBuckets({}, kFirstBucketBytes, kBucketBytes), Buckets{});
  EXPECT_EQ(gradientBuckets({0, 0}, kFirstBucketBytes, kBucketBytes), Buckets{});
}

TEST(GradientBuckets, LaterBucketsCloseAtTheLargerSize) {
  // 1 MB closes the first; the next takes 10 + 10 + 10 MB (it closes once
  // past 25 MB); layer 0, the first layer, goes alone (30 MB > 1 MB).
  const std::vector<Bytes> bytes = {kMB, 10 * kMB, 10 * kMB, 10 * kMB, kMB};
  EXPECT_EQ(gradientBuckets(bytes, kFirstBucketBytes, kBucketBytes), (Buckets{{4}, {3, 2, 1}, {0}}));
}

TEST(RingAllreduce, TwoTimesAMinusOneRoundsOfAShare) {
  const double p = 4e6;
  EXPECT_NEAR(ringAllreduceTime(4 * kMB, 4, 1e9, 1e-10, 1e-4), 2 * 3 * (p / 4e9 + 1e-10 * p / 4 + 1e-4), 1e-15);
  EXPECT_EQ(ringAllreduceTime(4 * kMB, 1, 1e9, 1e-10, 1e-4), 0);
  EXPECT_EQ(ringAllreduceTime(0, 4, 1e9, 1e-10, 1e-4), 0);
}

// Two replicas at 1 MB/s with no overheads: a bucket of n bytes takes n µs.
constexpr BytesPerSecond kD = 1e6;

TEST(OverlappedAllreduce, BucketsStartWhenTheirGradientsAreFinalAndRunOneAfterAnother) {
  // Layer 1 (2 MB) is final 1 s into the backward pass, layer 0 (1 MB, alone)
  // at 1.5 s. Bucket {1}: 1 s .. 3 s; bucket {0}: waits for it, 3 s .. 4 s.
  const std::vector<Bytes> bytes = {kMB, 2 * kMB};
  const std::vector<Seconds> backward = {0.5, 1.0};
  AllreduceTime t = overlappedAllreduce(bytes, backward, 0, 2, kD, 0, 0);
  EXPECT_DOUBLE_EQ(t.total, 3.0);
  EXPECT_DOUBLE_EQ(t.exposed, 4.0 - 1.5);
  // A stage after the first: the iteration goes on 1 s after its backward pass.
  t = overlappedAllreduce(bytes, backward, 1.0, 2, kD, 0, 0);
  EXPECT_DOUBLE_EQ(t.exposed, 1.5);
  EXPECT_DOUBLE_EQ(t.after, 2.5);  // the last bucket's end after the backward pass, whatever drains after it
  EXPECT_DOUBLE_EQ(overlappedAllreduce(bytes, backward, 5.0, 2, kD, 0, 0).exposed, 0);
  EXPECT_EQ(overlappedAllreduce(bytes, backward, 0, 1, kD, 0, 0).total, 0);
}

TEST(OverlappedAllreduce, ABucketReadyAfterTheOneBeforeEndsStartsWhenReady) {
  // Bucket {1} (0.5 MB) is final at 1 s and done at 1.5 s; layer 0's backward
  // takes 3 s more, so bucket {0} starts at 4 s and nothing of {1} is exposed.
  const AllreduceTime t = overlappedAllreduce({200 * kKB, 500 * kKB}, {3.0, 1.0}, 0, 2, kD, 0, 0);
  EXPECT_NEAR(t.total, 0.7, 1e-12);
  EXPECT_NEAR(t.exposed, 0.2, 1e-12);
}

TEST(OverlappedAllreduce, OneBucketWithNothingToHideBehindIsTheSeedsTerm) {
  const AllreduceTime t = overlappedAllreduce({0, 3 * kMB}, {0, 0}, 0, 4, 1e9, 1e-10, 1e-4);
  EXPECT_DOUBLE_EQ(t.exposed, ringAllreduceTime(3 * kMB, 4, 1e9, 1e-10, 1e-4));
  EXPECT_DOUBLE_EQ(t.total, t.exposed);
}

TEST(SharedMemoryAllreduceCost, CopyInSumAndCopyBackScaleWithTheGroup) {
  const SharedMemoryCost measured{1e-9, 20e-6, 2};  // at 2 replicas: 2 units of n
  EXPECT_DOUBLE_EQ(sharedMemoryAllreduceTime(kMB, 2, measured), 1e-3 + 20e-6);
  // At 4: 1 + 2·3/4 = 2.5 units of n.
  EXPECT_DOUBLE_EQ(sharedMemoryAllreduceTime(kMB, 4, measured), 1e-3 * 2.5 / 2 + 20e-6);
  EXPECT_EQ(sharedMemoryAllreduceTime(kMB, 1, measured), 0);
  EXPECT_EQ(sharedMemoryAllreduceTime(0, 2, measured), 0);
}

TEST(SharedMemoryAllreduceCost, EveryBucketAfterTheBackwardPassHidesOnlyBehindTheDrain) {
  // Buckets: the last layer (1.2 MB, past the first bucket's 1 MB), then the
  // first layer alone (smaller than what it would join).
  const std::vector<Bytes> layers = {200 * kKB, 1200 * kKB};
  const SharedMemoryCost c{1e-9, 1e-4, 2};
  const Seconds expect = sharedMemoryAllreduceTime(200 * kKB, 2, c) + sharedMemoryAllreduceTime(1200 * kKB, 2, c);
  const AllreduceTime first = sharedMemoryAllreduce(layers, 0, 2, c);
  EXPECT_DOUBLE_EQ(first.total, expect);
  EXPECT_DOUBLE_EQ(first.after, expect);
  EXPECT_DOUBLE_EQ(first.exposed, expect);
  const AllreduceTime later = sharedMemoryAllreduce(layers, 1e-3, 2, c);
  EXPECT_DOUBLE_EQ(later.exposed, expect - 1e-3);
  EXPECT_EQ(sharedMemoryAllreduce(layers, 0, 1, c).total, 0);
}

}  // namespace
}  // namespace hydrozoa::plan
