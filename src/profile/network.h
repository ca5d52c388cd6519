// Network probe (docs/profile.md, "The network"): point-to-point bandwidth and latency between two
// local worker processes, and the ring-allreduce α, β fitted by linear
// regression over several message sizes with real c10d Gloo allreduce.
//
// probeNetwork() serves a c10d Store on a control socket of its own
// (wire/store.h, bound to the measured address, the token in the workers'
// environment: no listener on every interface), starts `workers` processes of the
// hydrozoa binary (`hydrozoa netprobe-worker ...`, a hidden subcommand that
// calls runNetprobeWorker), collects rank 0's timings through the store and
// fits them. Children are always reaped; on timeout they are killed.
//
// The fit: one allreduce of n bytes over A workers takes 2(A−1) rounds of
// n/(A·D) + α·n/A + β, so y = t / (2(A−1)) against x = n/A is a line with
// slope 1/D + α and intercept β.
//
// NOTE [Allreduce on busy workers]: the allreduce is timed while each rank
// runs a compute thread, pinned as a training worker pins its own, because
// that is when training reduces its gradients (buckets overlap the backward
// pass). On a host whose cores the compute threads fill, Gloo's threads and
// the kernel's loopback copies then queue behind compute: on this project's
// 2-core machine a busy allreduce of 16 MB took several times the idle one,
// and an α fitted on idle processes put VGG-11's data-parallel step at less
// than half its measured time (bench/README.md, fidelity_bench). The sizes
// reach 64 MB because buckets do: a layer larger than a bucket is one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "profile/profile.h"

namespace hydrozoa::profile {

struct NetworkProbeOptions {
  int workers = 2;  // allreduce group size, >= 2
  std::vector<Bytes> sizes = {16 * kKB, 64 * kKB, 256 * kKB, kMB, 4 * kMB, 16 * kMB, 64 * kMB};
  int repeats = 5;
  std::string host = "127.0.0.1";
  std::string executable;  // the hydrozoa binary; empty: this process's
  Seconds timeout = 120;
};

Result<NetworkProfile> probeNetwork(const NetworkProbeOptions& options);

// The worker side: joins the probe's store at `endpoint` (its control
// socket, "tcp://host:port") with `token` as `rank` of `world`, runs the
// measurements, and rank 0 publishes them under the key "result".
Status runNetprobeWorker(const std::string& endpoint, const std::string& token, int rank, int world,
                         const std::vector<Bytes>& sizes, int repeats);

// Least-squares fit of y = slope·x + intercept; returns R² in *r2.
void fitLine(const std::vector<double>& x, const std::vector<double>& y, double* slope, double* intercept, double* r2);

}  // namespace hydrozoa::profile
