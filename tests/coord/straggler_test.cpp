// Straggler detection over recorded iteration streams.
#include "joulepipe/coord/straggler.hpp"

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::coord {
namespace {

// Feeds iterations of per-pipeline measured times (predicted 1 s each) and
// returns, per iteration, whether the detector changed its verdict.
std::vector<bool> Feed(StragglerDetector* d, const std::vector<std::vector<double>>& stream) {
  std::vector<bool> changed;
  for (const std::vector<double>& measured : stream) {
    changed.push_back(d->Observe(measured, std::vector<double>(measured.size(), 1.0)));
  }
  return changed;
}

TEST(StragglerDetector, NeedsWindowSlowIterationsAndWindowFastOnesToRecover) {
  StragglerDetector d(3, {});
  const std::vector<bool> changed = Feed(&d, {{1, 1, 1},
                                              {1, 1.2, 1},  // onset
                                              {1, 1.2, 1},  // second slow one: straggling
                                              {1, 1.2, 1},
                                              {1, 1, 1},    // recovery
                                              {1, 1, 1}});  // second fast one: recovered
  EXPECT_EQ(changed, (std::vector<bool>{false, false, true, false, false, true}));
  EXPECT_FALSE(d.any());
}

TEST(StragglerDetector, EstimatesTheSlowdownConservatively) {
  StragglerDetector d(3, {});
  Feed(&d, {{1, 1.25, 1}, {1, 1.2, 1}});
  EXPECT_DOUBLE_EQ(d.slowdowns()[1], 1.2);  // the smaller of the window
  EXPECT_EQ(d.slowdowns()[0], 1);
  EXPECT_EQ(d.slowdowns()[2], 1);
}

TEST(StragglerDetector, IgnoresOneOffSlowIterationsAndNoise) {
  StragglerDetector d(4, {});
  const std::vector<bool> changed = Feed(&d, {{1.00, 1.02, 0.99, 1.01},
                                              {1.01, 1.00, 1.30, 1.00},  // a hiccup
                                              {0.99, 1.02, 1.01, 1.00},
                                              {1.02, 0.98, 1.00, 1.03},
                                              {1.00, 1.01, 1.00, 1.60},  // another
                                              {1.00, 1.00, 1.02, 1.01}});
  for (bool c : changed) EXPECT_FALSE(c);
  EXPECT_FALSE(d.any());
}

TEST(StragglerDetector, RatiosAreRelativeToThePlanEachPipelineRan) {
  // Pipeline 0 was deliberately slowed to a 1.2 s plan and takes 1.2 s: on
  // time. Pipeline 1 runs the 1 s plan and takes 1.2 s: the straggler.
  StragglerDetector d(2, {});
  for (int i = 0; i < 3; ++i) d.Observe({1.2, 1.2}, {1.2, 1.0});
  EXPECT_EQ(d.slowdowns()[0], 1);
  EXPECT_DOUBLE_EQ(d.slowdowns()[1], 1.2);
}

TEST(StragglerDetector, CommonOverheadCancels) {
  // Every pipeline 10% over its prediction (e.g. the optimizer step): no one
  // straggles.
  StragglerDetector d(3, {});
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(d.Observe({1.1, 1.1, 1.1}, {1, 1, 1}));
  EXPECT_FALSE(d.any());
}

TEST(StragglerDetector, ReEstimatesWhenTheSlowdownMovesBeyondMinChange) {
  StragglerDetector d(2, {});
  Feed(&d, {{1, 1.2}, {1, 1.2}});
  EXPECT_DOUBLE_EQ(d.slowdowns()[1], 1.2);
  EXPECT_FALSE(d.Observe({1, 1.22}, {1, 1}));  // 1.7%: not worth a switch
  EXPECT_FALSE(d.Observe({1, 1.5}, {1, 1}));   // window still holds 1.22
  EXPECT_TRUE(d.Observe({1, 1.5}, {1, 1}));
  EXPECT_DOUBLE_EQ(d.slowdowns()[1], 1.5);
}

TEST(StragglerDetector, SkipsUnmeasuredPipelines) {
  StragglerDetector d(2, {});
  EXPECT_FALSE(d.Observe({0, -1}, {1, 1}));
  Feed(&d, {{1, 1.3}, {1, 1.3}});
  EXPECT_TRUE(d.any());
}

TEST(StragglerDetector, SeedStartsFromAKnownStraggler) {
  StragglerDetector d(2, {});
  d.Seed({1, 1.2});
  EXPECT_TRUE(d.any());
  Feed(&d, {{1, 1}});
  EXPECT_TRUE(d.any());
  EXPECT_TRUE(d.Observe({1, 1}, {1, 1}));
  EXPECT_FALSE(d.any());
}

TEST(StragglerDetector, OptionsAreCheckedByField) {
  const auto field = [](protocol::StragglerOptions o) {
    try {
      CheckStragglerOptions(o);
    } catch (const model::InputError& e) {
      return e.field();
    }
    return std::string("none");
  };
  EXPECT_EQ(field({}), "none");
  EXPECT_EQ(field({.threshold = 1}), "StragglerOptions::threshold");
  EXPECT_EQ(field({.threshold = 1.05, .recover_below = 1.1}), "StragglerOptions::recover_below");
  EXPECT_EQ(field({.window = 0}), "StragglerOptions::window");
  EXPECT_EQ(field({.min_change = -1}), "StragglerOptions::min_change");
  EXPECT_THROW(StragglerDetector(0, {}), model::InputError);
}

}  // namespace
}  // namespace joulepipe::coord
