// End-to-end coordination: a data-parallel job of 2 pipelines x 2 stages
// (four rank threads, each with its own runtime::Agent on a recording fake
// GPU) trains against `joulepipe serve`'s library (serve::Server, in
// process, on a loopback port) through the runtime's coordinator client
// (runtime::CoordinatedPlan), exactly as training processes would:
//   registration and profile upload -> every rank waits for its plan ->
//   iterations reported in the background -> pipeline 1 straggles for a
//   while -> the other pipeline's ranks switch to a slower, cheaper plan at
//   an iteration boundary -> the straggler recovers -> everyone switches
//   back. The agents' clock requests show the plans actually applied.
// And the fail-safe: with no coordinator listening, ranks keep default
// clocks and training goes on.
#include <barrier>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "joulepipe/coord/job.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "joulepipe/runtime/coord_client.hpp"
#include "joulepipe/runtime/coordinated_plan.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/serve/server.hpp"

namespace joulepipe {
namespace {

constexpr int kPipelines = 2, kStages = 2, kMicrobatches = 4, kIterations = 16;
constexpr int kSlowFrom = 3, kSlowTo = 8;  // pipeline 1 at 1.3x in 3..8
const std::vector<int> kClocks = {1410, 1305, 1200, 1095, 1005};

// Lower clocks slower and cheaper, as on real GPUs.
std::string ProfileCsv() {
  model::Profile p;
  for (int stage = 0; stage < kStages; ++stage) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const double base = (kind == model::Kind::kForward ? 0.010 : 0.020) * (1 + 0.3 * stage);
      for (int mhz : kClocks) {
        const double t = base * std::pow(1410.0 / mhz, 0.8);
        p.Add(stage, kind, model::ClockPoint(mhz, t, t * (100 + 200 * std::pow(mhz / 1410.0, 2))));
      }
    }
  }
  return model::ProfileToCsv(p);
}

// Records the SM clocks the agent's controller locks.
class RecordingControl : public gpu::ClockControl {
 public:
  std::string Describe() const override { return "recording"; }
  std::vector<int> SupportedSmClocks(int) override { return kClocks; }
  void SetLockedClocks(int, int, int max_mhz) override {
    std::lock_guard<std::mutex> lock(mutex_);
    locked_.push_back(max_mhz);
  }
  void ResetLockedClocks(int) override {}
  void SetPowerLimit(int, double) override {}
  void ResetPowerLimit(int) override {}
  void Restore() noexcept override {}
  std::vector<int> locked() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return locked_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<int> locked_;
};

runtime::CoordinatorOptions Client(const std::string& url) {
  runtime::CoordinatorOptions o;
  o.url = url;
  o.connect_timeout_s = 2;
  o.request_timeout_s = 10;
  o.retry.max_attempts = 3;
  o.retry.initial_backoff_s = 0.05;
  return o;
}

// The job the tests train: kPipelines x kStages, 1F1B, kMicrobatches.
protocol::JobConfig TestJob(const std::string& id) {
  protocol::JobConfig job;
  job.job_id = id;
  job.pp_degree = kStages;
  job.dp_degree = kPipelines;
  job.world_size = kPipelines * kStages;
  job.spec = {schedule::Kind::k1F1B, kStages, kMicrobatches, 1};
  job.p_block_w = 80;
  return job;
}

struct RankRun {
  std::vector<int> versions;       // the plan version in force at each iteration's start
  std::vector<int> locked_before;  // clocks locked before each iteration
  std::shared_ptr<RecordingControl> control;
  runtime::CoordinationStats stats;
  bool started = false;
};

// Runs the job's four ranks for kIterations; iteration i of pipeline p
// reports `time(p, i)` (the plan's predicted time, times its slowdown).
std::vector<RankRun> Train(const std::string& url, const std::string& job) {
  const schedule::Schedule schedule =
      schedule::Build({schedule::Kind::k1F1B, kStages, kMicrobatches, 1});
  std::vector<RankRun> runs(kPipelines * kStages);
  std::barrier sync(kPipelines * kStages);  // the gradient all-reduce
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kPipelines * kStages; ++rank) {
    threads.emplace_back([&, rank] {
      const int pipeline = rank / kStages, stage = rank % kStages;
      RankRun& run = runs[rank];
      run.control = std::make_shared<RecordingControl>();
      runtime::AgentOptions agent_options;
      agent_options.control = run.control;
      agent_options.log = [](const std::string&) {};
      runtime::Agent agent(std::move(agent_options));
      runtime::CoordinatedPlanOptions options;
      options.coordinator = Client(url);
      options.job_id = job;
      options.rank = rank;
      options.registration = protocol::RankInfo{rank, pipeline, stage, 0, kClocks};
      options.start_wait_s = 30;
      options.start_timeout_s = 40;
      options.log = [](const std::string&) {};
      runtime::CoordinatedPlan coordinated(agent, std::move(options));
      run.started = coordinated.Start();
      sync.arrive_and_wait();
      for (int i = 0; i < kIterations; ++i) {
        coordinated.OnStepBegin();
        run.versions.push_back(coordinated.stats().running_version);
        run.locked_before.push_back(static_cast<int>(run.control->locked().size()));
        for (int node : schedule.stage_order[stage]) {
          const model::Instruction& in = schedule.nodes[node];
          coordinated.OnInstructionBegin(in.kind, in.microbatch, in.chunk);
          // The kernels: long enough for the controller to apply the clock.
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          coordinated.OnInstructionEnd(in.kind, in.microbatch, in.chunk);
        }
        // The pipeline's work took its plan's predicted time (1.3x on the
        // straggler while it straggles).
        const double slow = pipeline == 1 && i >= kSlowFrom && i <= kSlowTo ? 1.3 : 1.0;
        coordinated.OnStepEnd(coordinated.stats().running_predicted_time_s * slow, 10.0);
        // Give the background thread time to report and learn of new plans
        // before the next boundary, as a real iteration's length would.
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
        sync.arrive_and_wait();
      }
      run.stats = coordinated.stats();
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

// The clocks a rank locked in the iterations that ran `version`.
std::vector<int> ClocksUnder(const RankRun& run, int version) {
  const std::vector<int> locked = run.control->locked();
  std::vector<int> out;
  for (int i = 0; i < kIterations; ++i) {
    if (run.versions[i] != version) continue;
    const int end =
        i + 1 < kIterations ? run.locked_before[i + 1] : static_cast<int>(locked.size());
    out.insert(out.end(), locked.begin() + run.locked_before[i], locked.begin() + end);
  }
  return out;
}

double Mean(const std::vector<int>& v) {
  double sum = 0;
  for (int x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

TEST(CoordinatedTraining, AStragglerMovesTheOtherPipelineToACheaperPlanAndBack) {
  serve::ServerOptions options;
  options.port = 0;
  options.log = [](const std::string&) {};
  serve::Server server(std::move(options));
  runtime::CoordinatorClient client(Client(server.url()));
  ASSERT_EQ(client.RegisterJob(TestJob("train")), "train");
  client.UploadProfile("train", ProfileCsv());

  const std::vector<RankRun> runs = Train(server.url(), "train");
  for (int rank = 0; rank < kPipelines * kStages; ++rank) {
    const RankRun& run = runs[rank];
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_TRUE(run.started);
    EXPECT_EQ(run.stats.reports_failed, 0u);
    EXPECT_EQ(run.stats.reports_dropped, 0u);
    // Versions only rise, one boundary at a time: 1, then 2 (the straggler
    // plan), then 3 (recovered).
    EXPECT_EQ(run.versions.front(), 1);
    EXPECT_EQ(run.versions.back(), 3);
    int first2 = -1, first3 = -1;
    for (int i = 0; i < kIterations; ++i) {
      if (i > 0) {
        EXPECT_GE(run.versions[i], run.versions[i - 1]);
      }
      if (run.versions[i] == 2 && first2 < 0) first2 = i;
      if (run.versions[i] == 3 && first3 < 0) first3 = i;
    }
    // Slow iterations 3 and 4 are seen when iteration 4 completes: the plan
    // can run from 5; the ranks learn of it from their next report's answer,
    // so a boundary or two later on a loaded machine.
    EXPECT_GE(first2, kSlowFrom + 2);
    EXPECT_LE(first2, kSlowFrom + 4);
    EXPECT_GE(first3, kSlowTo + 3);
    EXPECT_LE(first3, kSlowTo + 5);
  }
  // Pipeline 0 (ranks 0, 1) ran cheaper clocks under the straggler plan.
  for (int rank : {0, 1}) {
    EXPECT_LT(Mean(ClocksUnder(runs[rank], 2)), Mean(ClocksUnder(runs[rank], 1)))
        << "rank " << rank;
  }
}

TEST(CoordinatedTraining, WithoutACoordinatorRanksKeepDefaultClocksAndTrainingGoesOn) {
  // A port nothing listens on: bind one, close it.
  int port = 0;
  {
    serve::ServerOptions options;
    options.port = 0;
    options.log = [](const std::string&) {};
    serve::Server probe(std::move(options));
    port = probe.port();
  }
  auto control = std::make_shared<RecordingControl>();
  runtime::AgentOptions agent_options;
  agent_options.control = control;
  agent_options.log = [](const std::string&) {};
  runtime::Agent agent(std::move(agent_options));
  runtime::CoordinatedPlanOptions options;
  options.coordinator = Client("http://127.0.0.1:" + std::to_string(port));
  options.job_id = "nobody";
  options.start_timeout_s = 2;
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) { lines.push_back(line); };
  runtime::CoordinatedPlan coordinated(agent, std::move(options));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(coordinated.Start());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  for (int i = 0; i < 3; ++i) {  // training goes on; the hooks are no-ops
    coordinated.OnStepBegin();
    coordinated.OnInstructionBegin(model::Kind::kForward, 0, 0);
    coordinated.OnInstructionEnd(model::Kind::kForward, 0, 0);
    coordinated.OnStepEnd(0.1, std::nullopt);
  }
  EXPECT_EQ(agent.mode(), runtime::Mode::kOff);
  EXPECT_TRUE(control->locked().empty());
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("this rank keeps default clocks, training goes on"),
            std::string::npos)
      << lines.front();
}

}  // namespace
}  // namespace joulepipe

namespace joulepipe {
namespace {

// The long-poll limit is coord's rule; the runtime's client (which cannot
// include coord) states the same number.
// A server that holds one wait tells the other ranks when to come back;
// the runtime's client comes back by itself, and every rank gets its plan
// once the profile is there.
TEST(CoordinatedTraining, RanksOverTheServersHeldWaitsComeBackForTheirPlans) {
  serve::ServerOptions options;
  options.port = 0;
  options.max_waiting = 1;
  options.log = [](const std::string&) {};
  serve::Server server(std::move(options));
  runtime::CoordinatorClient client(Client(server.url()));
  ASSERT_EQ(client.RegisterJob(TestJob("wide")), "wide");
  const int ranks = kPipelines * kStages;
  for (int rank = 0; rank < ranks; ++rank) {
    client.RegisterRank("wide", {rank, rank / kStages, rank % kStages, 0, kClocks});
  }
  std::vector<std::optional<protocol::RankPlan>> plans(ranks);
  std::vector<std::thread> waiting;
  for (int rank = 0; rank < ranks; ++rank) {
    waiting.emplace_back([&, rank] {
      runtime::CoordinatorClient own(Client(server.url()));
      plans[rank] = own.WaitForPlan("wide", rank, 0, 30);
    });
  }
  // One parked, the others told to come back (no profile yet: no plan).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server.waiting_requests(), 1);
  client.UploadProfile("wide", ProfileCsv());
  const auto start = std::chrono::steady_clock::now();
  for (std::thread& t : waiting) t.join();
  // The come-backs are 1, 2 and 3 s out (one a second): all within ~4 s.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
  for (int rank = 0; rank < ranks; ++rank) {
    ASSERT_TRUE(plans[rank]) << "rank " << rank;
    EXPECT_EQ(plans[rank]->version, 1);
    EXPECT_EQ(plans[rank]->rank, rank);
  }
}

}  // namespace
}  // namespace joulepipe
