// The "simulate a job" task call (simulate_job.hpp): it plans through
// solver::PlanPipeline (T and T' exact), simulates both policies, and its
// errors name SimulateRequest / JobSpec / Straggler fields, never a flag or
// the plan call's own fields.
#include "joulepipe/sim/simulate_job.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::sim {
namespace {

using model::Kind;
using model::testing::Point;

constexpr double kPBlock = 80.0;

// Clocks 900..1500 MHz: time falls with the clock, energy is U-shaped, and
// every stage differs.
model::Profile MakeProfile(int stages) {
  return model::testing::UShapedProfile(stages);
}

SimulateRequest StragglerRequest() {
  SimulateRequest r;
  r.spec.kind = schedule::Kind::k1F1B;
  r.spec.stages = 4;
  r.spec.microbatches = 8;
  r.job.pipelines = 3;
  r.p_block_w = kPBlock;
  r.job.iterations = 4;
  r.job.straggler.pipeline = 1;
  r.job.straggler.slowdown = 1.3;
  r.job.straggler.from_iteration = 2;
  r.resolution_s = 2e-3;
  r.profile_name = "sim.csv";
  return r;
}

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

TEST(SimulateJob, StragglerResponseSavesEnergyWithoutSlowingTheJob) {
  const model::Profile profile = MakeProfile(4);
  std::vector<std::pair<std::string, double>> progress;
  SimulateRequest request = StragglerRequest();
  request.progress = [&](const char* phase, double fraction) {
    progress.emplace_back(phase, fraction);
  };
  const SimulateOutcome o = SimulateJob(profile, request);
  EXPECT_TRUE(o.has_straggler());
  EXPECT_EQ(o.gpus(), 3 * 4);
  ASSERT_EQ(o.baseline.iterations.size(), 4u);
  EXPECT_LT(o.joulepipe.MeanEnergy(), o.baseline.MeanEnergy());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_LE(o.joulepipe.iterations[i].time_s, o.baseline.iterations[i].time_s * (1 + 1e-12));
  }
  EXPECT_LE(o.intrinsic.time_s, o.max_clock.time_s);
  EXPECT_LE(o.intrinsic.energy_j, o.max_clock.energy_j);
  // The others run a cheaper plan within T' = 1.3 T.
  EXPECT_DOUBLE_EQ(o.straggler_target_s, 1.3 * o.intrinsic.time_s);
  EXPECT_LE(o.straggler_plan.time_s, o.straggler_target_s * (1 + 1e-12));
  EXPECT_LT(o.straggler_plan.energy_j, o.intrinsic.energy_j);
  EXPECT_EQ(o.frontier_points, o.frontier.points.size());
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().first, "simulating");
  EXPECT_EQ(progress.back().second, 1.0);
}

// The coordinator's detector on the simulated iteration times: with window
// w on a noiseless job it switches exactly when the oracle does w
// iterations late, both ways, so the energy is the same to the bit.
TEST(SimulateJob, MeasuredDetectionIsTheOracleWindowIterationsLate) {
  const model::Profile profile = MakeProfile(4);
  SimulateRequest request = StragglerRequest();
  request.job.iterations = 14;
  request.job.straggler.slowdown = 1.2;
  request.job.straggler.from_iteration = 3;
  request.job.straggler.for_iterations = 5;  // 3..7
  request.detection = Detection::kMeasured;
  request.detector.window = 2;
  const SimulateOutcome measured = SimulateJob(profile, request);
  request.detection = Detection::kOracle;
  request.detection_lag = 2;
  const SimulateOutcome oracle = SimulateJob(profile, request);
  EXPECT_EQ(measured.joulepipe.plan, oracle.joulepipe.plan);
  EXPECT_EQ(measured.joulepipe.TotalEnergy(), oracle.joulepipe.TotalEnergy());
  EXPECT_LT(measured.joulepipe.TotalEnergy(), measured.baseline.TotalEnergy());
  // Pipeline 0 leaves the intrinsic plan in iterations 5..9 only.
  const int intrinsic = measured.joulepipe.plan[0];
  for (int i = 0; i < 14; ++i) {
    const bool switched = measured.joulepipe.plan[static_cast<std::size_t>(i) * 3] != intrinsic;
    EXPECT_EQ(switched, i >= 5 && i <= 9) << "iteration " << i;
  }
  EXPECT_EQ(measured.straggler_plan.time_s, oracle.straggler_plan.time_s);
  EXPECT_NEAR(measured.straggler_target_s, oracle.straggler_target_s, 1e-12);  // measured 1.2x
  request.detection = Detection::kMeasured;
  request.detector.window = 0;
  EXPECT_EQ(ErrorOf([&] { SimulateJob(profile, request); }).field(), "StragglerOptions::window");
}

// The plan it simulates is PlanPipeline's with the straggler's factor.
TEST(SimulateJob, PlansThroughPlanPipeline) {
  const model::Profile profile = MakeProfile(4);
  const SimulateRequest request = StragglerRequest();
  const SimulateOutcome o = SimulateJob(profile, request);
  solver::PlanRequest plan_request;
  plan_request.spec = request.spec;
  plan_request.p_block_w = kPBlock;
  plan_request.resolution_s = request.resolution_s;
  plan_request.extra_deadline_factors = {1.3};
  const solver::PipelinePlan plan = solver::PlanPipeline(profile, plan_request);
  ASSERT_EQ(o.frontier.points.size(), plan.frontier.points.size());
  for (size_t i = 0; i < plan.frontier.points.size(); ++i) {
    EXPECT_EQ(o.frontier.points[i].energy_j, plan.frontier.points[i].energy_j) << i;
  }
  EXPECT_EQ(o.intrinsic.mhz, plan.chosen_point().mhz);
  EXPECT_EQ(o.max_clock.energy_j, plan.baseline.energy_j);
}

// One noiseless pipeline runs the intrinsic plan: the simulated iteration is
// the plan's own figures.
TEST(SimulateJob, OnePipelineWithoutStragglerIsTheIntrinsicPlan) {
  SimulateRequest request = StragglerRequest();
  request.job.pipelines = 1;
  request.job.straggler.slowdown = 1;
  const SimulateOutcome o = SimulateJob(MakeProfile(4), request);
  EXPECT_FALSE(o.has_straggler());
  EXPECT_EQ(o.request.job.straggler.pipeline, -1);
  const double e = o.joulepipe.iterations[0].energy_j, t = o.joulepipe.iterations[0].time_s;
  EXPECT_NEAR(e, o.intrinsic.energy_j, 1e-9 * e);
  EXPECT_NEAR(t, o.intrinsic.time_s, 1e-9 * t);
  EXPECT_NEAR(o.baseline.iterations[0].energy_j, o.max_clock.energy_j, 1e-9 * e);
}

TEST(SimulateJob, ErrorsNameItsOwnFields) {
  const model::Profile profile = MakeProfile(4);
  struct Case {
    const char* field;
    void (*edit)(SimulateRequest*);
  };
  const Case cases[] = {
      {"JobSpec::pipelines", [](SimulateRequest* r) { r->job.pipelines = 0; }},
      {"JobSpec::gpus_per_stage", [](SimulateRequest* r) { r->job.gpus_per_stage = 0; }},
      {"JobSpec::iterations", [](SimulateRequest* r) { r->job.iterations = 0; }},
      {"SimulateRequest::p_block_w", [](SimulateRequest* r) { r->p_block_w = -1; }},
      {"SimulateRequest::p_block_w", [](SimulateRequest* r) { r->p_block_w.reset(); }},
      {"JobSpec::clock_variability", [](SimulateRequest* r) { r->job.clock_variability = 0.5; }},
      {"JobSpec::stall_probability", [](SimulateRequest* r) { r->job.stall_probability = 2; }},
      {"JobSpec::stall_s", [](SimulateRequest* r) { r->job.stall_s = -1; }},
      {"JobSpec::p2p_latency_s", [](SimulateRequest* r) { r->job.p2p_latency_s = -1; }},
      {"JobSpec::allreduce_s",
       [](SimulateRequest* r) { r->job.allreduce_s = std::numeric_limits<double>::infinity(); }},
      {"Straggler::slowdown", [](SimulateRequest* r) { r->job.straggler.slowdown = 0.9; }},
      {"Straggler::pipeline", [](SimulateRequest* r) { r->job.straggler.pipeline = 3; }},
      {"Straggler::from_iteration",
       [](SimulateRequest* r) { r->job.straggler.from_iteration = -1; }},
      {"Straggler::for_iterations",
       [](SimulateRequest* r) {
         r->job.straggler.period = 3;
         r->job.straggler.for_iterations = 5;
       }},
      {"Straggler::period", [](SimulateRequest* r) { r->job.straggler.period = -1; }},
      {"SimulateRequest::detection_lag", [](SimulateRequest* r) { r->detection_lag = -1; }},
      {"SimulateRequest::resolution_s", [](SimulateRequest* r) { r->resolution_s = 0; }},
      {"SimulateRequest::timeline_iterations",
       [](SimulateRequest* r) { r->timeline_iterations = -1; }},
      // Found by the plan call, renamed into this request's terms.
      {"SimulateRequest::resolution_s", [](SimulateRequest* r) { r->resolution_s = 1e-10; }},
      {"Spec::stages", [](SimulateRequest* r) { r->spec.stages = 3; }},
  };
  for (const Case& c : cases) {
    SimulateRequest request = StragglerRequest();
    c.edit(&request);
    const model::InputError error = ErrorOf([&] { SimulateJob(profile, request); });
    const std::string message = error.what();
    SCOPED_TRACE(message);
    EXPECT_EQ(error.field(), c.field);
    EXPECT_NE(message.find(c.field), std::string::npos);
    EXPECT_EQ(message.find("--"), std::string::npos) << "names a flag";
    EXPECT_EQ(message.find("PlanRequest::"), std::string::npos) << "names the plan call's field";
  }
}

// Absurd numbers are refused with their plausible range before any work
// (docs/limits.md, "Numbers and ranges"): they used to give "-589934592
// GPUs", "inf J", "saving -nan%" or 300-digit figures with success.
TEST(SimulateJob, AbsurdNumbersAreRefusedWithTheirRange) {
  struct Case {
    const char* field;
    const char* range;
    void (*edit)(SimulateRequest*);
  };
  const Case cases[] = {
      {"JobSpec::gpus_per_stage", "1..1024 (got 2000000000)",
       [](SimulateRequest* r) { r->job.gpus_per_stage = 2000000000; }},
      {"JobSpec::pipelines", "1..100000 (got 2000000000)",
       [](SimulateRequest* r) { r->job.pipelines = 2000000000; }},
      // Each count in range, the product (in 64 bits) not.
      {"JobSpec::pipelines",
       "JobSpec::pipelines 100000 x Spec::stages 4 x "
       "JobSpec::gpus_per_stage 1024 = 409600000 GPUs",
       [](SimulateRequest* r) {
         r->job.pipelines = 100000;
         r->job.gpus_per_stage = 1024;
         r->job.iterations = 1;
       }},
      {"JobSpec::stall_s", "0..3600000 ms (got 1e+308 ms)",
       [](SimulateRequest* r) { r->job.stall_s = 1e305; }},
      {"JobSpec::allreduce_s", "0..3600000 ms (got 1e+300 ms)",
       [](SimulateRequest* r) { r->job.allreduce_s = 1e297; }},
      {"JobSpec::p2p_latency_s", "0..1000000 us (got 2e+06 us)",
       [](SimulateRequest* r) { r->job.p2p_latency_s = 2; }},
      {"Straggler::slowdown", "1..100 (got 1e+308)",
       [](SimulateRequest* r) { r->job.straggler.slowdown = 1e308; }},
      {"Straggler::from_iteration", "0..1000000000 iterations (got 2000000000)",
       [](SimulateRequest* r) { r->job.straggler.from_iteration = 2000000000; }},
      {"SimulateRequest::detection_lag", "0..1000000000 iterations",
       [](SimulateRequest* r) { r->detection_lag = 2000000000; }},
      {"SimulateRequest::p_block_w", "0..5000", [](SimulateRequest* r) { r->p_block_w = 1e308; }},
      {"Spec::stages", "1..1024 (got 2000)", [](SimulateRequest* r) { r->spec.stages = 2000; }},
      {"SimulateRequest::resolution_s", "at most an hour",
       [](SimulateRequest* r) { r->resolution_s = 1e305; }},
  };
  for (const Case& c : cases) {
    SimulateRequest request = StragglerRequest();
    c.edit(&request);
    const model::InputError error = ErrorOf([&] { CheckSimulateRequest(request); });
    const std::string message = error.what();
    SCOPED_TRACE(message);
    EXPECT_EQ(error.field(), c.field);
    EXPECT_NE(message.find(c.range), std::string::npos) << c.range;
    EXPECT_EQ(message.find("--"), std::string::npos) << "names a flag";
  }
  // At the bounds, and the GPU count is a 64-bit product.
  SimulateRequest request = StragglerRequest();
  request.job.gpus_per_stage = 1024;
  request.job.straggler.slowdown = 100;
  request.job.stall_s = 3600;
  request.job.allreduce_s = 3600;
  request.job.p2p_latency_s = 1;
  EXPECT_NO_THROW(CheckSimulateRequest(request));
  SimulateOutcome outcome;
  outcome.request = request;
  outcome.request.job.pipelines = 100000;
  EXPECT_EQ(outcome.gpus(), std::int64_t{100000} * 4 * 1024);
}

TEST(SimulateJob, PBlockNoteNamesTheRequestField) {
  model::Profile profile = MakeProfile(4);
  profile.metadata.p_block_w = 60;
  const SimulateOutcome o = SimulateJob(profile, StragglerRequest());
  ASSERT_EQ(o.notes.size(), 1u);
  EXPECT_NE(o.notes[0].find("SimulateRequest::p_block_w"), std::string::npos) << o.notes[0];
  EXPECT_EQ(o.notes[0].find("PlanRequest::"), std::string::npos) << o.notes[0];
  EXPECT_EQ(o.p_block_source, "request");
  EXPECT_EQ(o.request.job.p_block_w, kPBlock);
}

TEST(SimulateJob, PBlockFromTheProfileWhenTheRequestHasNone) {
  model::Profile profile = MakeProfile(4);
  profile.metadata.p_block_w = 60;
  SimulateRequest request = StragglerRequest();
  request.p_block_w.reset();
  const SimulateOutcome from_profile = SimulateJob(profile, request);
  EXPECT_EQ(from_profile.p_block_source, "profile");
  EXPECT_EQ(from_profile.request.job.p_block_w, 60);
  EXPECT_TRUE(from_profile.notes.empty());
  // The same job with the same P_block given explicitly: the same figures.
  request.p_block_w = 60;
  const SimulateOutcome explicit_value = SimulateJob(profile, request);
  EXPECT_EQ(from_profile.joulepipe.MeanEnergy(), explicit_value.joulepipe.MeanEnergy());
  EXPECT_EQ(from_profile.baseline.MeanEnergy(), explicit_value.baseline.MeanEnergy());
}

TEST(SimulateJob, CancelledStopsIt) {
  const model::Profile profile = MakeProfile(4);
  std::atomic<bool> cancel{false};
  SimulateRequest request = StragglerRequest();
  request.cancel = &cancel;
  // Raised once the simulation starts, after planning.
  request.progress = [&](const char* phase, double) {
    if (std::string(phase) == "simulating") cancel = true;
  };
  EXPECT_THROW(SimulateJob(profile, request), model::Cancelled);
  cancel = true;
  request.progress = nullptr;
  EXPECT_THROW(SimulateJob(profile, request), model::Cancelled);
}

}  // namespace
}  // namespace joulepipe::sim
