// A lower bound on the GPU energy of any clock plan of one pipeline that
// finishes within a time, cheap enough to compute for every candidate
// before any frontier is solved (tune.hpp's pruning).
//
// A plan's energy at its time tau is (the energy rule, model/energy.hpp)
//   sum over stages s of [ sum over s's instructions i of (e_i - P_block t_i) ]
//   + stages x P_block x tau.
// Stage s runs its instructions one after another, and cannot start its
// first before w_start(s) nor end its last later than tau - w_end(s), where
// w_start / w_end are the longest paths into its first / out of its last
// instruction with every instruction at its quickest clock. So
//   busy(s) = sum of t_i <= tau - w_start(s) - w_end(s),
// and relaxing each instruction to the convex hull of its clocks' points
// (t, e - P_block t) makes the bracket a fractional knapsack per stage: start
// every instruction at its quickest point, slow down along hull segments in
// order of their saving per second while the stage's capacity lasts. That
// value g_s(tau) is convex and non-increasing in tau, so the bound B(tau) =
// sum g_s(tau) + stages x P_block x tau is convex, and the least energy of
// any plan within T is at least min over tau in [fastest, T] of B(tau)
// (AtMost), which is non-increasing in T.
#pragma once

#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::tune {

class PipelineBound {
 public:
  // The profile must have every (stage, kind) the schedule runs.
  PipelineBound(const schedule::Schedule& schedule, const model::Profile& profile,
                double p_block_w);

  // The fastest possible pipeline time (the critical path at quickest clocks).
  double fastest_s() const { return fastest_s_; }

  // B(tau): +infinity below fastest_s().
  double At(double tau) const;

  // min over tau in [fastest_s(), t] of B(tau): a lower bound on the energy
  // of every plan whose time is <= t (+infinity below fastest_s()).
  double AtMost(double t) const;

 private:
  struct Stage {
    double capacity_offset = 0;  // w_start + w_end
    double quickest_busy = 0;    // sum of quickest times
    double quickest_value = 0;   // sum of (e - P_block t) at the quickest points
    // Hull segments of all the stage's instructions, by saving per second
    // (descending): prefix sums of their extra time and of their saving.
    std::vector<double> ratio, time_prefix, saving_prefix;
  };
  double Value(const Stage& s, double tau) const;
  double Ratio(const Stage& s, double tau) const;  // marginal saving per second

  std::vector<Stage> stages_;
  double fastest_s_ = 0;
  double block_rate_ = 0;  // stages x P_block
  double minimiser_ = 0;   // where B is least (B is convex)
};

}  // namespace joulepipe::tune
