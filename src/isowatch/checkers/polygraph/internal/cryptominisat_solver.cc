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

class CryptoMiniSatSolver final : public SatSolver {
 public:
  CryptoMiniSatSolver() {
    solver_.set_verbosity(0);
    solver_.set_num_threads(1);
    solver_.set_polarity_mode(CMSat::PolarityMode::polarmode_automatic);
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
  // CryptoMiniSat takes one polarity for all variables (false, as set above), not one per
  // variable: a variable preferred true is stored negated, so that its preferred value is the one
  // tried first. Too late for a variable some clause already holds.
  void Prefer(int literal) override {
    const auto var = static_cast<size_t>(std::abs(literal) - 1);
    Grow(std::abs(literal));
    if (used_[var] == 0) negated_[var] = literal > 0 ? 1 : 0;
  }
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
    const CMSat::lbool value = solver_.get_model()[ToLit(literal).var()];
    return ToLit(literal).sign() ? value == CMSat::l_False : value == CMSat::l_True;
  }
  bool Failed(int literal) override {
    const CMSat::Lit lit = ToLit(literal);
    return lit.var() < failed_.size() && failed_[lit.var()] == (lit.sign() ? -1 : 1);
  }

 private:
  void Grow(int variables) {
    const unsigned have = solver_.nVars();
    if (static_cast<unsigned>(variables) <= have) return;
    solver_.new_vars(variables - have);
    used_.resize(static_cast<size_t>(variables), 0);
    negated_.resize(static_cast<size_t>(variables), 0);
  }
  // `literal` in the solver's variables (Prefer), marking its variable used.
  CMSat::Lit ToLit(int literal) {
    const auto var = static_cast<uint32_t>(std::abs(literal) - 1);
    used_[var] = 1;
    return CMSat::Lit(var, (literal < 0) != (negated_[var] != 0));
  }

  CMSat::SATSolver solver_;
  std::vector<CMSat::Lit> clause_;
  std::vector<uint8_t> used_;     // per variable: in a clause or assumption already
  std::vector<uint8_t> negated_;  // per variable: stored negated (Prefer)
  // Per variable, after an unsatisfiable Solve: 1 when the assumption of the variable failed, -1
  // when that of its negation did, else 0.
  std::vector<int8_t> failed_;
};

}  // namespace

std::unique_ptr<SatSolver> NewCryptoMiniSatSolver() {
  return std::make_unique<CryptoMiniSatSolver>();
}

}  // namespace isowatch::checkers::polygraph
