// What `hydrozoa plan` says about tensor parallelism (docs/plan.md, "Tensor
// parallelism"): the best plan with and the best without it side by side,
// and where the chosen plan departs from the PTD-P thesis's takeaways (seed
// 003 §4.3) and why the cost model has it so.
//
// The takeaways, as checked here (g: the most workers, up to
// SearchOptions::tensor_link_workers, a tensor group of this model can have):
//   #1 (§4.3.2) tensor parallelism up to g, then pipeline parallelism: a plan
//      that pipelines (p > 1) with t < g departs, and so does one whose
//      tensor group is larger than the workers that share a fast link.
//   #2 (§4.3.3) a model-parallel size t·p just large enough to fit memory,
//      data parallelism for the rest: a plan whose t·p is larger than the
//      smallest of any feasible plan departs.
//   #3 (§4.3.4) the microbatch size b that minimises (b′/b + p − 1)·(t_f(b) +
//      t_b(b)) (eq. 4.1, b′ = B/d, t_f and t_b a stage's times at b with
//      communication ignored: the model's over p; the bubble term p − 1 is
//      the schedule's, (p − 1)/v interleaved and none for 2bw and
//      pipedream): a plan with another b departs.
// For each departure the note names the plan the takeaway points to and the
// terms of the cost model that make it slower (or why it is infeasible).
// Pure functions over search results; nothing is printed here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/resources.h"
#include "plan/search.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

// One schedule's search as `hydrozoa plan` ran it.
struct ScheduleSearch {
  SearchOptions options;  // its schedule, chunks, recomputation and pins
  SearchResult result;
};

// A row of one of the searches.
struct SearchRow {
  size_t search = 0, row = 0;
  bool operator==(const SearchRow& o) const { return search == o.search && row == o.row; }
};

// The best feasible row by `objective` among those with t > 1 (`tensor`)
// or t = 1; none when there is no such row.
std::optional<SearchRow> bestSearchRow(const std::vector<ScheduleSearch>& searches, bool tensor, Objective objective);

// Whether any search considered a row with t > 1.
bool consideredTensorParallel(const std::vector<ScheduleSearch>& searches);

// The side-by-side table (the chosen row marked *), or "" when no search
// considered tensor parallelism.
std::string renderTensorComparison(const std::vector<ScheduleSearch>& searches, const SearchRow& chosen);

// One note per takeaway the chosen row departs from, in order; empty when
// it follows them all. `profile` is the unsplit one the searches ran on.
std::vector<std::string> takeawayNotes(const profile::Profile& profile, const Catalog& catalog,
                                       const std::vector<ScheduleSearch>& searches, const SearchRow& chosen);

}  // namespace hydrozoa::plan
