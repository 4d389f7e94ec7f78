// bench_runtime_hooks: the cost of the agent's hooks on the training thread
// (Agent::OnInstructionBegin and OnInstructionEnd, timed separately, median
// and p99) in execute mode, and the clock-change latency through NVML
// directly (ClockControl::SetLockedClocks round trip). Target: < 2 us per
// hook.
//
// Hook scenarios, each over a stage plan of 1,536 instructions (768 forwards
// then 768 backwards, clocks cycling through 5 values) run for many steps:
//   * fake control, back to back — hooks called in a tight loop; the
//     controller thread is mostly busy, requests coalesce;
//   * fake control, paced — ~20 us of work between hooks, so the controller
//     thread sleeps and every request pays its wake-up (the realistic case:
//     instructions last milliseconds);
//   * the same two with an idle clock (a request at every end as well);
//   * direct NVML (MakeNvmlClockControl) on the simulated library, back to
//     back, paced 20 us and paced 500 us (slower than the controller's
//     200 us polling: nearly every request is applied).
// The controller polls (controller.hpp), so no hook pays a thread wake-up.
//
// Usage: bench_runtime_hooks [steps]   (default 50)
// Uses $JOULEPIPE_NVML_LIBRARY if set (a real GPU needs root for clock
// changes), else sim-nvml/libnvidia-ml.so.1 next to this executable with a
// generated configuration that grants clock permission. GPU: NVML index
// $JOULEPIPE_BENCH_GPU (default 0).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/gpu/sim_stream.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/runtime/agent.hpp"

namespace {

using joulepipe::model::Kind;
using joulepipe::model::PlannedInstruction;
using joulepipe::runtime::Agent;
using joulepipe::runtime::AgentOptions;
using SteadyClock = std::chrono::steady_clock;

using joulepipe::bench::Percentile;

// A control that accepts everything at once (the hooks' own cost).
class NullControl : public joulepipe::gpu::ClockControl {
 public:
  std::string Describe() const override { return "null"; }
  std::vector<int> SupportedSmClocks(int) override { return {}; }
  void SetLockedClocks(int, int, int) override { calls.fetch_add(1, std::memory_order_relaxed); }
  void ResetLockedClocks(int) override {}
  void SetPowerLimit(int, double) override {}
  void ResetPowerLimit(int) override {}
  void Restore() noexcept override {}
  std::atomic<long> calls{0};
};

std::vector<PlannedInstruction> MakePlan(const std::vector<int>& clocks) {
  std::vector<PlannedInstruction> plan;
  for (int kind = 0; kind < 2; ++kind) {
    for (int mb = 0; mb < 768; ++mb) {
      PlannedInstruction p;
      p.instruction.kind = kind == 0 ? Kind::kForward : Kind::kBackward;
      p.instruction.microbatch = mb;
      p.mhz = clocks[(mb + kind) % clocks.size()];
      plan.push_back(p);
    }
  }
  return plan;
}

// Busy-waits `us` microseconds (stands in for launching an instruction).
void Work(double us) {
  if (us <= 0) return;
  const auto end = SteadyClock::now() + std::chrono::duration<double, std::micro>(us);
  while (SteadyClock::now() < end) {
  }
}

void RunHooks(const char* label, std::shared_ptr<joulepipe::gpu::ClockControl> control,
              int nvml_index, const std::vector<int>& clocks, std::optional<int> idle_mhz,
              double pace_us, int steps, void* stream = nullptr) {
  AgentOptions options;
  options.nvml_index = nvml_index;
  options.control = std::move(control);
  options.idle_clock_mhz = idle_mhz;
  options.log = [](const std::string&) {};
  Agent agent(std::move(options));
  if (stream != nullptr) {
    std::string why;
    if (!agent.SetStream(stream, &why)) throw std::runtime_error("no stream order: " + why);
  }
  const std::vector<PlannedInstruction> plan = MakePlan(clocks);
  agent.SetPlan(plan);
  std::vector<double> begin_us;
  std::vector<double> end_us;
  begin_us.reserve(plan.size() * steps);
  end_us.reserve(plan.size() * steps);
  for (int step = -2; step < steps; ++step) {  // two warm-up steps
    agent.OnStepBegin();
    for (const PlannedInstruction& p : plan) {
      const auto& in = p.instruction;
      const auto t0 = SteadyClock::now();
      agent.OnInstructionBegin(in.kind, in.microbatch, in.chunk);
      const auto t1 = SteadyClock::now();
      Work(pace_us);
      const auto t2 = SteadyClock::now();
      agent.OnInstructionEnd(in.kind, in.microbatch, in.chunk);
      const auto t3 = SteadyClock::now();
      Work(pace_us);
      if (step >= 0) {
        begin_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        end_us.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
      }
    }
    agent.OnStepEnd();
  }
  agent.WaitIdle();
  const joulepipe::runtime::Stats s = agent.stats();
  std::printf(
      "%-44s begin median %.3f us p99 %.3f us max %.1f us | end median %.3f us p99 %.3f us "
      "max %.1f us | requested %llu applied %llu skipped %llu coalesced %llu%s\n",
      label, Percentile(begin_us, 0.5), Percentile(begin_us, 0.99), Percentile(begin_us, 1.0),
      Percentile(end_us, 0.5), Percentile(end_us, 0.99), Percentile(end_us, 1.0),
      static_cast<unsigned long long>(s.requested), static_cast<unsigned long long>(s.applied),
      static_cast<unsigned long long>(s.skipped), static_cast<unsigned long long>(s.coalesced),
      agent.fallback_reason() ? (" FELL BACK: " + *agent.fallback_reason()).c_str() : "");
}

void RunLatency(joulepipe::gpu::ClockControl& control, int nvml_index,
                const std::vector<int>& clocks, int changes) {
  std::vector<double> us;
  us.reserve(changes);
  for (int i = -20; i < changes; ++i) {
    const int mhz = clocks[(i + 20) % clocks.size()];
    const auto t0 = SteadyClock::now();
    control.SetLockedClocks(nvml_index, mhz, mhz);
    const auto t1 = SteadyClock::now();
    if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  control.Restore();
  std::printf(
      "clock change through %s: SetLockedClocks round trip median %.2f us, p99 %.2f us, "
      "max %.1f us (%d changes)\n",
      control.Describe().c_str(), Percentile(us, 0.5), Percentile(us, 0.99), Percentile(us, 1.0),
      changes);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  if (steps < 1) {
    std::fprintf(stderr, "usage: bench_runtime_hooks [steps >= 1]\n");
    return 2;
  }
  const char* gpu_env = std::getenv("JOULEPIPE_BENCH_GPU");
  const int nvml_index = gpu_env ? std::atoi(gpu_env) : 0;
  const char* library = std::getenv(joulepipe::gpu::kNvmlLibraryEnv);
  std::string config_path;
  if (!library || !*library) {
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    const std::string sim = (self.parent_path() / "sim-nvml" / "libnvidia-ml.so.1").string();
    ::setenv(joulepipe::gpu::kNvmlLibraryEnv, sim.c_str(), 1);
    config_path = (std::filesystem::temp_directory_path() /
                   ("joulepipe-bench-runtime-" + std::to_string(::getpid()) + ".json"))
                      .string();
    std::ofstream(config_path) << R"({"gpu": "a100-sxm4-80gb", "permissions": {"clocks": true}})";
    ::setenv("JOULEPIPE_SIM_NVML_CONFIG", config_path.c_str(), 1);
    ::unsetenv("JOULEPIPE_SIM_NVML_GPU");
    ::unsetenv("JOULEPIPE_SIM_NVML_COUNT");
  }
  int rc = 0;
  try {
    std::printf(
        "bench_runtime_hooks: execute mode, stage plan of 1536 instructions, %d steps "
        "(%d samples per hook); timings include one steady_clock read (~20 ns)\n",
        steps, steps * 1536);
    const std::vector<int> fake_clocks = {1410, 1350, 1200, 1050, 900};
    RunHooks("fake control, back to back:", std::make_shared<NullControl>(), 0, fake_clocks,
             std::nullopt, 0, steps);
    RunHooks("fake control, paced 20 us:", std::make_shared<NullControl>(), 0, fake_clocks,
             std::nullopt, 20, steps);
    RunHooks("fake control + idle clock, back to back:", std::make_shared<NullControl>(), 0,
             fake_clocks, 600, 0, steps);
    RunHooks("fake control + idle clock, paced 20 us:", std::make_shared<NullControl>(), 0,
             fake_clocks, 600, 20, steps);

    std::printf("%s\n", joulepipe::gpu::NvmlMethodology().c_str());
    std::shared_ptr<joulepipe::gpu::ClockControl> nvml = joulepipe::gpu::MakeNvmlClockControl();
    const std::vector<int> all = nvml->SupportedSmClocks(nvml_index);
    std::vector<int> clocks;
    for (std::size_t i = 0; i < all.size() && clocks.size() < 5; i += 4) clocks.push_back(all[i]);
    RunHooks("nvml direct, back to back:", nvml, nvml_index, clocks, std::nullopt, 0, steps);
    RunHooks("nvml direct, paced 20 us:", nvml, nvml_index, clocks, std::nullopt, 20, steps);
    RunHooks("nvml direct, paced 500 us (2 steps):", nvml, nvml_index, clocks, std::nullopt, 500,
             2);
    // Stream order (Agent::SetStream): each hook also records a CUDA event
    // on the training's stream, here the simulated library's (a queue push
    // under a mutex; the real driver's cuEventRecord is a few hundred ns).
    joulepipe::gpu::SimulatedStream stream(static_cast<unsigned>(nvml_index));
    RunHooks("stream order, fake control, paced 20 us:", std::make_shared<NullControl>(), 0,
             fake_clocks, std::nullopt, 20, steps, stream.handle());
    RunHooks("stream order, nvml direct, paced 20 us:", nvml, nvml_index, clocks, std::nullopt, 20,
             steps, stream.handle());
    RunLatency(*nvml, nvml_index, clocks, 5000);
    std::printf("target: < 2 us per hook (median and p99)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_runtime_hooks: %s\n", e.what());
    rc = 1;
  }
  if (!config_path.empty()) std::filesystem::remove(config_path);
  return rc;
}
