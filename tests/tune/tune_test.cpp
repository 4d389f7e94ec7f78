// tune::Tune (tune.hpp): the candidates keep the job, the job figures are
// sim::SimulateJob's, the bound prunes exactly, the answer is never worse
// than clocks alone, nothing chosen is out of memory, and a cancel keeps
// what is solved.
#include "joulepipe/tune/tune.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "joulepipe/model/error.hpp"
#include "joulepipe/sim/simulate_job.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::tune {
namespace {

using Status = Candidate::Status;

// GPT-3 1.3B (24 layers) on 16 A100-SXM, today TP 2 x PP 4 x DP 2, 1F1B,
// global batch 32: small enough to solve every candidate in a test.
TuneRequest SmallJob() {
  TuneRequest r;
  r.workload.model = physics::FindTransformer("gpt3-1.3b");
  r.gpu = physics::FindGpu("a100-sxm");
  r.gpus = 16;
  r.global_batch = 32;
  r.current = {2, 4, 2, 1, schedule::Kind::k1F1B, 1};
  r.max_microbatch_size = 2;
  r.max_chunks = 3;
  r.grid_points = 20;
  return r;
}

TEST(TuneCandidates, KeepTheGpusAndTheGlobalBatchAndStartWithTheCurrent) {
  const TuneRequest r = SmallJob();
  const std::vector<TuneConfig> configs = TuneCandidates(r);
  ASSERT_GT(configs.size(), 20u);
  EXPECT_EQ(configs[0], r.current);
  std::set<std::tuple<int, int, int, int, int, int>> seen;
  bool interleaved = false;
  for (const TuneConfig& c : configs) {
    EXPECT_EQ(c.tp * c.pp * c.dp, 16) << ConfigText(c);
    EXPECT_EQ(r.global_batch % (c.dp * c.microbatch_size), 0) << ConfigText(c);
    EXPECT_LE(c.tp, r.gpus_per_node);
    EXPECT_LE(c.microbatch_size, r.max_microbatch_size);
    if (c.kind == schedule::Kind::kInterleaved) {
      interleaved = true;
      EXPECT_GE(c.chunks, 2);
      EXPECT_LE(c.chunks, r.max_chunks);
      EXPECT_EQ(24 % (c.pp * c.chunks), 0) << ConfigText(c);
      EXPECT_EQ((r.global_batch / (c.dp * c.microbatch_size)) % c.pp, 0) << ConfigText(c);
    } else {
      EXPECT_EQ(c.chunks, 1);
    }
    EXPECT_TRUE(
        seen.insert({c.tp, c.pp, c.dp, c.microbatch_size, static_cast<int>(c.kind), c.chunks})
            .second)
        << "twice: " << ConfigText(c);
  }
  EXPECT_TRUE(interleaved);
}

TEST(TuneCandidates, KeepPinsTheNamedFields) {
  TuneRequest r = SmallJob();
  r.keep = ParseTuneKeep("tp, dp");
  for (const TuneConfig& c : TuneCandidates(r)) {
    EXPECT_EQ(c.tp, 2);
    EXPECT_EQ(c.dp, 2);
    EXPECT_EQ(c.pp, 4);  // follows from the GPUs
  }
  r.keep = ParseTuneKeep("schedule,mbs");
  for (const TuneConfig& c : TuneCandidates(r)) {
    EXPECT_EQ(c.kind, schedule::Kind::k1F1B);
    EXPECT_EQ(c.microbatch_size, 1);
  }
}

TEST(TuneRequestChecks, NameTheFieldAndTheFix) {
  auto field_of = [](const TuneRequest& r) {
    try {
      CheckTuneRequest(r);
    } catch (const model::InputError& e) {
      return e.field();
    }
    return std::string("none");
  };
  TuneRequest r = SmallJob();
  EXPECT_EQ(field_of(r), "none");
  r.gpus = 32;
  EXPECT_EQ(field_of(r), "TuneRequest::current");
  r = SmallJob();
  r.global_batch = 33;
  EXPECT_EQ(field_of(r), "TuneRequest::global_batch");
  r = SmallJob();
  r.memory_margin = 0.95;
  EXPECT_EQ(field_of(r), "TuneRequest::memory_margin");
  r = SmallJob();
  r.current.tp = 16;
  r.current.pp = 1;
  r.current.dp = 1;
  EXPECT_EQ(field_of(r), "TuneRequest::current");  // TP over two nodes
  EXPECT_THROW(ParseTuneKeep("tp,cp"), model::InputError);
}

TEST(Tune, JobFiguresAreTheSimulatorsOnTheSameProfile) {
  TuneRequest r = SmallJob();
  r.current = {2, 4, 2, 1, schedule::Kind::kInterleaved, 2};
  r.keep = ParseTuneKeep("tp,pp,dp,mbs,schedule");
  const TuneResult result = Tune(r);
  ASSERT_EQ(result.candidates.size(), 1u);
  const Candidate& c = result.current();
  ASSERT_EQ(c.status, Status::kSolved);
  EXPECT_GT(c.allreduce_s, 0);
  EXPECT_GT(c.p2p_s, 0);

  sim::SimulateRequest s;
  s.spec = CandidateSpec(r, c.config);
  s.p_block_w = r.gpu.p_block_w;
  s.job.pipelines = c.config.dp;
  s.job.gpus_per_stage = c.config.tp;
  s.job.allreduce_s = c.allreduce_s;
  s.job.iterations = 2;
  s.resolution_s = 1e-3;
  const sim::SimulateOutcome o = sim::SimulateJob(CandidateProfile(r, c.config), s);
  EXPECT_NEAR(o.baseline.MeanTime(), c.max_clock.time_s, 1e-9 * c.max_clock.time_s);
  EXPECT_NEAR(o.baseline.MeanEnergy(), c.max_clock.energy_j, 1e-6 * c.max_clock.energy_j);
  // The simulated job running the tuned plan costs what tune says.
  EXPECT_NEAR(o.joulepipe.MeanEnergy(), result.clocks_only.job.energy_j,
              0.005 * result.clocks_only.job.energy_j);
}

TEST(Tune, PruningGivesTheEnvelopeOfSolvingEveryCandidate) {
  TuneRequest r = SmallJob();
  const TuneResult pruned = Tune(r);
  r.prune = false;
  const TuneResult all = Tune(r);
  EXPECT_LT(pruned.solved, all.solved);
  int dominated = 0;
  for (const Candidate& c : pruned.candidates) dominated += c.status == Status::kDominated;
  EXPECT_GT(dominated, 0);
  ASSERT_EQ(pruned.envelope.size(), all.envelope.size());
  for (std::size_t k = 0; k < all.envelope.size(); ++k) {
    EXPECT_DOUBLE_EQ(pruned.envelope[k].job.time_s, all.envelope[k].job.time_s) << k;
    EXPECT_DOUBLE_EQ(pruned.envelope[k].job.energy_j, all.envelope[k].job.energy_j) << k;
  }
  EXPECT_DOUBLE_EQ(pruned.best.job.energy_j, all.best.job.energy_j);
  // Every solved candidate's plans within the target stay above its bound
  // there (the bound within the target time).
  int checked = 0;
  for (const Candidate& c : all.candidates) {
    if (c.status != Status::kSolved) continue;
    for (const solver::FrontierPoint& p : c.frontier.points) {
      const JobPoint job = ToJobPoint(c, p, all.p_block_w);
      if (job.time_s > all.target_s) continue;
      EXPECT_GE(job.energy_j, c.bound_j * (1 - 1e-12)) << ConfigText(c.config);
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(Tune, NeverWorseThanClocksOnlyAndNeverOutOfMemory) {
  TuneRequest r = SmallJob();
  const TuneResult result = Tune(r);
  EXPECT_LE(result.best.job.energy_j, result.clocks_only.job.energy_j);
  EXPECT_LE(result.best.job.time_s, result.target_s * (1 + 1e-12));
  EXPECT_GT(result.SavingPct(result.clocks_only.job), 0);
  EXPECT_TRUE(result.chosen().memory.Fits(r.memory_margin));
  for (const Candidate& c : result.candidates) {
    if (c.status == Status::kSolved && &c != &result.current()) {
      EXPECT_TRUE(c.memory.Fits(r.memory_margin)) << ConfigText(c.config);
    }
  }
  // Clocks only is the planner's zero-slowdown plan on the same profile.
  solver::PlanRequest plan;
  plan.spec = CandidateSpec(r, r.current);
  plan.p_block_w = r.gpu.p_block_w;
  plan.resolution_s = 1e-3;
  const solver::PipelinePlan p = solver::PlanPipeline(CandidateProfile(r, r.current), plan);
  const JobPoint job = ToJobPoint(result.current(), p.chosen_point(), result.p_block_w);
  EXPECT_NEAR(result.clocks_only.job.energy_j, job.energy_j, 0.003 * job.energy_j);

  // A tighter GPU memory leaves the big-footprint candidates out.
  r.memory_margin = 0.9;
  const TuneResult tight = Tune(r);
  int out = 0;
  for (const Candidate& c : tight.candidates) out += c.status == Status::kNoMemory;
  EXPECT_GT(out, 0);
  EXPECT_TRUE(tight.best.candidate == 0 || tight.chosen().memory.Fits(0.9));
}

TEST(Tune, CancelKeepsWhatIsSolved) {
  TuneRequest r = SmallJob();
  std::atomic<bool> cancel{false};
  r.cancel = &cancel;
  r.progress = [&](int, int, const std::string&, double seconds) {
    if (seconds >= 0) cancel = true;  // after the first solve
  };
  const TuneResult result = Tune(r);
  EXPECT_TRUE(result.cancelled);
  EXPECT_EQ(result.solved, 1);
  EXPECT_EQ(result.current().status, Status::kSolved);
  int not_reached = 0;
  for (const Candidate& c : result.candidates) not_reached += c.status == Status::kNotReached;
  EXPECT_GT(not_reached, 0);
  EXPECT_EQ(result.best.candidate, 0);

  // Cancelled before the current configuration is solved: nothing to keep.
  cancel = true;
  r.progress = nullptr;
  EXPECT_THROW(Tune(r), model::Cancelled);
}

}  // namespace
}  // namespace joulepipe::tune
