// SPDX-License-Identifier: Apache-2.0
#include <cryptominisat5/cryptominisat.h>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "isowatch/checkers/polygraph/internal/sat_solver.h"

namespace isowatch::checkers::polygraph {
namespace {

// Conflicts per call of CryptoMiniSat's solve(), between two questions to the stop predicate: it
// has no callback, so a search out of time is cut into bounded calls, each resuming with the
// clauses the last one learnt.
constexpr uint64_t kConflictsPerPoll = 20000;

CMSat::Lit ToLit(int literal) {
  return CMSat::Lit(static_cast<uint32_t>(std::abs(literal) - 1), literal < 0);
}

class CryptoMiniSatSolver final : public SatSolver {
 public:
  CryptoMiniSatSolver() {
    solver_.set_verbosity(0);
    solver_.set_num_threads(1);
  }

  void Reserve(int variables) override { Grow(variables); }
  void AddClause(std::span<const int> literals) override {
    clause_.clear();
    for (int lit : literals) {
      Grow(std::abs(lit));
      clause_.push_back(ToLit(lit));
    }
    solver_.add_clause(clause_);
  }
  // CryptoMiniSat takes one default polarity for all variables, not one per variable: ignored.
  void Prefer(int /*literal*/) override {}
  Outcome Solve(std::span<const int> assumptions, const std::function<bool()>& stop) override {
    std::vector<CMSat::Lit> assume;
    for (int lit : assumptions) {
      Grow(std::abs(lit));
      assume.push_back(ToLit(lit));
    }
    failed_.assign(solver_.nVars(), 0);
    while (true) {
      solver_.set_max_confl(kConflictsPerPoll);
      const CMSat::lbool result = solver_.solve(&assume);
      if (result == CMSat::l_True) return Outcome::kSat;
      if (result == CMSat::l_False) {
        // The conflict is the negation of the failed assumptions.
        for (CMSat::Lit lit : solver_.get_conflict()) failed_[lit.var()] = lit.sign() ? 1 : -1;
        return Outcome::kUnsat;
      }
      if (stop()) return Outcome::kStopped;
    }
  }
  bool True(int literal) override {
    const CMSat::lbool value = solver_.get_model()[static_cast<size_t>(std::abs(literal) - 1)];
    return literal > 0 ? value == CMSat::l_True : value == CMSat::l_False;
  }
  bool Failed(int literal) override {
    const size_t var = static_cast<size_t>(std::abs(literal) - 1);
    return var < failed_.size() && failed_[var] == (literal > 0 ? 1 : -1);
  }

 private:
  void Grow(int variables) {
    const unsigned have = solver_.nVars();
    if (static_cast<unsigned>(variables) > have) solver_.new_vars(variables - have);
  }

  CMSat::SATSolver solver_;
  std::vector<CMSat::Lit> clause_;
  // Per variable, after an unsatisfiable Solve: 1 when the assumption of the variable failed, -1
  // when that of its negation did, else 0.
  std::vector<int8_t> failed_;
};

}  // namespace

std::unique_ptr<SatSolver> NewCryptoMiniSatSolver() {
  return std::make_unique<CryptoMiniSatSolver>();
}

}  // namespace isowatch::checkers::polygraph
