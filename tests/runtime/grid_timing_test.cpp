// A grid plan's timed levers on one rank (runtime/grid_timing.hpp): the
// offset this pipeline waits at each step's beginning and the step at which
// the stop ramp begins, decided from the numbers given (no sleeping here).
#include "joulepipe/runtime/grid_timing.hpp"

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace joulepipe::runtime {
namespace {

using Clock = GridTiming::Clock;

Clock::time_point At(double seconds) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

TEST(GridTiming, PipelinePWaitsPTimesTheOffsetAndSaysSo) {
  GridTiming first(0, std::nullopt);
  EXPECT_TRUE(first.SetPlan(0.25, 0).empty());  // pipeline 0 waits nothing, says nothing
  EXPECT_EQ(first.OnStepBegin(0, At(0)).wait_s, 0);
  GridTiming third(2, std::nullopt);
  const std::vector<std::string> lines = third.SetPlan(0.25, 0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "pipeline 2 starts each iteration 500 ms late (the plan's offset between pipelines, "
            "250 ms each)");
  EXPECT_DOUBLE_EQ(third.OnStepBegin(0, At(0)).wait_s, 0.5);
  EXPECT_DOUBLE_EQ(third.OnStepBegin(1, At(1)).wait_s, 0.5);
  third.Clear();  // the plan was refused or fallen back from
  EXPECT_EQ(third.OnStepBegin(2, At(2)).wait_s, 0);
}

TEST(GridTiming, TheStopRampBeginsOnceTheIterationsLeftFitInIt) {
  // Steps of 0.3 s, the last iteration 5, a 0.5 s ramp: at step 4 two
  // iterations (0.6 s) are left, at step 5 one (0.3 s), which fits.
  GridTiming timing(0, 5);
  EXPECT_TRUE(timing.SetPlan(0, 0.5).empty());
  for (int step = 0; step < 5; ++step) {
    EXPECT_EQ(timing.OnStepBegin(step, At(0.3 * step)).stop_ramp_s, 0) << step;
  }
  const GridTiming::AtStepBegin last = timing.OnStepBegin(5, At(1.5));
  EXPECT_NEAR(last.stop_ramp_s, 0.3, 1e-9);
  EXPECT_EQ(last.iterations_left, 1);
  EXPECT_EQ(timing.OnStepBegin(6, At(1.8)).stop_ramp_s, 0);  // once
}

TEST(GridTiming, TheStopRampTakesTheMedianPeriodAndTheFrameworksNumbers) {
  // One slow step (a checkpoint) does not move the median; the numbers are
  // the framework's (a resumed run from 1000).
  GridTiming timing(0, 1009);
  timing.SetPlan(0, 3.5);
  const double begins[] = {0, 1, 2, 12, 13, 14, 15, 16};  // step 1002 took 10 s
  for (int k = 0; k < 8; ++k) {
    const GridTiming::AtStepBegin at = timing.OnStepBegin(1000 + k, At(begins[k]));
    if (k < 7) {
      EXPECT_EQ(at.stop_ramp_s, 0) << k;
    } else {  // 1007, 1008 and 1009 left at the median period, 1 s
      EXPECT_NEAR(at.stop_ramp_s, 3.0, 1e-9);
      EXPECT_EQ(at.iterations_left, 3);
    }
  }
}

TEST(GridTiming, WithoutTheLastIterationTheStopIsNotRampedAndSaidSo) {
  GridTiming timing(1, std::nullopt);
  const std::vector<std::string> lines = timing.SetPlan(0, 4);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("the stop is not ramped"), std::string::npos) << lines[0];
  for (int step = 0; step < 20; ++step)
    EXPECT_EQ(timing.OnStepBegin(step, At(step)).stop_ramp_s, 0);
}

}  // namespace
}  // namespace joulepipe::runtime
