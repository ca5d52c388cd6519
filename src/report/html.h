// The HTML report of `hydrozoa report`: one self-contained page (inline CSS
// and SVG, no script, nothing fetched) with, for every run given:
//
//   - a table of the runs (status, plan, steps, loss, accuracy, throughput,
//     step time measured vs predicted, cost), a colour per run;
//   - charts over training time with the runs overlaid: loss, test accuracy,
//     samples/s, workers and cost, with each run's recovery and scaling
//     events as markers;
//   - per run: predicted vs measured time per step for each stage, the plan's
//     stages and every alternative the planner considered, the events, and
//     notes on what the run directory lacks.
//
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "report/run_report.h"

namespace hydrozoa::report {

// REQUIRES: !runs.empty(); labels unique (labelRuns).
std::string renderHtmlReport(const std::vector<RunReport>& runs);

// The colour that stands for the i-th run in every chart and table.
std::string runColor(size_t index);

}  // namespace hydrozoa::report
