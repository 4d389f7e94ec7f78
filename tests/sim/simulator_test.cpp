// Tests of the discrete-event training simulator (sim/simulator.hpp): it
// agrees with the reference evaluator (schedule::Replay) on one noiseless
// pipeline, its energy accounting adds up, the straggler response chooses
// what it promises, and faults, latency and TP behave as documented.
#include "joulepipe/sim/simulator.hpp"
#include "joulepipe/schedule/clock_plans.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../schedule/schedule_test_support.hpp"
#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/sim/grid_plan.hpp"
#include "joulepipe/sim/timeline.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::sim {
namespace {

using model::Kind;
using model::testing::Point;
using schedule::testing::InputErrorOf;
using schedule::testing::MakeSpec;

constexpr double kPBlock = 80.0;

// A profile of `stages` stages with clocks 900..1500 MHz (step 150): time
// falls with the clock, energy is U-shaped, and every stage differs.
model::Profile MakeProfile(int stages, std::uint32_t seed = 7) {
  return model::testing::UShapedProfile(stages, seed);
}

// A random clock per node from its profile row.
std::vector<std::uint16_t> RandomClocks(const schedule::Schedule& schedule,
                                        const model::Profile& profile, std::mt19937* rng) {
  std::vector<std::uint16_t> mhz(schedule.num_nodes());
  for (int n = 0; n < schedule.num_nodes(); ++n) {
    const model::Instruction& in = schedule.nodes[n];
    const auto& points =
        profile.Points(schedule::ProfileStage(schedule.spec, profile.num_stages(), in), in.kind);
    mhz[n] = static_cast<std::uint16_t>(
        points[std::uniform_int_distribution<std::size_t>(0, points.size() - 1)(*rng)].mhz);
  }
  return mhz;
}

model::Plan ToModelPlan(const schedule::Schedule& schedule, const std::vector<std::uint16_t>& mhz) {
  model::Plan plan;
  plan.schedule = std::string(schedule::KindName(schedule.spec.kind));
  plan.num_stages = schedule.spec.stages;
  plan.num_microbatches = schedule.spec.microbatches;
  plan.num_chunks = schedule.spec.chunks;
  plan.stages.resize(schedule.spec.stages);
  for (int s = 0; s < schedule.spec.stages; ++s) {
    for (int node : schedule.stage_order[s])
      plan.stages[s].push_back({schedule.nodes[node], mhz[node], 0, 0, {}});
  }
  return plan;
}

CandidatePlan Candidate(const schedule::Schedule& schedule, const model::Profile& profile,
                        std::vector<std::uint16_t> mhz) {
  const solver::Evaluation e = solver::EvaluateClocks(schedule, profile, kPBlock, mhz);
  return {std::move(mhz), e.time_s, e.energy_j};
}

double Relative(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-300);
}

// ---- Consistency with the reference evaluator -----------------------------------------

TEST(SimulatorTest, SinglePipelineEqualsReplayForRandomPlans) {
  std::mt19937 rng(42);
  const schedule::Spec specs[] = {
      MakeSpec(schedule::Kind::kGPipe, 3, 5), MakeSpec(schedule::Kind::k1F1B, 4, 7),
      MakeSpec(schedule::Kind::k1F1B, 1, 3), MakeSpec(schedule::Kind::kInterleaved, 3, 6, 2),
      MakeSpec(schedule::Kind::kInterleaved, 2, 4, 3)};
  for (const schedule::Spec& spec : specs) {
    const schedule::Schedule schedule = schedule::Build(spec);
    // Interleaved: also with one profile row per virtual stage.
    for (int rows : {spec.stages, spec.stages * spec.chunks}) {
      if (rows != spec.stages && spec.chunks == 1) continue;
      const model::Profile profile = MakeProfile(rows);
      for (int trial = 0; trial < 10; ++trial) {
        const std::vector<std::uint16_t> mhz = RandomClocks(schedule, profile, &rng);
        const schedule::ReplayResult replay =
            schedule::Replay(schedule, profile, ToModelPlan(schedule, mhz), kPBlock);
        JobSpec job;
        job.p_block_w = kPBlock;
        const Simulator simulator(schedule, profile, job, {{mhz, replay.time_s, replay.energy_j}},
                                  0, 0);
        for (Policy policy : {Policy::kBaseline, Policy::kJoulepipe}) {
          const SimulationResult r = simulator.Run(policy);
          ASSERT_EQ(r.iterations.size(), 1u);
          const IterationResult& it = r.iterations[0];
          EXPECT_LE(Relative(it.time_s, replay.time_s), 1e-12) << schedule::KindName(spec.kind);
          EXPECT_LE(Relative(it.energy_j, replay.energy_j), 1e-9);
          EXPECT_LE(Relative(it.busy_energy_j, replay.busy_energy_j), 1e-9);
          EXPECT_LE(Relative(it.blocking_energy_j, replay.blocking_energy_j), 1e-9);
        }
      }
    }
  }
}

// A profile with knob rows (slower, cheaper settings next to the plain rows,
// so sorted after them at each clock): the
// simulator runs each clock's plain row, as Profile::Find and Replay of a
// plan without knobs do.
TEST(SimulatorTest, KnobProfileRunsThePlainRowAtEachClockLikeReplay) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 3, 5));
  const model::Profile plain = MakeProfile(3);
  model::Profile knobbed;
  for (int s = 0; s < 3; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      for (model::ClockPoint point : plain.Points(s, kind)) {
        knobbed.Add(s, kind, point);
        model::ClockPoint other = point;
        other.knobs = "overlap=2";
        other.time_s *= 1.3;
        other.energy_j *= 0.8;
        knobbed.Add(s, kind, other);
      }
    }
  }
  std::mt19937 rng(3);
  const std::vector<std::uint16_t> mhz = RandomClocks(schedule, plain, &rng);
  const schedule::ReplayResult replay =
      schedule::Replay(schedule, plain, ToModelPlan(schedule, mhz), kPBlock);
  JobSpec job;
  job.p_block_w = kPBlock;
  const Simulator simulator(schedule, knobbed, job, {{mhz, replay.time_s, replay.energy_j}}, 0, 0);
  const IterationResult it = simulator.Run(Policy::kJoulepipe).iterations.at(0);
  EXPECT_LE(Relative(it.time_s, replay.time_s), 1e-12);
  EXPECT_LE(Relative(it.energy_j, replay.energy_j), 1e-9);
}

// A calibrated wait model (synthetic: 30 W less at 900 MHz, 2 ms switch):
// one noiseless pipeline lowers exactly the waits Replay lowers, to the
// joule; with D pipelines and a straggler, the healthy pipelines' extra wait
// (for the straggler) is not lowered beyond their plans, so they save the
// same seconds as alone.
model::WaitModel SyntheticWaits() {
  model::WaitModel w;
  w.points = {{1500, 90}, {900, 60}};
  w.switch_latency_s = 0.002;
  w.margin_s = 0.001;
  return w;
}

TEST(SimulatorTest, CalibratedWaitsEqualReplayWithTheWaitModel) {
  std::mt19937 rng(11);
  for (const schedule::Spec& spec :
       {MakeSpec(schedule::Kind::kGPipe, 3, 5), MakeSpec(schedule::Kind::k1F1B, 4, 7),
        MakeSpec(schedule::Kind::kInterleaved, 3, 6, 2)}) {
    const schedule::Schedule schedule = schedule::Build(spec);
    const model::Profile profile = MakeProfile(spec.stages);
    for (int trial = 0; trial < 5; ++trial) {
      const std::vector<std::uint16_t> mhz = RandomClocks(schedule, profile, &rng);
      model::WaitModel waits = SyntheticWaits();
      waits.p_block_w = kPBlock;
      const schedule::ReplayResult replay =
          schedule::Replay(schedule, profile, ToModelPlan(schedule, mhz), waits, "test");
      ASSERT_GT(replay.lowered_wait_s, 0);
      JobSpec job;
      job.p_block_w = kPBlock;
      job.waits = SyntheticWaits();
      const Simulator simulator(schedule, profile, job, {{mhz, replay.time_s, replay.energy_j}}, 0,
                                0);
      const IterationResult it = simulator.Run(Policy::kJoulepipe).iterations.at(0);
      EXPECT_LE(Relative(it.energy_j, replay.energy_j), 1e-9) << schedule::KindName(spec.kind);
      EXPECT_LE(Relative(it.lowered_wait_s, replay.lowered_wait_s), 1e-9);
      EXPECT_LE(Relative(it.blocking_energy_j, replay.blocking_energy_j), 1e-9);
      // The baseline (the job without joulepipe) lowers nothing.
      EXPECT_EQ(simulator.Run(Policy::kBaseline).iterations.at(0).lowered_wait_s, 0);
      // The timeline's wait events carry the same energy.
      RunOptions options;
      options.timeline_iterations = 1;
      const SimulationResult r = simulator.Run(Policy::kJoulepipe, options);
      double wait_j = 0;
      for (const TimelineEvent& e : r.timeline)
        if (e.kind == EventKind::kWait) wait_j += e.energy_j;
      EXPECT_LE(Relative(wait_j, replay.blocking_energy_j), 1e-9);
    }
  }
}

TEST(SimulatorTest, AStragglersExtraWaitIsNotLoweredBeyondThePlan) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 8));
  const model::Profile profile = MakeProfile(4);
  std::mt19937 rng(5);
  const std::vector<std::uint16_t> mhz = RandomClocks(schedule, profile, &rng);
  const CandidatePlan plan = Candidate(schedule, profile, mhz);
  JobSpec job;
  job.p_block_w = kPBlock;
  job.waits = SyntheticWaits();
  const IterationResult alone =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kJoulepipe).iterations.at(0);
  job.pipelines = 3;
  job.straggler = {1, 1.3, 0, 0, 0};
  const IterationResult three =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kJoulepipe).iterations.at(0);
  // Two healthy pipelines lower what they lower alone; the straggler's own
  // waits are longer than planned, so it lowers its planned seconds too.
  EXPECT_NEAR(three.lowered_wait_s, 3 * alone.lowered_wait_s, 1e-9);
  JobSpec flat = job;
  flat.waits = model::WaitModel{};
  const IterationResult flat_three =
      Simulator(schedule, profile, flat, {plan}, 0, 0).Run(Policy::kJoulepipe).iterations.at(0);
  EXPECT_NEAR(flat_three.energy_j - three.energy_j, 30 * three.lowered_wait_s, 1e-6);
  EXPECT_EQ(flat_three.lowered_wait_s, 0);
}

TEST(SimulatorTest, NoiselessPipelinesAreIdenticalAndEveryIterationRepeats) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 8));
  const model::Profile profile = MakeProfile(4);
  std::mt19937 rng(3);
  const CandidatePlan plan = Candidate(schedule, profile, RandomClocks(schedule, profile, &rng));
  JobSpec job;
  job.pipelines = 5;
  job.iterations = 3;
  job.p_block_w = kPBlock;
  const SimulationResult r = Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline);
  for (const IterationResult& it : r.iterations) {
    EXPECT_LE(Relative(it.time_s, plan.time_s), 1e-12);
    EXPECT_LE(Relative(it.energy_j, 5 * plan.energy_j), 1e-9);
  }
  EXPECT_LE(Relative(r.TotalTime(), 3 * plan.time_s), 1e-12);
}

// ---- Energy accounting ------------------------------------------------------------

TEST(SimulatorTest, EnergyIsBusyPlusBlockingAndTimelineEventsAddUpPerGpu) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 3, 6));
  const model::Profile profile = MakeProfile(3);
  std::mt19937 rng(5);
  const CandidatePlan a = Candidate(schedule, profile, RandomClocks(schedule, profile, &rng));
  const CandidatePlan b = Candidate(schedule, profile, RandomClocks(schedule, profile, &rng));
  JobSpec job;
  job.pipelines = 3;
  job.iterations = 4;
  job.p_block_w = kPBlock;
  job.gpus_per_stage = 2;
  job.allreduce_s = 0.07;
  job.p2p_latency_s = 0.001;
  job.clock_variability = 0.05;
  job.stall_probability = 0.5;
  job.stall_s = 0.2;
  job.straggler = {1, 1.3, 1, 2, 0};
  const Simulator simulator(schedule, profile, job, {a, b}, 0, 1);
  RunOptions options;
  options.timeline_iterations = 4;
  for (Policy policy : {Policy::kBaseline, Policy::kJoulepipe}) {
    const SimulationResult r = simulator.Run(policy, options);
    ASSERT_FALSE(r.timeline_truncated);
    std::vector<double> from_events(r.gpu_energy_j.size(), 0.0);
    std::vector<double> covered(r.gpu_energy_j.size(), 0.0);
    for (const TimelineEvent& e : r.timeline) {
      const std::size_t k = (static_cast<std::size_t>(e.iteration) * 3 + e.pipeline) * 3 + e.stage;
      from_events[k] += e.energy_j;
      covered[k] += e.duration_s;
    }
    for (int i = 0; i < 4; ++i) {
      const IterationResult& it = r.iterations[i];
      EXPECT_NEAR(it.energy_j, it.busy_energy_j + it.blocking_energy_j, 1e-9 * it.energy_j);
      EXPECT_NEAR(it.time_s, it.compute_s + 0.07, 1e-12);
      double sum = 0;
      for (int p = 0; p < 3; ++p) {
        for (int s = 0; s < 3; ++s) {
          const std::size_t k = (static_cast<std::size_t>(i) * 3 + p) * 3 + s;
          sum += r.GpuEnergy(i, p, s);
          // The GPU's events tile the whole iteration and carry its energy.
          EXPECT_NEAR(from_events[k], r.GpuEnergy(i, p, s), 1e-9 * r.GpuEnergy(i, p, s));
          EXPECT_NEAR(covered[k], it.time_s, 1e-9);
        }
      }
      EXPECT_NEAR(2 * sum, it.energy_j, 1e-9 * it.energy_j);
    }
  }
}

TEST(SimulatorTest, GpusPerStageMultipliesEnergyNotTime) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 3, 4));
  const model::Profile profile = MakeProfile(3);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.pipelines = 2;
  job.p_block_w = kPBlock;
  const IterationResult one =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline).iterations[0];
  job.gpus_per_stage = 8;
  const SimulationResult eight =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline);
  EXPECT_EQ(eight.iterations[0].time_s, one.time_s);
  EXPECT_NEAR(eight.iterations[0].energy_j, 8 * one.energy_j, 1e-9 * one.energy_j);
  // Per-GPU figures are for one GPU of the stage.
  EXPECT_NEAR(eight.GpuEnergy(0, 0, 0) + eight.GpuEnergy(0, 0, 1) + eight.GpuEnergy(0, 0, 2),
              plan.energy_j, 1e-9 * plan.energy_j);
}

TEST(SimulatorTest, AllReduceAndDataStallsAreChargedAtBlockingPower) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 6));
  const model::Profile profile = MakeProfile(4);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.p_block_w = kPBlock;
  job.gpus_per_stage = 2;
  const IterationResult quiet =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline).iterations[0];
  job.allreduce_s = 0.25;
  job.stall_probability = 1;
  job.stall_s = 0.5;
  const IterationResult noisy =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline).iterations[0];
  EXPECT_NEAR(noisy.time_s, quiet.time_s + 0.75, 1e-12);
  EXPECT_NEAR(noisy.compute_s, quiet.time_s + 0.5, 1e-12);
  const double gpus = 4 * 2;
  EXPECT_NEAR(noisy.energy_j - quiet.energy_j, gpus * kPBlock * 0.75, 1e-9 * noisy.energy_j);
  EXPECT_NEAR(noisy.busy_energy_j, quiet.busy_energy_j, 1e-9 * quiet.busy_energy_j);
}

// A checkpoint save every k iterations: that iteration is checkpoint_s
// longer, charged at P_block on every GPU, an event of its own on every
// stage, and the waveform's trough for that long.
TEST(SimulatorTest, CheckpointPausesEveryKIterationsAtBlockingPower) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 6));
  const model::Profile profile = MakeProfile(4);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.p_block_w = kPBlock;
  job.gpus_per_stage = 2;
  job.iterations = 4;
  const SimulationResult quiet =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline);
  job.checkpoint_every = 2;
  job.checkpoint_s = 1.5;
  RunOptions options;
  options.timeline_iterations = 4;
  options.waveform_dt_s = 0.01;
  const SimulationResult saved =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline, options);
  const double gpus = 4 * 2;
  for (int i = 0; i < 4; ++i) {
    const double pause = i % 2 == 1 ? 1.5 : 0;
    EXPECT_NEAR(saved.iterations[i].time_s, quiet.iterations[i].time_s + pause, 1e-12) << i;
    EXPECT_NEAR(saved.iterations[i].energy_j - quiet.iterations[i].energy_j, gpus * kPBlock * pause,
                1e-9 * saved.iterations[i].energy_j)
        << i;
  }
  int checkpoints = 0;
  for (const TimelineEvent& e : saved.timeline) {
    if (e.kind != EventKind::kCheckpoint) continue;
    ++checkpoints;
    EXPECT_DOUBLE_EQ(e.duration_s, 1.5);
    EXPECT_DOUBLE_EQ(e.energy_j, kPBlock * 1.5);
  }
  EXPECT_EQ(checkpoints, 2 * 4);  // two saves x four stages (one pipeline)
  EXPECT_STREQ(EventKindName(EventKind::kCheckpoint), "checkpoint");
  // A second-and-a-half trough at P_block on every GPU.
  int at_block = 0;
  for (double w : saved.waveform.gpu_w) at_block += std::abs(w - gpus * kPBlock) < 1e-6;
  EXPECT_GE(at_block, 2 * 149);
  EXPECT_LT(Relative(saved.waveform.EnergyJ(), saved.TotalEnergy()), 1e-9);
  job.checkpoint_every = -1;
  EXPECT_NE(InputErrorOf([&] {
              Simulator(schedule, profile, job, {plan}, 0, 0);
            }).find("JobSpec::checkpoint_every"),
            std::string::npos);
}

TEST(SimulatorTest, StallsFollowTheirProbabilityAndTheSeed) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::kGPipe, 2, 2));
  const model::Profile profile = MakeProfile(2);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.p_block_w = kPBlock;
  job.pipelines = 1;
  job.iterations = 2000;
  job.stall_probability = 0.25;
  job.stall_s = 1.0;
  const SimulationResult r = Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline);
  int stalled = 0;
  for (const IterationResult& it : r.iterations) stalled += it.compute_s > plan.time_s + 0.5;
  EXPECT_NEAR(stalled / 2000.0, 0.25, 0.03);
}

// ---- Straggler response -------------------------------------------------------------

struct FrontierFixture {
  schedule::Schedule schedule;
  model::Profile profile;
  solver::Frontier frontier;
  std::vector<CandidatePlan> candidates;
  int baseline = 0, intrinsic = 0;

  explicit FrontierFixture(double straggler_slowdown = 1.3)
      : schedule(schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 8))), profile(MakeProfile(4)) {
    const double t0 = solver::EvaluateClocks(schedule, profile, kPBlock,
                                             schedule::UniformClocks(schedule, profile, true))
                          .time_s;
    solver::Options options;
    options.p_block_w = kPBlock;
    options.resolution_s = 0.002;
    options.extra_deadlines_s = {t0, straggler_slowdown * t0};
    frontier = solver::SolveFrontier(schedule, profile, options);
    for (const auto& p : frontier.points) candidates.push_back({p.mhz, p.time_s, p.energy_j});
    baseline = static_cast<int>(candidates.size());
    candidates.push_back(
        {frontier.max_clock.mhz, frontier.max_clock.time_s, frontier.max_clock.energy_j});
    intrinsic = static_cast<int>(frontier.BestWithin(t0) - frontier.points.data());
  }

  // Brute force: least-energy candidate with time <= limit.
  int LeastEnergyWithin(double limit) const {
    int best = -1;
    for (int c = 0; c < static_cast<int>(candidates.size()); ++c) {
      if (candidates[c].time_s > limit * (1 + 1e-12)) continue;
      if (best < 0 || candidates[c].energy_j < candidates[best].energy_j) best = c;
    }
    return best;
  }
};

TEST(SimulatorTest, StragglerResponsePicksTheLeastEnergyCandidateWithinTPrime) {
  for (double slowdown : {1.02, 1.1, 1.3, 1.6}) {
    const FrontierFixture f(slowdown);
    JobSpec job;
    job.pipelines = 4;
    job.p_block_w = kPBlock;
    job.iterations = 2;
    job.straggler = {2, slowdown, 0, 0, 0};
    const Simulator simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic);
    const SimulationResult base = simulator.Run(Policy::kBaseline);
    const SimulationResult ours = simulator.Run(Policy::kJoulepipe);
    const double target = slowdown * f.candidates[f.intrinsic].time_s;
    const int expected = f.LeastEnergyWithin(target);
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(ours.iterations[i].target_s, target, 1e-12 * target);
      for (int p = 0; p < 4; ++p) {
        const int plan = ours.plan[i * 4 + p];
        if (p == 2) {
          EXPECT_EQ(plan, f.intrinsic) << "the straggler keeps its zero-slowdown plan";
        } else {
          EXPECT_EQ(f.candidates[plan].energy_j, f.candidates[expected].energy_j) << slowdown;
          EXPECT_LE(f.candidates[plan].time_s, target * (1 + 1e-12));
        }
        EXPECT_EQ(base.plan[i * 4 + p], f.baseline);
      }
      EXPECT_LE(ours.iterations[i].time_s, base.iterations[i].time_s * (1 + 1e-12));
      EXPECT_LT(ours.iterations[i].energy_j, base.iterations[i].energy_j);
    }
  }
}

TEST(SimulatorTest, WithoutStragglerEveryPipelineRunsTheIntrinsicPlan) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 3;
  job.p_block_w = kPBlock;
  const SimulationResult r =
      Simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic)
          .Run(Policy::kJoulepipe);
  for (int p = 0; p < 3; ++p) EXPECT_EQ(r.plan[p], f.intrinsic);
  EXPECT_LE(r.iterations[0].time_s, f.frontier.max_clock.time_s * (1 + 1e-12));
}

TEST(SimulatorTest, EpisodicStragglerSwitchesAndSwitchesBack) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 3;
  job.p_block_w = kPBlock;
  job.iterations = 9;
  job.straggler = {0, 1.3, 2, 3, 0};  // iterations 2, 3, 4
  const Simulator simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic);
  const SimulationResult base = simulator.Run(Policy::kBaseline);
  const SimulationResult ours = simulator.Run(Policy::kJoulepipe);
  for (int i = 0; i < 9; ++i) {
    const bool active = i >= 2 && i <= 4;
    EXPECT_EQ(ours.iterations[i].straggler_active, active);
    EXPECT_EQ(ours.plan[i * 3 + 0], f.intrinsic);
    if (active) {
      EXPECT_NE(ours.plan[i * 3 + 1], f.intrinsic) << i;
      EXPECT_GT(f.candidates[ours.plan[i * 3 + 1]].time_s, f.candidates[f.intrinsic].time_s);
    } else {
      EXPECT_EQ(ours.plan[i * 3 + 1], f.intrinsic) << "switched back in iteration " << i;
    }
    EXPECT_LE(ours.iterations[i].time_s, base.iterations[i].time_s * (1 + 1e-12)) << i;
  }
  // A repeating episode: 2 of every 4 iterations from iteration 1.
  const Straggler repeating{0, 1.3, 1, 2, 4};
  const std::vector<bool> want = {false, true, true, false, false, true, true, false, false};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(repeating.ActiveAt(i), want[i]) << i;
}

TEST(SimulatorTest, DetectionLagDelaysBothTheSwitchAndTheSwitchBack) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 2;
  job.p_block_w = kPBlock;
  job.iterations = 9;
  job.straggler = {1, 1.3, 2, 3, 0};  // slow in iterations 2..4
  const Simulator simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic);
  RunOptions options;
  options.detection_lag = 2;  // known in iterations 4..6
  const SimulationResult base = simulator.Run(Policy::kBaseline);
  const SimulationResult ours = simulator.Run(Policy::kJoulepipe, options);
  for (int i = 0; i < 9; ++i) {
    const bool known = i >= 4 && i <= 6;
    EXPECT_EQ(ours.plan[i * 2 + 0] != f.intrinsic, known) << i;
    EXPECT_EQ(ours.plan[i * 2 + 1], f.intrinsic);
  }
  // Iterations 2..3: slow but unknown, everyone on the intrinsic plan; the
  // iteration is the straggler's and the same as the baseline's.
  EXPECT_NEAR(ours.iterations[2].time_s, base.iterations[2].time_s, 1e-9);
  // Iterations 5..6: recovered but still believed slow: the slowed plan makes
  // the iteration longer than the baseline's. That is the cost of the lag.
  EXPECT_GT(ours.iterations[5].time_s, base.iterations[5].time_s * 1.01);
  EXPECT_NEAR(ours.iterations[7].time_s, f.candidates[f.intrinsic].time_s, 1e-9);
}

TEST(SimulatorTest, WithVariabilityAndLatencyTheResponseIsMeasuredAndNeverSlower) {
  const FrontierFixture f(1.2);
  JobSpec job;
  job.pipelines = 12;
  job.p_block_w = kPBlock;
  job.iterations = 6;
  job.clock_variability = 0.04;
  job.p2p_latency_s = 0.0005;
  job.straggler = {3, 1.2, 2, 2, 0};
  for (std::uint64_t seed : {1, 2, 3}) {
    job.seed = seed;
    const Simulator simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic);
    const SimulationResult base = simulator.Run(Policy::kBaseline);
    const SimulationResult ours = simulator.Run(Policy::kJoulepipe);
    for (int i = 0; i < 6; ++i) {
      EXPECT_LE(ours.iterations[i].time_s, base.iterations[i].time_s * (1 + 1e-9)) << seed;
      EXPECT_LT(ours.iterations[i].energy_j, base.iterations[i].energy_j) << seed;
      // T' is the baseline's compute time: the slowest pipeline at max clocks.
      EXPECT_NEAR(ours.iterations[i].target_s, base.iterations[i].compute_s, 1e-9);
    }
  }
}

// ---- Faults and latency --------------------------------------------------------------

TEST(SimulatorTest, P2PLatencyIsAddedOnEveryCrossStageEdge) {
  // GPipe, 2 stages, 1 microbatch: F(0) -> F(1) -> B(1) -> B(0); two edges
  // cross stages, so the critical path gains exactly two latencies.
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::kGPipe, 2, 1));
  const model::Profile profile = MakeProfile(2);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.p_block_w = kPBlock;
  const double t =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline).iterations[0].time_s;
  job.p2p_latency_s = 0.003;
  const IterationResult slow =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline).iterations[0];
  EXPECT_NEAR(slow.time_s, t + 0.006, 1e-12);
  // Latency on a longer pipeline never shortens it.
  const schedule::Schedule big = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 8));
  const model::Profile big_profile = MakeProfile(4);
  const CandidatePlan big_plan =
      Candidate(big, big_profile, schedule::UniformClocks(big, big_profile, true));
  JobSpec big_job;
  big_job.p_block_w = kPBlock;
  const double base = Simulator(big, big_profile, big_job, {big_plan}, 0, 0)
                          .Run(Policy::kBaseline)
                          .iterations[0]
                          .time_s;
  big_job.p2p_latency_s = 0.002;
  EXPECT_GT(Simulator(big, big_profile, big_job, {big_plan}, 0, 0)
                .Run(Policy::kBaseline)
                .iterations[0]
                .time_s,
            base + 0.002 * 2 * 3);
}

TEST(SimulatorTest, ClockVariabilityIsDeterministicPerSeed) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 4, 6));
  const model::Profile profile = MakeProfile(4);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.pipelines = 16;
  job.p_block_w = kPBlock;
  job.iterations = 2;
  job.clock_variability = 0.05;
  job.seed = 11;
  const Simulator a(schedule, profile, job, {plan}, 0, 0);
  const Simulator b(schedule, profile, job, {plan}, 0, 0);
  job.seed = 12;
  const Simulator c(schedule, profile, job, {plan}, 0, 0);
  double sum = 0, differ = 0;
  for (int p = 0; p < 16; ++p) {
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(a.SpeedFactor(p, s), b.SpeedFactor(p, s));
      EXPECT_GE(a.SpeedFactor(p, s), 1 - 3 * 0.05);
      EXPECT_LE(a.SpeedFactor(p, s), 1 + 3 * 0.05);
      differ += a.SpeedFactor(p, s) != c.SpeedFactor(p, s);
      sum += a.SpeedFactor(p, s);
    }
  }
  EXPECT_EQ(differ, 64);
  EXPECT_NEAR(sum / 64, 1.0, 0.03);
  const SimulationResult ra = a.Run(Policy::kBaseline), rb = b.Run(Policy::kBaseline);
  EXPECT_EQ(ra.iterations[0].time_s, rb.iterations[0].time_s);
  EXPECT_EQ(ra.iterations[1].energy_j, rb.iterations[1].energy_j);
  EXPECT_EQ(ra.gpu_energy_j, rb.gpu_energy_j);
  EXPECT_NE(ra.iterations[0].time_s, c.Run(Policy::kBaseline).iterations[0].time_s);
  // The slowest GPU sets the pace: the iteration is longer than noiseless.
  EXPECT_GT(ra.iterations[0].time_s, plan.time_s);
}

TEST(SimulatorTest, StragglerExtraTimeIsChargedAtBlockingPower) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 3, 5));
  const model::Profile profile = MakeProfile(3);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  JobSpec job;
  job.p_block_w = kPBlock;
  job.straggler = {0, 1.5, 0, 0, 0};
  const IterationResult r =
      Simulator(schedule, profile, job, {plan}, 0, 0).Run(Policy::kBaseline).iterations[0];
  // Every duration scales, so the makespan scales; the work energy stays and
  // the extra 0.5 T on each of the 3 GPUs is blocking.
  EXPECT_NEAR(r.time_s, 1.5 * plan.time_s, 1e-12);
  EXPECT_NEAR(r.energy_j, plan.energy_j + 3 * kPBlock * 0.5 * plan.time_s, 1e-9 * r.energy_j);
}

// ---- Timeline ----------------------------------------------------------------------------

// The waveform holds every GPU's power over the run: its integral is the
// job's energy whatever happens (straggler, all-reduce, stalls, TP), its
// length the run's, and the all-reduce shows as a drop to P_block on every
// GPU at each iteration's end.
TEST(SimulatorTest, WaveformIntegratesToTheJobsEnergy) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 3;
  job.gpus_per_stage = 2;
  job.p_block_w = kPBlock;
  job.iterations = 6;
  job.allreduce_s = 0.05;
  job.stall_probability = 0.3;
  job.stall_s = 0.02;
  job.straggler = {1, 1.2, 2, 0, 0};
  const Simulator simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic);
  RunOptions options;
  options.waveform_dt_s = 1e-3;
  for (Policy policy : {Policy::kBaseline, Policy::kJoulepipe}) {
    SCOPED_TRACE(PolicyName(policy));
    const SimulationResult r = simulator.Run(policy, options);
    EXPECT_LT(Relative(r.waveform.EnergyJ(), r.TotalEnergy()), 1e-9);
    EXPECT_NEAR(r.waveform.gpu_w.size() * 1e-3, r.TotalTime(), 1e-3);
    // The last bins lie inside the final all-reduce: every GPU at P_block.
    const double all_blocked = kPBlock * 3 * f.schedule.spec.stages * 2;
    EXPECT_NEAR(r.waveform.gpu_w[r.waveform.gpu_w.size() - 10], all_blocked, 1e-6);
    const GridMetrics m = MeasureGrid(r.waveform, GridOptions{});
    EXPECT_GT(m.peak_w, all_blocked);
    EXPECT_NEAR(m.trough_w, all_blocked, 1e-6);
    EXPECT_GT(m.swing_w, 0);
  }
  // Without RunOptions::waveform_dt_s there is none; a bad one is refused.
  EXPECT_TRUE(simulator.Run(Policy::kBaseline).waveform.gpu_w.empty());
  options.waveform_dt_s = 20;
  EXPECT_NE(InputErrorOf([&] {
              simulator.Run(Policy::kBaseline, options);
            }).find("RunOptions::waveform_dt_s"),
            std::string::npos);
}

// Grid plans (grid_plan.hpp): the firmware floor on the baseline meets the
// limit; joulepipe's (plan, floor) meets it at no more energy and burns no
// more filler, since its plans lower the peak the floor must follow; with
// no limit the choice is the least-energy plan within the deadline, unfloored.
TEST(SimulatorTest, GridPlanMeetsARampLimitForLessThanTheFirmwareFloor) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 4;
  job.gpus_per_stage = 2;
  job.p_block_w = kPBlock;
  job.allreduce_s = 0.05;
  job.iterations = 3;
  const double t0 = f.frontier.max_clock.time_s;
  const std::vector<CandidatePlan> candidates = GridCandidates(f.frontier, t0);
  ASSERT_GE(candidates.size(), 2u);
  EXPECT_EQ(candidates[0].time_s, f.frontier.max_clock.time_s);  // the baseline first
  GridPlanRequest request;
  request.deadline_s = t0;
  request.iterations = 3;
  request.waveform_dt_s = 1e-3;
  request.options.ramp_window_s = 0.005;
  const GridPlan free = PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
  EXPECT_EQ(free.chosen.floor_w, 0);
  EXPECT_EQ(free.chosen.filler_j, 0);
  EXPECT_EQ(free.chosen.candidate, static_cast<int>(candidates.size()) - 1);
  EXPECT_LT(free.chosen.energy_j, free.firmware.energy_j);
  const double base_ramp = free.firmware.grid.ramp_w_per_s;
  ASSERT_GT(base_ramp, 0);

  request.limits.max_ramp_w_per_s = 0.3 * base_ramp;
  const GridPlan plan = PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
  EXPECT_TRUE(plan.firmware.meets);
  EXPECT_GT(plan.firmware.floor_w, 0);
  EXPECT_GT(plan.firmware.filler_j, 0);
  EXPECT_LE(plan.firmware.grid.ramp_w_per_s, 0.3 * base_ramp * (1 + 1e-9));
  EXPECT_TRUE(plan.chosen.meets);
  EXPECT_LE(plan.chosen.energy_j, plan.firmware.energy_j);
  EXPECT_LE(plan.chosen.filler_j, plan.firmware.filler_j);
  EXPECT_LE(plan.chosen.time_s, t0 + job.allreduce_s + 1e-9);
  // The floor costs exactly what it burns: the plan's unshaped energy + filler.
  const auto unshaped = std::find_if(plan.unshaped.begin(), plan.unshaped.end(),
                                     [&](auto& p) { return p.candidate == plan.chosen.candidate; });
  ASSERT_NE(unshaped, plan.unshaped.end());
  EXPECT_NEAR(plan.chosen.energy_j, unshaped->energy_j + plan.chosen.filler_j,
              1e-9 * plan.chosen.energy_j);
  // The sweep: a tighter limit never costs less.
  const std::vector<GridFrontierRow> rows =
      RampFrontier(f.schedule, f.profile, job, candidates, 0, request,
                   {base_ramp, 0.6 * base_ramp, 0.3 * base_ramp, 0.1 * base_ramp});
  ASSERT_EQ(rows.size(), 4u);
  for (std::size_t k = 1; k < rows.size(); ++k) {
    EXPECT_GE(rows[k].chosen.energy_j, rows[k - 1].chosen.energy_j * (1 - 1e-9)) << k;
    EXPECT_GE(rows[k].firmware.energy_j, rows[k - 1].firmware.energy_j * (1 - 1e-9)) << k;
    EXPECT_LE(rows[k].chosen.energy_j, rows[k].firmware.energy_j) << k;
  }
  request.limits.min_power_fraction = 1.5;
  EXPECT_NE(InputErrorOf([&] {
              PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
            }).find("GridLimits::min_power_fraction"),
            std::string::npos);
}

// Offsets between the pipelines' starts: pipeline p starts p x offset late
// (an offset event at P_block), the iteration is (D - 1) offsets longer,
// and the drops to the all-reduce come one after another, so the ramp
// falls. As a grid lever they never cost more than the plan without them
// (offset 0 is always tried) and are used only within the deadline.
TEST(SimulatorTest, PipelineOffsetsStaggerTheDropsAndAreAGridLever) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 4;
  job.gpus_per_stage = 2;
  job.p_block_w = kPBlock;
  job.allreduce_s = 0.05;
  job.iterations = 3;
  const double t0 = f.frontier.max_clock.time_s;
  const std::vector<CandidatePlan> candidates = GridCandidates(f.frontier, 1.2 * t0);
  RunOptions run;
  run.waveform_dt_s = 1e-3;
  run.timeline_iterations = 1;
  const SimulationResult aligned =
      Simulator(f.schedule, f.profile, job, candidates, 0, 0).Run(Policy::kBaseline, run);
  job.pipeline_offset_s = 0.01;
  const SimulationResult offset =
      Simulator(f.schedule, f.profile, job, candidates, 0, 0).Run(Policy::kBaseline, run);
  EXPECT_NEAR(offset.iterations[0].time_s, aligned.iterations[0].time_s + 3 * 0.01, 1e-9);
  int events = 0;
  for (const TimelineEvent& e : offset.timeline) {
    if (e.kind != EventKind::kOffset) continue;
    ++events;
    EXPECT_NEAR(e.duration_s, e.pipeline * 0.01, 1e-12);
  }
  EXPECT_EQ(events, 3 * f.schedule.spec.stages);  // pipelines 1..3, every stage
  GridOptions o;
  o.ramp_window_s = 0.005;
  EXPECT_LT(MeasureGrid(offset.waveform, o).ramp_w_per_s,
            MeasureGrid(aligned.waveform, o).ramp_w_per_s);
  EXPECT_LT(Relative(offset.waveform.EnergyJ(), offset.TotalEnergy()), 1e-9);

  job.pipeline_offset_s = 0;
  GridPlanRequest request;
  request.deadline_s = 1.2 * t0;
  request.iterations = 3;
  request.waveform_dt_s = 1e-3;
  request.options.ramp_window_s = 0.005;
  const GridPlan free = PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
  request.limits.max_ramp_w_per_s = 0.2 * free.firmware.grid.ramp_w_per_s;
  const GridPlan without = PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
  request.offsets_s = SpreadingOffsets(job.pipelines, request.options.ramp_window_s);
  ASSERT_EQ(request.offsets_s.size(), 4u);
  EXPECT_NEAR(request.offsets_s[0], 0.005 / 3, 1e-15);
  const GridPlan with = PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
  EXPECT_TRUE(with.chosen.meets);
  EXPECT_LE(with.chosen.energy_j, without.chosen.energy_j * (1 + 1e-12));
  const CandidatePlan& c = candidates[static_cast<std::size_t>(with.chosen.candidate)];
  EXPECT_LE(c.time_s + 3 * with.chosen.offset_s, request.deadline_s * (1 + 1e-12));
  // The unshaped list (the baseline and energy plan rows) has no offset.
  for (const ShapedPoint& p : with.unshaped) EXPECT_EQ(p.offset_s, 0);
  EXPECT_TRUE(SpreadingOffsets(1, 0.1).empty());
  request.offsets_s = {-1};
  EXPECT_NE(InputErrorOf([&] {
              PlanForGrid(f.schedule, f.profile, job, candidates, 0, request);
            }).find("GridPlanRequest::offsets_s"),
            std::string::npos);
}

TEST(SimulatorTest, TimelineIsChromeTraceJson) {
  const FrontierFixture f;
  JobSpec job;
  job.pipelines = 2;
  job.p_block_w = kPBlock;
  job.iterations = 3;
  job.allreduce_s = 0.01;
  job.straggler = {1, 1.2, 0, 0, 0};
  const Simulator simulator(f.schedule, f.profile, job, f.candidates, f.baseline, f.intrinsic);
  RunOptions options;
  options.timeline_iterations = 1;
  const SimulationResult r = simulator.Run(Policy::kJoulepipe, options);
  const nlohmann::json trace =
      nlohmann::json::parse(TimelineJson(f.schedule, {{"joulepipe", 0, &r.timeline}}));
  int instructions = 0, allreduce = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "instruction") {
      ++instructions;
      EXPECT_GT(e["args"]["mhz"].get<int>(), 0);
      EXPECT_GT(e["args"]["energy_j"].get<double>(), 0);
    }
    allreduce += e["cat"] == "allreduce";
    EXPECT_EQ(e["args"]["iteration"], 0);
  }
  EXPECT_EQ(instructions, 2 * f.schedule.num_nodes());
  EXPECT_EQ(allreduce, 2 * 4);
  options.max_timeline_events = 10;
  const SimulationResult cut = simulator.Run(Policy::kJoulepipe, options);
  EXPECT_EQ(cut.timeline.size(), 10u);
  EXPECT_TRUE(cut.timeline_truncated);
}

// ---- Bad input ------------------------------------------------------------------------------

TEST(SimulatorTest, BadInputThrowsInputErrorNamingTheField) {
  const schedule::Schedule schedule = schedule::Build(MakeSpec(schedule::Kind::k1F1B, 2, 3));
  const model::Profile profile = MakeProfile(2);
  const CandidatePlan plan =
      Candidate(schedule, profile, schedule::UniformClocks(schedule, profile, true));
  auto error = [&](auto edit, std::vector<CandidatePlan> candidates = {}, int base = 0,
                   int intrinsic = 0) {
    JobSpec job;
    job.p_block_w = kPBlock;
    job.pipelines = 2;
    edit(&job);
    if (candidates.empty()) candidates = {plan};
    return InputErrorOf([&] { Simulator(schedule, profile, job, candidates, base, intrinsic); });
  };
  // Each message names its field as "Struct::member" and says what is wrong.
  auto expect_names = [&](auto edit, const std::string& part) {
    const std::string message = error(edit);
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    EXPECT_EQ(message.find("--"), std::string::npos) << message;
  };
  expect_names([](JobSpec* j) { j->pipelines = 0; }, "JobSpec::pipelines must be 1..100000");
  expect_names([](JobSpec* j) { j->gpus_per_stage = 0; }, "JobSpec::gpus_per_stage");
  expect_names([](JobSpec* j) { j->p_block_w = -1; }, "JobSpec::p_block_w");
  expect_names([](JobSpec* j) { j->iterations = 0; }, "JobSpec::iterations");
  expect_names([](JobSpec* j) { j->straggler = {0, 0.9, 0, 0, 0}; }, "Straggler::slowdown must be");
  expect_names([](JobSpec* j) { j->straggler = {2, 1.2, 0, 0, 0}; }, "Straggler::pipeline must be");
  expect_names([](JobSpec* j) { j->straggler = {0, 1.2, 0, 5, 3}; },
               "Straggler::for_iterations must be 1..Straggler::period");
  expect_names([](JobSpec* j) { j->clock_variability = 0.5; }, "JobSpec::clock_variability");
  expect_names([](JobSpec* j) { j->stall_probability = 2; }, "JobSpec::stall_probability");
  expect_names([](JobSpec* j) { j->stall_s = NAN; }, "JobSpec::stall_s");
  // Times are quoted with their unit: front ends may take them in ms or us.
  expect_names([](JobSpec* j) { j->p2p_latency_s = -1; }, "JobSpec::p2p_latency_s");
  expect_names([](JobSpec* j) { j->p2p_latency_s = -1; }, "(got -1e+06 us)");
  // The simulator's own checks bound what the task's do (one rule for both,
  // src/sim/job_checks.cpp).
  expect_names([](JobSpec* j) { j->gpus_per_stage = 2000000000; },
               "JobSpec::gpus_per_stage must be 1..1024 (got 2000000000)");
  expect_names([](JobSpec* j) { j->stall_s = 1e305; }, "JobSpec::stall_s must be 0..3600000 ms");
  expect_names([](JobSpec* j) { j->allreduce_s = 1e297; }, "at most an hour");
  expect_names([](JobSpec* j) { j->straggler = {0, 1e308, 0, 0, 0}; },
               "Straggler::slowdown must be a factor 1..100");
  expect_names([](JobSpec* j) { j->allreduce_s = INFINITY; }, "JobSpec::allreduce_s");
  // P_block goes through the one check of the energy rule (model::CheckPBlock),
  // which also refuses implausible powers and reports the field.
  EXPECT_NE(error([](JobSpec* j) { j->p_block_w = 1e9; }).find("0..5000"), std::string::npos);
  try {
    JobSpec job;
    job.p_block_w = NAN;
    Simulator(schedule, profile, job, {plan}, 0, 0);
    ADD_FAILURE() << "NaN P_block accepted";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "JobSpec::p_block_w");
  }
  auto none = [](JobSpec*) {};
  EXPECT_NE(error(none, {plan}, 1, 0).find("baseline must index"), std::string::npos);
  EXPECT_NE(error(none, {plan}, 0, -1).find("intrinsic must index"), std::string::npos);
  CandidatePlan short_plan = plan;
  short_plan.mhz.pop_back();
  EXPECT_NE(error(none, {plan, short_plan}).find("candidate 1 has"), std::string::npos);
  CandidatePlan odd_clock = plan;
  odd_clock.mhz[3] = 1234;
  EXPECT_NE(error(none, {odd_clock}).find("1234 MHz"), std::string::npos);
  CandidatePlan no_time = plan;
  no_time.time_s = 0;
  EXPECT_NE(error(none, {no_time}).find("candidate 0 time_s"), std::string::npos);

  JobSpec job;
  job.p_block_w = kPBlock;
  const Simulator simulator(schedule, profile, job, {plan}, 0, 0);
  RunOptions options;
  options.detection_lag = -1;
  EXPECT_NE(InputErrorOf([&] {
              simulator.Run(Policy::kJoulepipe, options);
            }).find("RunOptions::detection_lag"),
            std::string::npos);
}

}  // namespace
}  // namespace joulepipe::sim
