#include "step_feed.hpp"

#include <algorithm>

namespace joulepipe::solver {

void StepFeed::Push(const RelaxationStep& step) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    steps_.push_back(step);
  }
  pushed_.notify_all();
}

void StepFeed::Finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  pushed_.notify_all();
}

const RelaxationStep* StepFeed::Wait(size_t i) {
  std::unique_lock<std::mutex> lock(mutex_);
  pushed_.wait(lock, [&] { return i < steps_.size() || finished_; });
  return i < steps_.size() ? &steps_[i] : nullptr;
}

void StepCursor::RelaxedAt(StepFeed& feed, double deadline, std::vector<double>& relaxed) {
  while (const RelaxationStep* s = feed.Wait(step)) {
    if (!(s->t_before - s->delta > deadline)) {
      DurationsWithin(*s, at_step_start, deadline, relaxed);
      return;
    }
    // The step ends above the deadline: take all of it. `moved` is what
    // DurationsWithin moves at the step's end, to the last bit.
    const double moved = std::clamp(s->t_before - (s->t_before - s->delta), 0.0, s->delta);
    for (int p : s->shortened) at_step_start[p] -= moved;
    for (int p : s->lengthened) at_step_start[p] += moved;
    ++step;
  }
  relaxed = at_step_start;  // below the last step: the fastest relaxed durations
}

}  // namespace joulepipe::solver
