// The coordination policy end to end on a small synthetic profile: the
// job's states, per-rank plans, straggler switching and reverting from
// recorded iteration streams, persistence by replay, and bad input.
#include "joulepipe/coord/job.hpp"

#include <chrono>
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/protocol/json.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::coord {
namespace {

// Two stages; forward/backward at 5 clocks. Lower clocks are slower and
// cheaper (power falls faster than time grows), as on real GPUs.
model::Profile SmallProfile() {
  model::Profile p;
  for (int stage = 0; stage < 2; ++stage) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const double base = (kind == model::Kind::kForward ? 0.010 : 0.020) * (1 + 0.3 * stage);
      for (int mhz : {1410, 1300, 1200, 1100, 1000}) {
        const double t = base * std::pow(1410.0 / mhz, 0.8);
        const double watts = 100 + 200 * std::pow(mhz / 1410.0, 2);
        p.Add(stage, kind, model::ClockPoint(mhz, t, t * watts));
      }
    }
  }
  return p;
}

protocol::JobConfig Config(int dp = 3) {
  protocol::JobConfig c;
  c.job_id = "job+1";
  c.pp_degree = 2;
  c.dp_degree = dp;
  c.tp_degree = 1;
  c.spec.stages = 2;
  c.spec.microbatches = 4;
  c.p_block_w = 80;
  c.resolution_s = 1e-3;
  return c;
}

// Rank r = dp * 2 + pp.
void RegisterAll(Job* job) {
  for (int dp = 0; dp < job->config().dp_degree; ++dp) {
    for (int pp = 0; pp < 2; ++pp) {
      job->RegisterRank({dp * 2 + pp, dp, pp, 0, {1410, 1300, 1200, 1100, 1000}});
    }
  }
}

Job PlannedJob(int dp = 3) {
  Job job(Config(dp));
  RegisterAll(&job);
  job.SetProfile(SmallProfile());
  const solver::PipelinePlan plan = solver::PlanPipeline(*job.profile(), job.PlanRequest());
  job.SetPlan(plan, 1000);
  return job;
}

// Every rank but `skip` (-1: none) reports iteration i: pipeline p took its
// plan's predicted time times slow[p]. Returns the switch the iteration
// caused, if any.
std::optional<protocol::PlanSwitch> Iterate(Job* job, std::int64_t i,
                                            const std::vector<double>& slow, int skip = -1) {
  std::optional<protocol::PlanSwitch> out;
  for (const auto& [rank, info] : job->ranks()) {
    if (rank == skip) continue;
    const double t =
        job->frontier()->points[job->point_of_pipeline()[info.dp_rank]].time_s * slow[info.dp_rank];
    const std::optional<protocol::PlanSwitch> s =
        job->ReportIteration({rank, i, t, 50.0}, 2000 + i);
    if (s) out = s;
  }
  return out;
}

TEST(Job, WalksFromRegistrationToPlans) {
  Job job(Config());
  EXPECT_EQ(job.phase(), JobPhase::kWaitingForRanks);
  job.SetProfile(SmallProfile());  // a profile may come first
  EXPECT_EQ(job.phase(), JobPhase::kWaitingForRanks);
  RegisterAll(&job);
  EXPECT_EQ(job.phase(), JobPhase::kReadyToPlan);
  EXPECT_EQ(job.PlanFor(0), std::nullopt);
  job.SetPlan(solver::PlanPipeline(*job.profile(), job.PlanRequest()), 1000);
  EXPECT_EQ(job.phase(), JobPhase::kPlanned);
  EXPECT_EQ(job.plan_version(), 1);
  for (int rank = 0; rank < 6; ++rank) {
    const std::optional<protocol::RankPlan> plan = job.PlanFor(rank);
    ASSERT_TRUE(plan);
    EXPECT_EQ(plan->version, 1);
    EXPECT_EQ(plan->pipeline, rank / 2);
    EXPECT_EQ(plan->stage, rank % 2);
    EXPECT_EQ(plan->point, job.intrinsic_point());
    ASSERT_EQ(plan->instructions.size(), 8u);  // 4 forwards + 4 backwards
    for (const model::PlannedInstruction& i : plan->instructions) {
      EXPECT_EQ(i.instruction.stage, rank % 2);
      EXPECT_GE(i.mhz, 1000);
      EXPECT_LE(i.mhz, 1410);
    }
    EXPECT_NE(plan->reason.find("initial plan"), std::string::npos);
  }
  // The intrinsic plan is within the all-max-clock time and saves energy.
  const solver::FrontierPoint& q = job.frontier()->points[job.intrinsic_point()];
  EXPECT_LE(q.time_s, job.baseline_time_s() * (1 + 1e-9));
  EXPECT_LT(q.energy_j, job.frontier()->max_clock.energy_j);
  EXPECT_THROW(job.SetProfile(SmallProfile()), JobStateError);
}

// A row the job's own measurement got wrong (noise, a throttled GPU) is
// left out of planning and said, not the whole plan: the job plans, no rank
// is told to run that clock, and the status shows why.
TEST(Job, ANoisyRowIsLeftOutNotThePlan) {
  const model::Profile small = SmallProfile();
  model::Profile noisy;
  for (int stage : {0, 1}) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      for (const model::ClockPoint& q : small.Points(stage, kind)) {
        model::ClockPoint p = q;
        // Stage 1's forward at 1300 MHz timed 3x too slow.
        if (stage == 1 && kind == model::Kind::kForward && q.mhz == 1300) {
          p.time_s *= 3;
          p.energy_j *= 3;
        }
        noisy.Add(stage, kind, p);
      }
    }
  }
  EXPECT_THROW(model::CheckProfileRows(noisy, "noisy"), model::InputError);
  // Not measured in the job (its user can re-measure it): refused, as
  // `joulepipe plan` refuses it, and the job keeps no profile.
  Job refusing(Config());
  RegisterAll(&refusing);
  EXPECT_THROW(refusing.SetProfile(noisy), model::InputError);
  EXPECT_EQ(refusing.profile(), nullptr);
  // Measured in the job, where nobody can re-measure it: the row is left out.
  noisy.metadata.source = "measured";
  Job job(Config());
  RegisterAll(&job);
  job.SetProfile(noisy);
  ASSERT_EQ(job.profile_notes().size(), 1u);
  EXPECT_NE(job.profile_notes()[0].find("stage 1 forward at 1300 MHz"), std::string::npos)
      << job.profile_notes()[0];
  job.SetPlan(solver::PlanPipeline(*job.profile(), job.PlanRequest()), 1000);
  for (int rank : {1, 3, 5}) {
    const auto plan = job.PlanFor(rank);  // kept: the loop reads into it
    ASSERT_TRUE(plan.has_value());
    for (const model::PlannedInstruction& i : plan->instructions) {
      if (i.instruction.kind == model::Kind::kForward) {
        EXPECT_NE(i.mhz, 1300);
      }
    }
  }
  const nlohmann::json status = protocol::JobStatusToJson(job.Status());
  EXPECT_EQ(status["profile_notes"].size(), 1u);
  EXPECT_FALSE(protocol::JobStatusToJson(PlannedJob().Status()).contains("profile_notes"));
}

// A job that allows a slowdown gets a slower, cheaper intrinsic plan within
// (1 + slowdown) T; a bad slowdown is refused by name.
TEST(Job, SlowdownTradesTimeForEnergyWithinItsBudget) {
  const Job same = PlannedJob();
  protocol::JobConfig c = Config();
  c.slowdown = 0.1;
  Job slower(c);
  RegisterAll(&slower);
  slower.SetProfile(SmallProfile());
  EXPECT_DOUBLE_EQ(slower.PlanRequest().slowdown, 0.1);
  slower.SetPlan(solver::PlanPipeline(*slower.profile(), slower.PlanRequest()), 1000);
  const solver::FrontierPoint& a = same.frontier()->points[same.intrinsic_point()];
  const solver::FrontierPoint& b = slower.frontier()->points[slower.intrinsic_point()];
  EXPECT_GT(b.time_s, a.time_s);
  EXPECT_LE(b.time_s, slower.baseline_time_s() * 1.1 * (1 + 1e-9));
  EXPECT_LT(b.energy_j, a.energy_j);
  c.slowdown = -0.5;
  try {
    Job bad(c);
    FAIL() << "a negative slowdown was accepted";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "PlanRequest::slowdown");
  }
}

TEST(Job, StragglerSwitchesWithinTwoIterationsAndRevertsWithinTwo) {
  Job job = PlannedJob();
  const int intrinsic = job.intrinsic_point();
  std::vector<std::int64_t> switched_at;
  for (std::int64_t i = 0; i < 14; ++i) {
    // Pipeline 1 is 1.2x slower in iterations 3..7.
    const double s = i >= 3 && i <= 7 ? 1.2 : 1.0;
    const std::optional<protocol::PlanSwitch> sw = Iterate(&job, i, {1, s, 1});
    if (sw) switched_at.push_back(sw->iteration);
  }
  // Detected after iterations 3 and 4: runs from 5; recovered after 8 and 9:
  // reverts from 10.
  ASSERT_EQ(switched_at, (std::vector<std::int64_t>{5, 10}));
  ASSERT_EQ(job.switches().size(), 3u);
  const protocol::PlanSwitch& slow = job.switches()[1];
  EXPECT_EQ(slow.version, 2);
  EXPECT_DOUBLE_EQ(slow.slowdowns[1], 1.2);
  const double t_intrinsic = job.frontier()->points[intrinsic].time_s;
  EXPECT_NEAR(slow.target_s, 1.2 * t_intrinsic, 1e-12);
  EXPECT_EQ(slow.point_of_pipeline[1], intrinsic);  // the straggler keeps its plan
  for (int p : {0, 2}) {
    const solver::FrontierPoint& q = job.frontier()->points[slow.point_of_pipeline[p]];
    EXPECT_NE(slow.point_of_pipeline[p], intrinsic);
    EXPECT_LE(q.time_s, slow.target_s * (1 + 1e-9));
  }
  EXPECT_GT(slow.predicted_saving_j, 0);
  EXPECT_NE(slow.reason.find("straggler: pipeline 1 at 1.20x"), std::string::npos) << slow.reason;
  const protocol::PlanSwitch& back = job.switches()[2];
  EXPECT_EQ(back.point_of_pipeline, std::vector<int>(3, intrinsic));
  EXPECT_NE(back.reason.find("recovered"), std::string::npos);
  EXPECT_EQ(job.PlanFor(0)->version, 3);
  EXPECT_EQ(job.completed_iterations(), 14);
}

TEST(Job, OneSlowIterationOrNoiseSwitchesNothing) {
  Job job = PlannedJob();
  const double noise[] = {1.00, 1.02, 0.99, 1.01, 0.98, 1.03};
  for (std::int64_t i = 0; i < 12; ++i) {
    std::vector<double> slow = {noise[i % 6], noise[(i + 2) % 6], noise[(i + 4) % 6]};
    if (i == 5) slow[2] = 1.5;  // a checkpoint on one pipeline
    EXPECT_EQ(Iterate(&job, i, slow), std::nullopt) << i;
  }
  EXPECT_EQ(job.plan_version(), 1);
}

TEST(Job, RetriedAndLateReportsAreHarmless) {
  Job job = PlannedJob(1);
  const double t = job.frontier()->points[job.intrinsic_point()].time_s;
  EXPECT_EQ(job.ReportIteration({0, 0, t, 1.0}, 0), std::nullopt);
  EXPECT_EQ(job.ReportIteration({0, 0, t, 1.0}, 0), std::nullopt);  // a retry
  EXPECT_EQ(job.ReportIteration({1, 0, t, 1.0}, 0), std::nullopt);
  EXPECT_EQ(job.completed_iterations(), 1);
  EXPECT_EQ(job.ReportIteration({1, 0, t, 1.0}, 0), std::nullopt);  // after completion
  EXPECT_EQ(job.completed_iterations(), 1);
  // Rank 1 falls silent: open iterations beyond the limit are dropped.
  for (int i = 1; i <= kOpenIterations + 3; ++i) job.ReportIteration({0, i, t, 1.0}, 0);
  EXPECT_EQ(job.dropped_iterations(), 3);
}

// Issue 24's reproduction: one rank reports 16 iterations near 10^12; they
// are refused (naming the field) and a straggler still switches the plans.
TEST(Job, OneRanksBogusIterationsAreRefusedAndDetectionGoesOn) {
  Job job = PlannedJob();
  const double t = job.frontier()->points[job.intrinsic_point()].time_s;
  for (std::int64_t i = 0; i < 2; ++i) Iterate(&job, i, {1, 1, 1});
  for (int k = 0; k < 16; ++k) {
    try {
      job.ReportIteration({3, 1'000'000'000'000LL - k, t, 1.0}, 0);
      ADD_FAILURE() << "a report for iteration 10^12 - " << k << " was taken";
    } catch (const model::InputError& e) {
      EXPECT_EQ(e.field(), "IterationReport::iteration");
      EXPECT_NE(std::string(e.what()).find("current iteration, 1"), std::string::npos) << e.what();
    }
  }
  std::optional<protocol::PlanSwitch> s;
  for (std::int64_t i = 2; i < 10 && !s; ++i) s = Iterate(&job, i, {1, 1.2, 1});
  ASSERT_TRUE(s) << "no switch after the bogus reports";
  EXPECT_EQ(job.plan_version(), 2);
}

// The same reports before any real one (a fresh job): they are the first
// and so anchor nothing once the others report, and they cannot crowd the
// real iterations out of the open ones.
TEST(Job, BogusIterationsBeforeTheRealOnesCannotCrowdThemOut) {
  Job job = PlannedJob();
  const double t = job.frontier()->points[job.intrinsic_point()].time_s;
  for (int k = 0; k < 16; ++k) job.ReportIteration({5, 1'000'000'000'000LL - 16 + k, t, 1.0}, 0);
  std::optional<protocol::PlanSwitch> s;
  for (std::int64_t i = 0; i < 10 && !s; ++i) s = Iterate(&job, i, {1, 1.2, 1});
  ASSERT_TRUE(s) << "no switch after bogus first reports; completed " << job.completed_iterations();
  EXPECT_GE(job.completed_iterations(), 2);
}

// A rank that falls silent and comes back: its peers are refused once
// they are kIterationWindow ahead, and once it reports again all go on.
TEST(Job, ASilentRankThatComesBackCompletesIterationsAgain) {
  Job job = PlannedJob(1);  // ranks 0 and 1
  Iterate(&job, 0, {1});
  int refused = 0;
  for (std::int64_t i = 1; i < 60; ++i) {
    try {
      Iterate(&job, i, {1}, 1);
    } catch (const model::InputError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0);
  const std::int64_t completed = job.completed_iterations();
  job.ReportIteration({1, 60, 0.01, 1.0}, 0);
  job.ReportIteration({0, 60, 0.01, 1.0}, 0);
  job.ReportIteration({1, 61, 0.01, 1.0}, 0);
  job.ReportIteration({0, 61, 0.01, 1.0}, 0);
  EXPECT_EQ(job.completed_iterations(), completed + 2);  // 60 and 61
}

// Zeus's /result: the service numbers each rank's entries, a whole profiling
// window per request. No window applies; the newest open iterations
// complete, as before the window existed.
TEST(Job, ServerNumberedBatchesAreNotWindowed) {
  Job job = PlannedJob(2);  // 4 ranks
  const double t = job.frontier()->points[job.intrinsic_point()].time_s;
  for (int rank = 0; rank < 4; ++rank) {
    for (std::int64_t i = 0; i < 100; ++i) {
      EXPECT_NO_THROW(job.ReportIteration({rank, i, t, 1.0}, 0, Job::Numbering::kByServer));
    }
  }
  EXPECT_EQ(job.completed_iterations(), kOpenIterations);  // 84..99
  // The same stream numbered by the ranks: the window refuses the far ones.
  Job windowed = PlannedJob(2);
  int refused = 0;
  for (int rank = 0; rank < 4; ++rank) {
    for (std::int64_t i = 0; i < 100; ++i) {
      try {
        windowed.ReportIteration({rank, i, t, 1.0}, 0);
      } catch (const model::InputError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(Job, RestoredFromItsRecordIsTheSameJob) {
  Job job = PlannedJob();
  for (std::int64_t i = 0; i < 6; ++i) Iterate(&job, i, {1, i >= 2 ? 1.2 : 1.0, 1});
  ASSERT_EQ(job.plan_version(), 2);

  // Replay what a store recorded (the switches through their JSON).
  Job restored(job.config());
  for (const auto& [rank, info] : job.ranks()) restored.RegisterRank(info);
  restored.SetProfile(model::ParseProfileCsv(job.profile_csv(), "stored"));
  std::vector<protocol::PlanSwitch> switches;
  for (const protocol::PlanSwitch& s : job.switches()) {
    switches.push_back(
        protocol::PlanSwitchFromJson(nlohmann::json::parse(protocol::PlanSwitchToJson(s).dump())));
  }
  restored.RestorePlan(job.Solved(), switches);
  EXPECT_EQ(restored.phase(), JobPhase::kPlanned);
  EXPECT_EQ(restored.plan_version(), 2);
  for (int rank = 0; rank < 6; ++rank) {
    const protocol::RankPlan a = *job.PlanFor(rank), b = *restored.PlanFor(rank);
    EXPECT_EQ(a.point, b.point);
    EXPECT_EQ(a.version, b.version);
    ASSERT_EQ(a.instructions.size(), b.instructions.size());
    for (std::size_t k = 0; k < a.instructions.size(); ++k) {
      EXPECT_EQ(a.instructions[k].mhz, b.instructions[k].mhz);
      EXPECT_EQ(a.instructions[k].instruction, b.instructions[k].instruction);
    }
  }
  // It still knows pipeline 1 straggles, so its recovery reverts the plans.
  std::vector<std::int64_t> at;
  for (std::int64_t i = 6; i < 9; ++i) {
    if (auto s = Iterate(&restored, i, {1, 1, 1})) at.push_back(s->iteration);
  }
  EXPECT_EQ(at, (std::vector<std::int64_t>{8}));
  EXPECT_EQ(restored.point_of_pipeline(), std::vector<int>(3, restored.intrinsic_point()));
}

TEST(Job, RefusesBadConfigsRanksAndReportsByField) {
  const auto field = [](auto&& f) {
    try {
      f();
    } catch (const model::InputError& e) {
      return e.field();
    }
    return std::string("none");
  };
  protocol::JobConfig c = Config();
  c.world_size = 5;
  try {
    Job{c};
    ADD_FAILURE() << "no error";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "JobConfig::world_size");
    EXPECT_NE(
        std::string(e.what()).find("pp_degree x dp_degree x tp_degree = 2 x 3 x 1 = 6 (got 5)"),
        std::string::npos)
        << e.what();
  }
  c = Config();
  c.spec.stages = 3;
  EXPECT_EQ(field([&] { Job{c}; }), "Spec::stages");
  // Issue 61, 10: ids a URL would read as something else are refused.
  for (const char* id : {"a/b", ".", "..", "a?b", "a#b", "a%b", "a b"}) {
    c = Config();
    c.job_id = id;
    EXPECT_EQ(field([&] { Job{c}; }), "JobConfig::job_id") << id;
  }
  for (const char* id : {"a.b", "...", "job+1", "a..b"}) {
    c = Config();
    c.job_id = id;
    EXPECT_NO_THROW(Job{c}) << id;
  }
  c = Config();
  c.dp_degree = 0;
  EXPECT_EQ(field([&] { Job{c}; }), "JobConfig::dp_degree");
  // A huge schedule is refused at once, without being built (a service
  // checks configs on its request thread).
  c = Config();
  c.pp_degree = c.spec.stages = 1024;
  c.spec.microbatches = 24000;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(field([&] { Job{c}; }), "Spec::microbatches");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));  // was 36 s

  Job job(Config());
  EXPECT_TRUE(job.RegisterRank({0, 0, 0, 0, {1410}}));
  EXPECT_FALSE(job.RegisterRank({0, 0, 0, 0, {1410}}));  // identical: idempotent
  EXPECT_EQ(field([&] { job.RegisterRank({0, 1, 0, 0, {1410}}); }), "RankInfo::rank");
  EXPECT_EQ(field([&] { job.RegisterRank({1, 0, 0, 0, {1410}}); }), "RankInfo::rank");  // clash
  EXPECT_EQ(field([&] { job.RegisterRank({6, 0, 0, 0, {}}); }), "RankInfo::rank");
  EXPECT_EQ(field([&] { job.RegisterRank({1, 3, 0, 0, {}}); }), "RankInfo::dp_rank");
  EXPECT_EQ(field([&] { job.RegisterRank({1, 0, 2, 0, {}}); }), "RankInfo::pp_rank");
  EXPECT_EQ(field([&] { job.RegisterRank({1, 0, 1, 1, {}}); }), "RankInfo::tp_rank");
  EXPECT_EQ(field([&] { job.RegisterRank({1, 0, 1, 0, {0}}); }), "RankInfo::available_mhz");

  Job planned = PlannedJob();
  EXPECT_EQ(field([&] { planned.ReportIteration({0, 0, std::nan(""), {}}, 0); }),
            "IterationReport::time_s");
  EXPECT_EQ(field([&] { planned.ReportIteration({0, 0, -1, {}}, 0); }), "IterationReport::time_s");
  EXPECT_EQ(field([&] { planned.ReportIteration({0, 0, 1e9, {}}, 0); }), "IterationReport::time_s");
  EXPECT_EQ(field([&] { planned.ReportIteration({0, 0, 1, -5.0}, 0); }),
            "IterationReport::energy_j");
  EXPECT_EQ(field([&] { planned.ReportIteration({0, -1, 1, {}}, 0); }),
            "IterationReport::iteration");
  EXPECT_EQ(field([&] { planned.ReportIteration({9, 0, 1, {}}, 0); }), "IterationReport::rank");
  EXPECT_EQ(field([&] { planned.PlanFor(9); }), "RankInfo::rank");
}

TEST(Job, StatusShowsFrontierPlansAndHistory) {
  Job job = PlannedJob();
  for (std::int64_t i = 0; i < 4; ++i) Iterate(&job, i, {1, 1, 1.3});
  const nlohmann::json s = protocol::JobStatusToJson(job.Status());
  EXPECT_EQ(s["phase"], "planned");
  EXPECT_EQ(s["plan_version"], 2);
  EXPECT_EQ(s["switches"].size(), 2u);
  EXPECT_EQ(s["point_of_pipeline"].size(), 3u);
  EXPECT_GT(s["frontier"]["points"].size(), 1u);
  EXPECT_NEAR(s["slowdowns"][2].get<double>(), 1.3, 1e-12);
}

}  // namespace
}  // namespace joulepipe::coord
