// Timetable local search: the last step from a rounded plan to a better one.
//
// A plan is equivalent to a timetable (a start time per instruction): given
// the starts, each instruction independently takes the slowest clock that
// fits before its earliest successor starts (or the deadline). The search
// moves one start time at a time to the position that minimises the summed
// effective energy of that instruction and its predecessors, whose windows
// are the only ones the move changes: a one-dimensional, exact optimisation
// over the few breakpoints where some clock starts or stops fitting. Sweeps
// repeat until nothing improves. Moves keep every window at least as long as
// the fastest clock, so the plan stays within the deadline; the result is
// re-evaluated exactly and kept only if it is feasible and better.
#pragma once

#include <vector>

#include "activity_graph.hpp"
#include "rounding.hpp"

namespace joulepipe::solver {

class Polisher {
 public:
  Polisher(const ActivityGraph& g, double p_block_w) : g_(g), p_block_(p_block_w) {}

  // Improves `plan` for `deadline` in place (never makes it worse).
  // `stop` is checked every 1,024 moves tried.
  void Polish(double deadline, RoundedPlan& plan, int max_sweeps = 12, const StopCheck& stop = {});

 private:
  double CostWithin(int p, double window) const;
  double SuccessorLimit(int p, int skip, double deadline) const;
  bool Move(int v, double deadline);
  bool Stale(int v) const;

  const ActivityGraph& g_;
  const double p_block_;
  std::vector<double> start_, candidates_;
  // Change tracking for Move: a counter bumped at every move, the count at
  // each start's last change and at each instruction's last evaluation.
  long version_ = 0;
  std::vector<long> changed_at_, evaluated_at_;
};

}  // namespace joulepipe::solver
