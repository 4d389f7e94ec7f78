// The refinements (greedy filling, polishing, the neighbourhood search) stop
// between two moves once their StopCheck fires: each runs O(n) per move, so
// on the largest pipelines one call takes hours, and before this a
// cancelled `joulepipe plan` of 5 stages x 100,000 microbatches still ran
// more than 2 minutes after SIGTERM (now 0.1 s; issue 41).
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "../../src/solver/activity_graph.hpp"
#include "../../src/solver/greedy.hpp"
#include "../../src/solver/neighbourhood_search.hpp"
#include "../../src/solver/polish.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::solver {
namespace {

constexpr double kA100PBlock = 83.64;  // W

struct Case {
  ActivityGraph g;
  double deadline = 0;  // the all-fastest plan's time, with room to spare
};

Case OneFOneB() {
  schedule::Spec spec;
  spec.kind = schedule::Kind::k1F1B;
  spec.stages = 8;
  spec.microbatches = 12;
  const model::Profile profile = model::ReadProfileCsv(
      std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv");
  Case c{BuildActivityGraph(schedule::Build(spec), profile, kA100PBlock), 0};
  // Every activity at its fastest clock fits any deadline at or above its
  // time, and has moves once the deadline leaves room.
  c.deadline = GreedyFill(c.g, kA100PBlock, 0).time_s * 1.05;
  return c;
}

TEST(RefinementStop, EachRefinementStopsWhenTheRounderStopsOrTheCallerCancels) {
  const Case c = OneFOneB();
  std::atomic<bool> stopped{false}, cancel{false};
  const StopCheck stop{&cancel, &stopped};

  // Not stopped: the same plan as without a check.
  RoundedPlan plan = GreedyFill(c.g, kA100PBlock, c.deadline, nullptr, stop);
  const RoundedPlan unchecked = GreedyFill(c.g, kA100PBlock, c.deadline);
  EXPECT_EQ(plan.choice, unchecked.choice);
  ASSERT_LE(plan.time_s, c.deadline);

  for (std::atomic<bool>* flag : {&stopped, &cancel}) {
    SCOPED_TRACE(flag == &stopped ? "the rounder's stop" : "the caller's cancel");
    *flag = true;
    EXPECT_THROW(GreedyFill(c.g, kA100PBlock, c.deadline, nullptr, stop), model::Cancelled);
    RoundedPlan copy = plan;
    EXPECT_THROW(Polisher(c.g, kA100PBlock).Polish(c.deadline, copy, 12, stop), model::Cancelled);
    EXPECT_THROW(NeighbourhoodSearch(c.g, kA100PBlock, c.deadline, copy, 2, stop),
                 model::Cancelled);
    *flag = false;
  }
}

}  // namespace
}  // namespace joulepipe::solver
