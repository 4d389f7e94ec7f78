#include "joulepipe/model/format.hpp"

#include <gtest/gtest.h>

namespace joulepipe::model {
namespace {

// A plan faster than its reference is a speed-up, never "slowdown -2.226%"
// nor "slowdown -0.000%" (issue 44: `plan` printed the latter for a "same
// time" plan that a simulated GPU made faster).
TEST(SlowdownTextTest, AFasterPlanIsASpeedUp) {
  EXPECT_EQ(SlowdownText(105, 100), "slowdown 5.000%");
  EXPECT_EQ(SlowdownText(100, 100), "slowdown 0.000%");
  EXPECT_EQ(SlowdownText(97.774, 100), "speed-up 2.226%");
  // Shorter by less than "%.3f" shows: no sign to print.
  EXPECT_EQ(SlowdownText(100 - 1e-5, 100), "slowdown 0.000%");
  EXPECT_EQ(SlowdownText(100 - 1e-3, 100), "speed-up 0.001%");
}

}  // namespace
}  // namespace joulepipe::model
