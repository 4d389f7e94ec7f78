#include "joulepipe/runtime/grid_timing.hpp"

#include <algorithm>
#include <vector>

#include "joulepipe/model/format.hpp"

namespace joulepipe::runtime {

GridTiming::GridTiming(int pipeline, std::optional<std::int64_t> last_iteration)
    : pipeline_(std::max(0, pipeline)), last_iteration_(last_iteration) {}

std::vector<std::string> GridTiming::SetPlan(double pipeline_offset_s, double stop_ramp_s) {
  std::vector<std::string> lines;
  offset_s_ = pipeline_offset_s > 0 ? pipeline_offset_s * pipeline_ : 0;
  stop_ramp_s_ = stop_ramp_s > 0 ? stop_ramp_s : 0;
  if (offset_s_ > 0) {
    lines.push_back(model::Format(
        "pipeline %d starts each iteration %.3g ms late (the plan's offset between pipelines, "
        "%.3g ms each)",
        pipeline_, offset_s_ * 1e3, pipeline_offset_s * 1e3));
  }
  if (stop_ramp_s_ > 0 && !last_iteration_) {
    lines.push_back(model::Format(
        "the plan ramps the job's stop over %g s, but this rank was not told the job's last "
        "iteration: the stop is not ramped",
        stop_ramp_s_));
    stop_ramp_s_ = 0;
  }
  return lines;
}

void GridTiming::Clear() {
  offset_s_ = 0;
  stop_ramp_s_ = 0;
}

GridTiming::AtStepBegin GridTiming::OnStepBegin(std::int64_t iteration, Clock::time_point now) {
  AtStepBegin out;
  if (last_begin_) {
    periods_.push_back(std::chrono::duration<double>(now - *last_begin_).count());
    if (periods_.size() > kPeriods) periods_.pop_front();
  }
  last_begin_ = now;
  out.wait_s = offset_s_;
  if (stop_ramp_s_ > 0 && last_iteration_ && !periods_.empty()) {
    const std::int64_t left = *last_iteration_ - iteration + 1;
    std::vector<double> sorted(periods_.begin(), periods_.end());
    std::sort(sorted.begin(), sorted.end());
    const double seconds = static_cast<double>(left) * sorted[sorted.size() / 2];
    if (left >= 1 && seconds <= stop_ramp_s_) {
      stop_ramp_s_ = 0;  // once
      out.stop_ramp_s = seconds;
      out.iterations_left = left;
    }
  }
  return out;
}

}  // namespace joulepipe::runtime
