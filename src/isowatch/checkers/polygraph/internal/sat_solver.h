// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace isowatch::checkers::polygraph {

// An incremental SAT solver as the polygraph search uses it: variables 1..n, literals as signed
// integers (DIMACS), clauses added between calls to Solve. The search (search.h) keeps the
// acyclicity constraint itself and adds a clause per cycle it finds in a model, so any
// incremental CDCL solver fits behind this interface. Thread-compatible: one per search.
class SatSolver {
 public:
  enum class Outcome : uint8_t { kSat, kUnsat, kStopped };

  virtual ~SatSolver() = default;
  // REQUIRES: every literal is non-zero; their variables are at most `variables` of the last
  // Reserve (or any, for solvers that grow).
  virtual void Reserve(int variables) = 0;
  virtual void AddClause(std::span<const int> literals) = 0;
  // The value tried first for the variable of `literal` when the solver has no better idea.
  virtual void Prefer(int literal) = 0;
  // Solves the clauses so far under `assumptions`. `stop` is asked now and then; once it says
  // true, Solve returns kStopped as soon as it can.
  virtual Outcome Solve(std::span<const int> assumptions, const std::function<bool()>& stop) = 0;
  // REQUIRES: the last Solve returned kSat. Whether `literal` is true in its model.
  virtual bool True(int literal) = 0;
  // REQUIRES: the last Solve returned kUnsat. Whether assumption `literal` is in the core.
  virtual bool Failed(int literal) = 0;
};

// The backends (docs/checkers/polygraph.md, "The solver").
std::unique_ptr<SatSolver> NewCadicalSolver();
std::unique_ptr<SatSolver> NewCryptoMiniSatSolver();

}  // namespace isowatch::checkers::polygraph
