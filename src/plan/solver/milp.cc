#include "plan/solver/milp.h"

#include <coin/Cbc_C_Interface.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace hydrozoa::plan {

struct Milp::Model {
  Cbc_Model* cbc = Cbc_newModel();
  ~Model() { Cbc_deleteModel(cbc); }
};

Milp::Milp() : model_(std::make_unique<Model>()) {
  Cbc_setObjSense(model_->cbc, 1);  // minimise
  Cbc_setLogLevel(model_->cbc, 0);
}

Milp::~Milp() = default;

int Milp::addVariable(double lower, double upper, double objective, bool integer) {
  Cbc_addCol(model_->cbc, "", lower, upper, objective, integer ? 1 : 0, 0, nullptr, nullptr);
  integer_.push_back(integer);
  return variables_++;
}

void Milp::addConstraint(const std::vector<std::pair<int, double>>& terms, Sense sense, double rhs) {
  std::vector<int> cols;
  std::vector<double> coefs;
  for (const auto& [col, coef] : terms) {
    if (coef == 0) continue;
    cols.push_back(col);
    coefs.push_back(coef);
  }
  Cbc_addRow(model_->cbc, "", static_cast<int>(cols.size()), cols.data(), coefs.data(), static_cast<char>(sense),
             rhs);
  ++constraints_;
}

Result<Milp::Solution> Milp::solve(Seconds limit) {
  Cbc_setMaximumSeconds(model_->cbc, limit);
  // Exact: no gap allowed between the incumbent and the bound.
  Cbc_setParameter(model_->cbc, "allowableGap", "0");
  Cbc_setParameter(model_->cbc, "ratioGap", "0");
  Cbc_solve(model_->cbc);
  // A program without integers is one LP, which CBC answers through its
  // initial solve's status (Cbc_status stays -1: no branch and bound ran).
  const bool lp = std::none_of(integer_.begin(), integer_.end(), [](bool i) { return i; });
  if (lp && Cbc_isInitialSolveProvenPrimalInfeasible(model_->cbc)) {
    return infeasible("the program has no feasible assignment");
  }
  if (Cbc_isProvenInfeasible(model_->cbc)) return infeasible("the program has no feasible assignment");
  if (!(lp ? Cbc_isInitialSolveProvenOptimal(model_->cbc) : Cbc_isProvenOptimal(model_->cbc))) {
    const char* why = Cbc_isSecondsLimitReached(model_->cbc)                      ? "its time limit passed"
                      : lp && Cbc_isInitialSolveAbandoned(model_->cbc)             ? "it abandoned the LP (numerics)"
                      : lp && Cbc_isContinuousUnbounded(model_->cbc) ? "the LP is unbounded"
                                                                                   : "it stopped early";
    return unavailable(fmt::format("the MILP solver (CBC) did not prove an optimum: {} after {} s (status {}, {})",
                                   why, limit, Cbc_status(model_->cbc), Cbc_secondaryStatus(model_->cbc)));
  }
  Solution s;
  const double* x = Cbc_getColSolution(model_->cbc);
  s.values.assign(x, x + variables_);
  for (int i = 0; i < variables_; ++i) {
    if (integer_[i]) s.values[i] = std::round(s.values[i]);
  }
  s.objective = Cbc_getObjValue(model_->cbc);
  return s;
}

}  // namespace hydrozoa::plan
