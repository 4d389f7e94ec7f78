// The "plan a pipeline" task call (plan_pipeline.hpp): the chosen plan is the
// least-energy frontier point within the deadline, the frontier is exactly
// SolveFrontier's for the same deadlines, P_block comes from the request or
// the profile's metadata (with a note when they disagree), cancellation stops
// the solve, and every error names a library field, never a flag.
#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/schedule/clock_plans.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::solver {
namespace {

using model::testing::Point;

// `stages` stages, four clocks each; later stages are slower, so the
// pipeline has slack. Lower clocks take longer and, down to 1000 MHz, use
// less energy.
model::Profile SmallProfile(int stages) {
  return model::testing::FourClockProfile(stages, /*skew=*/0.15, /*watts=*/3);
}

PlanRequest SmallRequest() {
  PlanRequest request;
  request.spec.kind = schedule::Kind::k1F1B;
  request.spec.stages = 4;
  request.spec.microbatches = 8;
  request.p_block_w = 60;
  request.resolution_s = 1e-4;
  request.profile_name = "small.csv";
  return request;
}

// The InputError `action` throws; fails the test if none.
template <typename Action>
model::InputError ErrorOf(Action&& action) {
  try {
    action();
  } catch (const model::InputError& error) {
    return error;
  }
  ADD_FAILURE() << "expected model::InputError";
  return model::InputError("", "");
}

void ExpectNamesField(const model::InputError& error, const std::string& field) {
  const std::string message = error.what();
  EXPECT_EQ(error.field(), field) << message;
  EXPECT_NE(message.find(field), std::string::npos) << message;
  EXPECT_EQ(message.find("--"), std::string::npos) << "names a flag: " << message;
}

TEST(PlanPipeline, ChoosesTheLeastEnergyPlanWithinTheDeadline) {
  const model::Profile profile = SmallProfile(4);
  for (double slowdown : {0.0, 0.05, 0.3}) {
    SCOPED_TRACE("slowdown " + std::to_string(slowdown));
    PlanRequest request = SmallRequest();
    request.slowdown = slowdown;
    const PipelinePlan plan = PlanPipeline(profile, request);
    EXPECT_EQ(plan.deadline_s, (1 + slowdown) * plan.baseline.time_s);
    EXPECT_EQ(plan.p_block_w, 60);
    EXPECT_EQ(plan.p_block_source, "request");
    EXPECT_TRUE(plan.notes.empty());
    ASSERT_LT(plan.chosen, plan.frontier.points.size());
    const FrontierPoint& chosen = plan.chosen_point();
    EXPECT_LE(chosen.time_s, plan.deadline_s);
    EXPECT_LT(chosen.energy_j, plan.baseline.energy_j) << "the small profile has slack to use";
    for (const FrontierPoint& p : plan.frontier.points) {
      if (p.time_s <= plan.deadline_s) {
        EXPECT_GE(p.energy_j, chosen.energy_j);
      }
    }
    EXPECT_LE(plan.bound_energy_j, plan.frontier.BestWithin(plan.baseline.time_s)->energy_j);
    EXPECT_GT(plan.slowest_s, plan.baseline.time_s);
    // The baseline is the all-max-clock plan, evaluated exactly.
    const Evaluation max_clock = EvaluateClocks(
        plan.schedule, profile, 60, schedule::UniformClocks(plan.schedule, profile, true));
    EXPECT_EQ(plan.baseline.time_s, max_clock.time_s);
    EXPECT_EQ(plan.baseline.energy_j, max_clock.energy_j);
  }
}

// The task call adds no arithmetic: its frontier is SolveFrontier's for the
// deadline and the extra factors, bit for bit.
TEST(PlanPipeline, FrontierIsSolveFrontiersForTheSameDeadlines) {
  const model::Profile profile = SmallProfile(4);
  PlanRequest request = SmallRequest();
  request.slowdown = 0.02;
  request.extra_deadline_factors = {1.2};
  const PipelinePlan plan = PlanPipeline(profile, request);

  Options options;
  options.p_block_w = 60;
  options.resolution_s = request.resolution_s;
  options.extra_deadlines_s = {plan.deadline_s, 1.2 * plan.baseline.time_s};
  const Frontier direct = SolveFrontier(schedule::Build(request.spec), profile, options);
  ASSERT_EQ(plan.frontier.points.size(), direct.points.size());
  for (size_t i = 0; i < direct.points.size(); ++i) {
    EXPECT_EQ(plan.frontier.points[i].time_s, direct.points[i].time_s) << i;
    EXPECT_EQ(plan.frontier.points[i].energy_j, direct.points[i].energy_j) << i;
    EXPECT_EQ(plan.frontier.points[i].mhz, direct.points[i].mhz) << i;
  }
  const FrontierPoint* straggler = plan.frontier.BestWithin(1.2 * plan.baseline.time_s);
  ASSERT_NE(straggler, nullptr);
  EXPECT_LE(straggler->energy_j, plan.chosen_point().energy_j);
}

TEST(PlanPipeline, PrepareChecksAndEvaluatesThenSolveCompletes) {
  const model::Profile profile = SmallProfile(4);
  PipelinePlan plan = PreparePipelinePlan(profile, SmallRequest());
  EXPECT_TRUE(plan.frontier.points.empty());
  EXPECT_GT(plan.baseline.time_s, 0);
  EXPECT_EQ(plan.schedule.num_nodes(), 2 * 4 * 8);
  SolvePipelinePlan(profile, &plan);
  const PipelinePlan whole = PlanPipeline(profile, SmallRequest());
  ASSERT_EQ(plan.frontier.points.size(), whole.frontier.points.size());
  EXPECT_EQ(plan.chosen, whole.chosen);
  EXPECT_EQ(plan.chosen_point().energy_j, whole.chosen_point().energy_j);
}

TEST(PlanPipeline, PBlockComesFromTheProfileMetadataWhenTheRequestHasNone) {
  model::Profile profile = SmallProfile(4);
  profile.metadata.p_block_w = 45;
  PlanRequest request = SmallRequest();
  request.p_block_w.reset();
  const PipelinePlan plan = PlanPipeline(profile, request);
  EXPECT_EQ(plan.p_block_w, 45);
  EXPECT_EQ(plan.p_block_source, "profile");
  EXPECT_TRUE(plan.notes.empty());
  const Evaluation max_clock = EvaluateClocks(
      plan.schedule, profile, 45, schedule::UniformClocks(plan.schedule, profile, true));
  EXPECT_EQ(plan.baseline.energy_j, max_clock.energy_j);

  // The request's value wins; the profile's is the same plan.
  request.p_block_w = 45;
  const PipelinePlan explicit_plan = PlanPipeline(profile, request);
  EXPECT_EQ(explicit_plan.p_block_source, "request");
  EXPECT_EQ(explicit_plan.chosen_point().energy_j, plan.chosen_point().energy_j);
}

TEST(PlanPipeline, RequestThatDisagreesWithTheProfileGetsANote) {
  model::Profile profile = SmallProfile(4);
  profile.metadata.p_block_w = 60;
  PlanRequest request = SmallRequest();
  request.p_block_w = 70;
  const PipelinePlan plan = PreparePipelinePlan(profile, request);
  EXPECT_EQ(plan.p_block_w, 70);
  EXPECT_EQ(plan.p_block_source, "request");
  ASSERT_EQ(plan.notes.size(), 1u);
  const std::string& note = plan.notes[0];
  for (const char* needle : {"PlanRequest::p_block_w", "70 W", "60 W", "small.csv"}) {
    EXPECT_NE(note.find(needle), std::string::npos) << needle << " not in: " << note;
  }
  // Within 0.5 % is the same value.
  request.p_block_w = 60.25;
  EXPECT_TRUE(PreparePipelinePlan(profile, request).notes.empty());
  request.p_block_w = 60.35;
  EXPECT_EQ(PreparePipelinePlan(profile, request).notes.size(), 1u);
}

TEST(PlanPipeline, MissingPBlockNamesTheRequestField) {
  PlanRequest request = SmallRequest();
  request.p_block_w.reset();
  const model::InputError error = ErrorOf([&] { PreparePipelinePlan(SmallProfile(4), request); });
  ExpectNamesField(error, "PlanRequest::p_block_w");
  const std::string message = error.what();
  EXPECT_NE(message.find("small.csv"), std::string::npos) << message;
  EXPECT_NE(message.find("Perseus/Zeus"), std::string::npos) << message;
}

TEST(PlanPipeline, ImplausibleMetadataPBlockNamesTheProfile) {
  model::Profile profile = SmallProfile(4);
  profile.metadata.p_block_w = -5;
  PlanRequest request = SmallRequest();
  request.p_block_w.reset();
  const model::InputError error = ErrorOf([&] { PreparePipelinePlan(profile, request); });
  const std::string message = error.what();
  EXPECT_NE(message.find("small.csv"), std::string::npos) << message;
  EXPECT_NE(message.find("p_block_w"), std::string::npos) << message;
}

TEST(PlanPipeline, ErrorsNameRequestFieldsNotFlags) {
  const model::Profile profile = SmallProfile(4);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  {
    PlanRequest r = SmallRequest();
    r.slowdown = -0.1;
    ExpectNamesField(ErrorOf([&] { CheckPlanRequest(r); }), "PlanRequest::slowdown");
  }
  {
    PlanRequest r = SmallRequest();
    r.resolution_s = 0;
    ExpectNamesField(ErrorOf([&] { PreparePipelinePlan(profile, r); }),
                     "PlanRequest::resolution_s");
  }
  {
    PlanRequest r = SmallRequest();
    r.p_block_w = nan;
    ExpectNamesField(ErrorOf([&] { PreparePipelinePlan(profile, r); }), "PlanRequest::p_block_w");
  }
  {
    PlanRequest r = SmallRequest();
    r.extra_deadline_factors = {1.2, 0};
    ExpectNamesField(ErrorOf([&] { PreparePipelinePlan(profile, r); }),
                     "PlanRequest::extra_deadline_factors");
  }
  {
    PlanRequest r = SmallRequest();
    r.spec.stages = 0;
    ExpectNamesField(ErrorOf([&] { PreparePipelinePlan(profile, r); }), "Spec::stages");
  }
  {
    // A profile of 4 stages for a 3-stage pipeline: names the profile, the
    // field and the count that would fit.
    PlanRequest r = SmallRequest();
    r.spec.stages = 3;
    const model::InputError error = ErrorOf([&] { PreparePipelinePlan(profile, r); });
    ExpectNamesField(error, "Spec::stages");
    const std::string message = error.what();
    EXPECT_NE(message.find("small.csv"), std::string::npos) << message;
    EXPECT_NE(message.find("Spec::stages to 4"), std::string::npos) << message;
  }
  {
    // Too fine a grid: the finest spacing that fits, in ms.
    PlanRequest r = SmallRequest();
    r.resolution_s = 1e-9;
    const model::InputError error = ErrorOf([&] { PreparePipelinePlan(profile, r); });
    ExpectNamesField(error, "PlanRequest::resolution_s");
    EXPECT_NE(std::string(error.what()).find(" ms or more"), std::string::npos) << error.what();
  }
}

TEST(PlanPipeline, GridSizeLimitIsOneHundredThousandDeadlines) {
  EXPECT_NO_THROW(CheckGridSize(1.0, 1.0 + 100.0, 1e-3));  // 100,000 deadlines
  EXPECT_THROW(CheckGridSize(1.0, 1.0 + 100.01, 1e-3), model::InputError);
  EXPECT_NO_THROW(CheckGridSize(2.0, 1.0, 1e-12));  // nothing between them
}

TEST(PlanPipeline, CancelledBeforeOrDuringTheSolve) {
  const model::Profile profile = SmallProfile(4);
  std::atomic<bool> cancel{true};
  PlanRequest request = SmallRequest();
  request.cancel = &cancel;
  PipelinePlan plan = PreparePipelinePlan(profile, request);  // cheap half: not cancelled
  EXPECT_THROW(SolvePipelinePlan(profile, &plan), model::Cancelled);

  // Raised from the progress callback, as a front end's thread would.
  cancel = false;
  int calls_after_cancel = 0;
  request.progress = [&](const char*, double) {
    if (cancel) ++calls_after_cancel;
    cancel = true;
  };
  EXPECT_THROW(PlanPipeline(profile, request), model::Cancelled);
  EXPECT_EQ(calls_after_cancel, 0) << "the solve went on after the cancel flag was raised";

  // And through SolveFrontier's own option.
  Options options;
  options.p_block_w = 60;
  options.cancel = &cancel;
  EXPECT_THROW(SolveFrontier(schedule::Build(request.spec), profile, options), model::Cancelled);
  cancel = false;
  EXPECT_NO_THROW(SolveFrontier(schedule::Build(request.spec), profile, options));
}

}  // namespace
}  // namespace joulepipe::solver
