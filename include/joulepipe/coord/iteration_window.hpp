// IterationWindow: which iteration numbers a job takes reports for. Each
// rank's latest report is kept (where the rank says it is now, forward or
// back: a rank whose first report was nonsense, 10^12, is not locked out of
// its real iteration 0 by it); the job's current iteration is their lower
// median over the ranks that have reported. A report is admitted when its iteration is within
// kIterationWindow of that median, the report itself counted. So one rank,
// or any minority, that reports nonsense (10^12, or 0 long after the start)
// moves neither the median nor what the others may report, while the first
// reports of a job (or of a restarted service) anchor it wherever the ranks
// really are. A refused report still moves its rank's latest: ranks that
// fell silent and come back, all at the same new iteration, out-vote their
// own stale entries instead of being locked out by them. A late report (a
// retry of an earlier iteration) moves its rank back by an iteration or
// two, which moves the median by at most as much.
//
// Cost: O(log ranks) per report (the latest values in two sorted halves).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace joulepipe::coord {

// How far (iterations) a report may be from the ranks' median. Real ranks
// of one job are within an iteration or two of each other: the gradient
// sync makes every pipeline wait for the others once per iteration.
inline constexpr std::int64_t kIterationWindow = 32;

class IterationWindow {
 public:
  explicit IterationWindow(int ranks = 0) : latest_(static_cast<std::size_t>(ranks), -1) {}

  // Counts `rank`'s report of `iteration` (>= 0; rank 0..ranks-1) and
  // returns whether it is within kIterationWindow of the median.
  bool Offer(int rank, std::int64_t iteration);
  // The current iteration (lower median of the ranks' latest); -1 before
  // any report.
  std::int64_t median() const { return low_.empty() ? -1 : *low_.rbegin(); }

 private:
  void Insert(std::int64_t v);
  void Erase(std::int64_t v);
  void Balance();

  std::vector<std::int64_t> latest_;  // per rank; -1: not reported
  // Every reporting rank's latest: low_ holds the smaller half (one more
  // when odd), every element of low_ <= every element of high_.
  std::multiset<std::int64_t> low_, high_;
};

}  // namespace joulepipe::coord
