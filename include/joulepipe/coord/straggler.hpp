// Straggler detection from measured iteration times.
//
// Each complete iteration gives, per data-parallel pipeline, the time its
// pipeline work took (from the iteration's start to its last instruction's
// end, before the gradient all-reduce) and the time predicted for the plan
// it ran. The ratio r_p = measured / predicted removes the plan: a pipeline
// that was deliberately slowed is not a straggler. The reference is the
// lower median of the ratios (the fastest pipeline of two, the middle of
// three), so systematic overheads common to all pipelines cancel and one
// straggler cannot move it. A pipeline's relative slowdown is r_p / ref.
//
// A pipeline starts straggling after `window` consecutive iterations at or
// above `threshold`, and recovers after `window` consecutive iterations
// below `recover_below`: one slow or fast iteration (a data-loader hiccup, a
// checkpoint) changes nothing. While straggling, its slowdown estimate is
// the smallest of its last `window` relative slowdowns (a conservative T':
// never more slack than the straggler really needs); the estimate is updated
// when it moves by more than `min_change` (relative).
//
// Observe returns true when the set of straggling pipelines or an estimate
// changed, i.e. the plans should be chosen again (plan_choice.hpp).
// Deterministic; no I/O.
#pragma once

#include <vector>

#include "joulepipe/protocol/job.hpp"

namespace joulepipe::coord {

// The options are part of a job's config, a protocol message
// (protocol/job.hpp): threshold, recover_below, window, min_change.

// Throws model::InputError naming StragglerOptions::<member>, its range and
// the fix.
void CheckStragglerOptions(const protocol::StragglerOptions& options);

class StragglerDetector {
 public:
  StragglerDetector(int pipelines, protocol::StragglerOptions options);  // pipelines >= 1

  // One complete iteration: per pipeline, measured and predicted time
  // (finite, > 0; a pipeline with a non-positive or non-finite value is
  // skipped this iteration). Returns whether slowdowns() changed.
  bool Observe(const std::vector<double>& measured_s, const std::vector<double>& predicted_s);

  // Starts from known slowdowns (a restored job's last switch): each > 1 is
  // straggling with that estimate. Size must be pipelines.
  void Seed(const std::vector<double>& slowdowns);

  // Per pipeline: 1 unless straggling, else its estimate (> 1).
  const std::vector<double>& slowdowns() const { return slowdown_; }
  bool any() const;

 private:
  protocol::StragglerOptions options_;
  std::vector<double> slowdown_;             // 1 = on time
  std::vector<int> slow_run_, fast_run_;     // consecutive slow / recovered iterations
  std::vector<std::vector<double>> recent_;  // last `window` relative slowdowns
};

}  // namespace joulepipe::coord
