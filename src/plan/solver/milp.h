// A mixed-integer linear program solved exactly by COIN-OR CBC (Debian's
// coinor-libcbc-dev), for the planners that are MILPs (FuncPipe's
// co-optimiser; Gavel's and Hydra's to come): variables with bounds,
// objective coefficients and integrality, linear constraints, minimised.
//
//   Milp m;
//   const int x = m.addVariable(0, 1, 3.0, true);    // binary, cost 3
//   const int y = m.addVariable(0, 10, 1.0, false);  // continuous
//   m.addConstraint({{x, 1}, {y, 1}}, Milp::kAtLeast, 2);
//   auto r = m.solve();                               // r->values[x], r->objective
//
// Not thread-safe per object; separate objects may be solved at once.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::plan {

class Milp {
 public:
  enum Sense : char { kAtMost = 'L', kAtLeast = 'G', kEqual = 'E' };
  struct Solution {
    std::vector<double> values;  // per variable, integers rounded to the nearest
    double objective = 0;
  };

  Milp();
  ~Milp();
  Milp(const Milp&) = delete;
  Milp& operator=(const Milp&) = delete;

  // Returns the variable's index. Bounds may be ±infinity (continuous only).
  int addVariable(double lower, double upper, double objective, bool integer);
  void addConstraint(const std::vector<std::pair<int, double>>& terms, Sense sense, double rhs);
  int numVariables() const { return variables_; }
  int numConstraints() const { return constraints_; }

  // Minimises to proven optimality within `limit`. Infeasible when no
  // assignment meets the constraints; Unavailable when the limit passed
  // first or the solver stopped for another reason (the message says which).
  Result<Solution> solve(Seconds limit = 600);

 private:
  struct Model;
  std::unique_ptr<Model> model_;
  int variables_ = 0, constraints_ = 0;
  std::vector<bool> integer_;
};

}  // namespace hydrozoa::plan
