// IterationWindow against a brute-force median, and the cases it exists for.
#include "joulepipe/coord/iteration_window.hpp"

#include <algorithm>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace joulepipe::coord {
namespace {

// The lower median of the reporting ranks' latest iterations, by sorting.
std::int64_t BruteMedian(const std::vector<std::int64_t>& latest) {
  std::vector<std::int64_t> v;
  for (std::int64_t x : latest)
    if (x >= 0) v.push_back(x);
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

TEST(IterationWindow, MedianMatchesSortingOverRandomReports) {
  std::mt19937_64 rng(7);
  for (int ranks : {1, 2, 3, 8, 33}) {
    IterationWindow w(ranks);
    std::vector<std::int64_t> latest(ranks, -1);
    for (int step = 0; step < 4000; ++step) {
      const int rank = static_cast<int>(rng() % ranks);
      // Mostly near the others, sometimes wild, sometimes a retry.
      std::int64_t it = step / ranks + static_cast<std::int64_t>(rng() % 5);
      if (rng() % 50 == 0) it = static_cast<std::int64_t>(rng() % 1'000'000'000'000LL);
      if (rng() % 10 == 0 && latest[rank] >= 0) it = latest[rank];
      latest[rank] = it;  // where the rank says it is now
      const std::int64_t m = BruteMedian(latest);
      const bool admitted = w.Offer(rank, it);
      ASSERT_EQ(w.median(), m) << "ranks " << ranks << " step " << step;
      ASSERT_EQ(admitted, std::llabs(it - m) <= kIterationWindow);
    }
  }
}

TEST(IterationWindow, OneRanksNonsenseMovesNothing) {
  IterationWindow w(4);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(w.Offer(r, 10));
  EXPECT_FALSE(w.Offer(3, 1'000'000'000'000LL));
  EXPECT_EQ(w.median(), 10);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(w.Offer(r, 40));
  EXPECT_EQ(w.median(), 40);
  EXPECT_FALSE(w.Offer(3, 0));  // behind the window too
}

TEST(IterationWindow, RanksThatFellSilentComeBackTogether) {
  // Two ranks: rank 1 falls silent at 0 while rank 0 goes on; rank 0 is
  // refused beyond the window, then both come back at 100.
  IterationWindow w(2);
  EXPECT_TRUE(w.Offer(0, 0));
  EXPECT_TRUE(w.Offer(1, 0));
  for (int i = 1; i <= kIterationWindow; ++i) EXPECT_TRUE(w.Offer(0, i));
  EXPECT_FALSE(w.Offer(0, 99));
  EXPECT_TRUE(w.Offer(1, 100));  // the median is now 99
  EXPECT_TRUE(w.Offer(0, 100));
  EXPECT_EQ(w.median(), 100);
}

// Issue 41, finding 10: a job's first report at 10^12 anchored the window
// there, and the same rank's real iteration 0 was refused until another
// rank reported.
TEST(IterationWindow, AFirstNonsenseReportDoesNotLockItsRankOut) {
  IterationWindow w(2);
  EXPECT_TRUE(w.Offer(0, 1'000'000'000'000LL));  // the only report: it anchors
  EXPECT_TRUE(w.Offer(0, 0));                    // the rank's real iteration
  EXPECT_EQ(w.median(), 0);
  EXPECT_TRUE(w.Offer(1, 0));
  EXPECT_TRUE(w.Offer(0, 1));
  EXPECT_FALSE(w.Offer(1, 1'000'000'000'000LL));  // now a minority of one
  EXPECT_EQ(w.median(), 1);
  EXPECT_TRUE(w.Offer(1, 1));
}

TEST(IterationWindow, TheFirstReportsAnchorItWhereverTheRanksAre) {
  // A restarted service: the ranks are at iteration 5,000.
  IterationWindow w(3);
  EXPECT_TRUE(w.Offer(0, 5000));
  EXPECT_TRUE(w.Offer(1, 5001));
  EXPECT_TRUE(w.Offer(2, 4999));
  EXPECT_EQ(w.median(), 5000);
}

}  // namespace
}  // namespace joulepipe::coord
