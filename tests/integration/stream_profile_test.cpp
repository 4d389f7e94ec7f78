// Profile rows where the GPU is (issue 58): on the simulated GPU that runs
// asynchronously, a loop that queues a whole step's kernels without
// synchronising (as a real loop does until it reads its loss) is profiled in
// situ. With host points (no stream) an instruction's row is how long the
// host took to ENQUEUE it; with the stream (Agent::SetStream) each row is
// the device's time between the instruction's events and the GPU's energy
// while it ran. The ground truth is the simulated library's call log: each
// kernel's device start, end, clocks and exact energy.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../gpu/sim_nvml_child.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/sim_stream.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "joulepipe/runtime/profiler.hpp"

namespace joulepipe {
namespace {

using gpu::testing::RunInChild;
using gpu::testing::SimEnv;
using gpu::testing::TempFile;

constexpr int kMicrobatches = 4;
constexpr int kMaxSteps = 40;
// One 1F1B-free stage: all forwards, then all backwards; a forward is one
// 20 ms kernel at the highest clock (90 % compute), a backward 40 ms (70 %).
constexpr double kForwardS = 0.020;
constexpr double kBackwardS = 0.040;

double NowUnixS() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double Worst(const std::vector<double>& v) {
  return v.empty() ? -1 : *std::max_element(v.begin(), v.end());
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Truth {
  double seconds = 0, joules = 0;
  int n = 0;
};

// Mean device time and energy of the kernels of each (kind, clock) that ran
// wholly at one clock, from the call log between two times.
std::map<std::pair<model::Kind, int>, Truth> ReadTruth(const std::string& log_path, double from,
                                                       double to) {
  std::map<std::pair<model::Kind, int>, Truth> out;
  std::ifstream in(log_path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["function"] != "kernel" || j["t"].get<double>() < from || j["t"].get<double>() > to)
      continue;
    const nlohmann::json& a = j["args"];
    const int start_mhz = static_cast<int>(std::lround(a["start_mhz"].get<double>()));
    if (start_mhz != static_cast<int>(std::lround(a["end_mhz"].get<double>()))) continue;
    const model::Kind kind = a["seconds_at_max_clock"].get<double>() < 0.03
                                 ? model::Kind::kForward
                                 : model::Kind::kBackward;
    Truth& t = out[{kind, start_mhz}];
    t.seconds += a["end_unix_s"].get<double>() - a["start_unix_s"].get<double>();
    t.joules += a["energy_j"].get<double>();
    ++t.n;
  }
  for (auto& [key, t] : out) {
    t.seconds /= t.n;
    t.joules /= t.n;
  }
  return out;
}

struct ProfileRun {
  std::vector<runtime::ProfileRow> rows;
  int steps = 0;
  bool done = false;
};

// Profiles the loop until the profiler is done (or kMaxSteps).
ProfileRun Profile(bool stream_ordered) {
  ProfileRun run;
  runtime::ProfilerOptions popts;
  popts.clocks = {1410, 1200, 1005};
  popts.remeasure_iterations = 0;
  // Two steps' worth of samples per clock, so the trimmed mean drops a
  // sample a late clock switch spoilt (a busy machine delays the
  // controller's thread: one row read 8.5 % off with one step's worth).
  popts.samples_per_clock = 2 * kMicrobatches;
  auto profiler = std::make_shared<runtime::InSituProfiler>(popts);
  {
    gpu::SimulatedStream stream(0);
    runtime::AgentOptions options;
    options.nvml_index = 0;
    options.control = gpu::MakeNvmlClockControl();
    options.log = [](const std::string&) {};
    runtime::Agent agent(std::move(options));
    if (stream_ordered) {
      std::string why;
      EXPECT_TRUE(agent.SetStream(stream.handle(), &why)) << why;
    }
    agent.SetProfiler(profiler);
    for (; run.steps < kMaxSteps && !profiler->done(); ++run.steps) {
      agent.OnStepBegin();
      for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
        for (int mb = 0; mb < kMicrobatches; ++mb) {
          agent.OnInstructionBegin(kind, mb, 0);
          // Returns at once: the host runs ahead of the device.
          if (kind == model::Kind::kForward) {
            stream.Launch(kForwardS, 0.9, 0.9);
          } else {
            stream.Launch(kBackwardS, 0.7, 0.8);
          }
          agent.OnInstructionEnd(kind, mb, 0);
        }
      }
      agent.OnStepEnd();
      stream.Synchronize();  // the loss read
    }
    EXPECT_EQ(agent.mode(), runtime::Mode::kProfile) << agent.fallback_reason().value_or("");
    agent.Disable();
  }
  run.done = profiler->done();
  run.rows = profiler->Report().rows;
  return run;
}

struct Errors {
  std::vector<double> time, energy;  // relative, per row
};

// Each row against the ground truth of its kind at the nearest clock that
// kernels ran wholly at (the clock a row names is the one the GPU reported).
Errors Compare(const ProfileRun& run, const std::map<std::pair<model::Kind, int>, Truth>& truth) {
  Errors errors;
  for (const runtime::ProfileRow& row : run.rows) {
    const Truth* best = nullptr;
    int distance = 0;
    for (const auto& [key, t] : truth) {
      if (key.first != row.kind || t.n < 2) continue;
      if (best == nullptr || std::abs(key.second - row.mhz) < distance) {
        best = &t;
        distance = std::abs(key.second - row.mhz);
      }
    }
    if (best == nullptr) continue;
    errors.time.push_back(std::abs(row.time_s / best->seconds - 1));
    errors.energy.push_back(std::abs(row.energy_j / best->joules - 1));
  }
  return errors;
}

TEST(StreamProfile, RowsAreTheDevicesTimeAndEnergyWhileTheHostRunsAhead) {
  TempFile log("");
  TempFile config(R"({"gpu": "a100-sxm4-80gb", "count": 1, "permissions": {"clocks": true},
                      "call_log": ")" +
                  log.path() + R"("})");
  RunInChild(SimEnv(config.path()), [&] {
    const double from = NowUnixS();
    const ProfileRun host_run = Profile(/*stream_ordered=*/false);
    const ProfileRun device_run = Profile(/*stream_ordered=*/true);
    if (::testing::Test::HasFailure()) return;
    // The same kernels at the same clocks in both runs: one ground truth.
    const auto truth = ReadTruth(log.path(), from, NowUnixS());
    const Errors host = Compare(host_run, truth);
    const Errors device = Compare(device_run, truth);
    std::printf(
        "host points: %zu rows in %d steps, time error median %.1f %% worst %.1f %%, energy "
        "error median %.1f %% worst %.1f %%\n"
        "stream order: %zu rows in %d steps, time error median %.2f %% worst %.2f %%, energy "
        "error median %.2f %% worst %.2f %%\n",
        host_run.rows.size(), host_run.steps, 100 * Median(host.time), 100 * Worst(host.time),
        100 * Median(host.energy), 100 * Worst(host.energy), device_run.rows.size(),
        device_run.steps, 100 * Median(device.time), 100 * Worst(device.time),
        100 * Median(device.energy), 100 * Worst(device.energy));
    // Every clock of both kinds profiled, each row within 3 % of what the
    // device did (the issue's goal; 0.1-0.4 % on an idle machine).
    EXPECT_TRUE(device_run.done);
    ASSERT_EQ(device.time.size(), 6u);
    EXPECT_LE(Worst(device.time), 0.03);
    EXPECT_LE(Worst(device.energy), 0.03);
    // Host points measure the enqueue: rows far from the device's truth.
    ASSERT_EQ(host.time.size(), host_run.rows.size());
    ASSERT_FALSE(host.time.empty());
    EXPECT_GE(Median(host.time), 0.5);
    EXPECT_GE(Median(host.energy), 0.5);
  });
}

}  // namespace
}  // namespace joulepipe
