// GridTiming: when a grid-shaped plan's timed levers act on one rank
// (model::GridShape): the wait this rank's pipeline takes at each step's
// beginning (the offset between pipelines) and the step at which the job's
// stop ramp begins. Pure decisions on the numbers it is given; the caller
// (CoordinatedPlan) waits, tells the agent (Agent::BeginStopRamp) and logs.
//
//   * Offset: pipeline p (its data-parallel rank) waits p x
//     GridShape::pipeline_offset_s at every step's beginning, inside the
//     step, so that the pipelines' drops to the gradient all-reduce come one
//     after another (sim::JobSpec::pipeline_offset_s simulates the same).
//   * Stop ramp: once the iterations left, this one included, at the median
//     of the last kPeriods step periods (step beginning to step beginning),
//     fit in GridShape::stop_ramp_s, the ramp begins over that many seconds.
//     Once per plan; never without the job's last iteration (SetPlan says
//     so) or before one period was seen.
// Not thread-safe: the training thread's, like the hooks.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace joulepipe::runtime {

class GridTiming {
 public:
  static constexpr std::size_t kPeriods = 10;
  using Clock = std::chrono::steady_clock;

  // `pipeline`: this rank's data-parallel rank (>= 0); `last_iteration`: the
  // number of the job's last iteration as OnStepBegin's `iteration` counts,
  // when known.
  GridTiming(int pipeline, std::optional<std::int64_t> last_iteration);

  // A plan now runs with these levers (0: none). Returns the lines to log:
  // the offset this pipeline waits, and a stop ramp that cannot begin
  // because the last iteration is unknown.
  std::vector<std::string> SetPlan(double pipeline_offset_s, double stop_ramp_s);
  // No plan runs (refused, disabled): no offset, no stop ramp.
  void Clear();

  struct AtStepBegin {
    double wait_s = 0;                 // wait this long now (the offset), inside the step
    double stop_ramp_s = 0;            // > 0: begin the stop ramp now, over this long
    std::int64_t iterations_left = 0;  // with stop_ramp_s: this one included
  };
  // A step begins at `now`; `iteration` is its number.
  AtStepBegin OnStepBegin(std::int64_t iteration, Clock::time_point now);

  double offset_s() const { return offset_s_; }

 private:
  const int pipeline_;
  const std::optional<std::int64_t> last_iteration_;
  double offset_s_ = 0;     // this pipeline's wait per step
  double stop_ramp_s_ = 0;  // until the ramp has begun
  std::deque<double> periods_;
  std::optional<Clock::time_point> last_begin_;
};

}  // namespace joulepipe::runtime
