#include "joulepipe/coord/iteration_window.hpp"

#include <iterator>

namespace joulepipe::coord {

bool IterationWindow::Offer(int rank, std::int64_t iteration) {
  std::int64_t& latest = latest_[static_cast<std::size_t>(rank)];
  if (iteration != latest) {
    if (latest >= 0) Erase(latest);
    Insert(iteration);
    latest = iteration;
  }
  const std::int64_t m = median();
  const std::int64_t distance = iteration > m ? iteration - m : m - iteration;
  return distance <= kIterationWindow;
}

void IterationWindow::Insert(std::int64_t v) {
  if (low_.empty() || v <= *low_.rbegin()) {
    low_.insert(v);
  } else {
    high_.insert(v);
  }
  Balance();
}

void IterationWindow::Erase(std::int64_t v) {
  // Every element of low_ <= every element of high_, so a value <= low_'s
  // largest is in low_ (equal to it if it is also in high_).
  if (!low_.empty() && v <= *low_.rbegin()) {
    low_.erase(low_.find(v));
  } else {
    high_.erase(high_.find(v));
  }
  Balance();
}

void IterationWindow::Balance() {
  if (low_.size() > high_.size() + 1) {
    const auto last = std::prev(low_.end());
    high_.insert(*last);
    low_.erase(last);
  } else if (high_.size() > low_.size()) {
    low_.insert(*high_.begin());
    high_.erase(high_.begin());
  }
}

}  // namespace joulepipe::coord
