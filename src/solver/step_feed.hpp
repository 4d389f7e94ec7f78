// StepFeed: the relaxation's steps as the crashing finds them, for rounding
// threads that follow it down the makespan range while it still runs.
//
// One producer (the relaxation) pushes steps and finally calls Finish; any
// number of consumers wait for the step they need. Steps live in a deque,
// which never moves an element once pushed, so a consumer may keep the
// pointer Wait returns after the lock is released; a pushed step is never
// changed again.
//
// StepCursor: one consumer's position, the durations at the start of step
// `step`, moved forward step by step exactly as the relaxation moved them,
// so every cursor that reaches a deadline holds the same durations to the
// last bit whichever thread drove it.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "relaxation.hpp"

namespace joulepipe::solver {

class StepFeed {
 public:
  void Push(const RelaxationStep& step);
  // No more steps will come (the relaxation ended, or failed): waiters wake.
  void Finish();
  // Step i once it exists; nullptr when the feed finished with no step i.
  const RelaxationStep* Wait(size_t i);

 private:
  std::mutex mutex_;
  std::condition_variable pushed_;
  std::deque<RelaxationStep> steps_;
  bool finished_ = false;
};

struct StepCursor {
  size_t step = 0;
  std::vector<double> at_step_start;  // starts as Relaxation::initial

  // The relaxed durations at makespan `deadline` (deadlines must not
  // increase from call to call): advances past every step that ends above
  // the deadline, waiting on the feed where it has not got that far yet.
  void RelaxedAt(StepFeed& feed, double deadline, std::vector<double>& relaxed);
};

}  // namespace joulepipe::solver
