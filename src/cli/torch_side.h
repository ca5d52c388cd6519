// What the commands do with libtorch.
//
// NOTE [The front end and the full program]
// Loading libtorch costs a process about a second of CPU before main() (its
// static initialisers register thousands of operators), so `hydrozoa` is two
// programs. build/hydrozoa, the one users run, is the front end: linked
// without libtorch, it parses every command line, answers --help, rejects bad
// flags and job specs, and runs the commands that are arithmetic on files
// (plan, show, report, allocate, simulate, models, cluster, submit, jobs,
// cancel) itself, in milliseconds. At the first thing that needs libtorch
// (training once the job is valid, a CPU calibration, a dataset to count, or
// a command that is libtorch's from its first flag: profile, select,
// cleanup and the workers) it hands the whole command line, unchanged, to
// the full program, build/hydrozoa-torch, next to it (execv: the same
// process id, signals and terminal), which parses it again and does
// everything. The functions below are where that happens: in the full
// program (cli/torch_side.cc) they do the work; in the front end
// (cli/front_end.cc) they hand off and do not return unless the full program
// cannot be run, which is then the command's error.
#pragma once

#include <cstdint>
#include <string>

#include "cluster/coordinator.h"
#include "cluster/job_spec.h"
#include "core/status.h"
#include "profile/device.h"

namespace hydrozoa::cli {

// `hydrozoa train` once its flags and job spec are valid: runs the job,
// passing Ctrl-C, SIGUSR1 and SIGUSR2 on, appending its events to `events`
// ("": none), and prints where its outputs are.
Status trainJob(cluster::TrainOptions o, const std::string& events);

// --device cpu: this machine's CPU calibrated with `threads` compute threads.
Result<profile::DeviceSpec> calibrateThisCpu(int threads);

// The samples in the job's training set (the dataset opened to count them).
Result<std::int64_t> trainingSetSize(const cluster::JobSpec& spec);

}  // namespace hydrozoa::cli
