// A run as text: `hydrozoa show RUN_DIR`, and the facts the HTML report's
// tables share with it.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/run_report.h"

namespace hydrozoa::report {

// (name, value) rows that sum a run up: status, model, plan, steps, loss,
// test accuracy, throughput, step time measured vs predicted, cost, time,
// recoveries, scaling. Values read like "45.0 ms measured, 18.0 ms predicted
// (+150%)"; what a partial run lacks is left out.
std::vector<std::pair<std::string, std::string>> runFacts(const RunReport& run);

// The plan in a few words: "2×2 (2 replicas × 2 stages), 4 microbatches of 16"
// (stages replicated unevenly: "2 stages replicated 2, 1 (3 workers), 4
// microbatches of 6 a step dealt round-robin").
std::string describePlan(const plan::Plan& plan);

// "+12%" / "-3%": measured against predicted; "" without both.
std::string relativeError(const std::optional<double>& measured, const std::optional<double>& predicted);

// Everything in the report as text: the facts, evaluations, events, time
// per stage, the plan with its alternatives, and notes on what is missing.
std::string renderRunText(const RunReport& run);

}  // namespace hydrozoa::report
