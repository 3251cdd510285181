// SPDX-License-Identifier: Apache-2.0
#include <cadical.hpp>
#include <functional>
#include <memory>
#include <span>

#include "isowatch/checkers/polygraph/internal/sat_solver.h"

namespace isowatch::checkers::polygraph {
namespace {

// Asks the search's stop predicate from inside CaDiCaL's loop.
class StopAdapter final : public CaDiCaL::Terminator {
 public:
  explicit StopAdapter(const std::function<bool()>& stop) : stop_(stop) {}
  bool terminate() override { return stop_(); }

 private:
  const std::function<bool()>& stop_;
};

class CadicalSolver final : public SatSolver {
 public:
  // CaDiCaL reports on standard output unless told not to.
  CadicalSolver() { solver_.set("quiet", 1); }

  void Reserve(int variables) override { solver_.reserve(variables); }
  void AddClause(std::span<const int> literals) override {
    for (int lit : literals) solver_.add(lit);
    solver_.add(0);
  }
  void Prefer(int literal) override { solver_.phase(literal); }
  Outcome Solve(std::span<const int> assumptions, const std::function<bool()>& stop) override {
    for (int lit : assumptions) solver_.assume(lit);
    StopAdapter adapter(stop);
    solver_.connect_terminator(&adapter);
    const int result = solver_.solve();
    solver_.disconnect_terminator();
    if (result == 10) return Outcome::kSat;
    if (result == 20) return Outcome::kUnsat;
    return Outcome::kStopped;
  }
  bool True(int literal) override { return solver_.val(literal) > 0; }
  bool Failed(int literal) override { return solver_.failed(literal); }

 private:
  CaDiCaL::Solver solver_;
};

}  // namespace

std::unique_ptr<SatSolver> NewCadicalSolver() { return std::make_unique<CadicalSolver>(); }

}  // namespace isowatch::checkers::polygraph
