// Fakes for the runtime tests: a ClockControl that records its calls and
// fails on demand, an energy meter and a ClockSource that records what the
// agent reports.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "joulepipe/runtime/clock_source.hpp"

namespace joulepipe::runtime::testing {

// Records every call as a string: "lock 0 1200", "reset 0", "restore".
class FakeControl : public gpu::ClockControl {
 public:
  std::string Describe() const override { return "fake"; }
  std::vector<int> SupportedSmClocks(int) override { return {1410, 1200, 1000, 800, 600}; }
  void SetLockedClocks(int index, int min_mhz, int max_mhz) override {
    std::unique_lock<std::mutex> lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !hold_; });
    if (fail_at_.count(max_mhz)) {
      calls_.push_back("fail " + std::to_string(max_mhz));
      throw gpu::GpuError("fake: clock " + std::to_string(max_mhz) + " rejected");
    }
    calls_.push_back("lock " + std::to_string(index) + " " + std::to_string(min_mhz) + " " +
                     std::to_string(max_mhz));
  }
  void ResetLockedClocks(int index) override { Record("reset " + std::to_string(index)); }
  void SetPowerLimit(int index, double watts) override {
    if (fail_power_limit_) {
      Record("fail power " + std::to_string(static_cast<int>(watts)));
      throw gpu::GpuError("fake: power limit rejected");
    }
    Record("power " + std::to_string(index) + " " + std::to_string(static_cast<int>(watts)));
  }
  void ResetPowerLimit(int index) override { Record("reset power " + std::to_string(index)); }
  void FailPowerLimit() {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_power_limit_ = true;
  }
  void Restore() noexcept override { Record("restore"); }

  // SetLockedClocks throws GpuError for these clocks.
  void FailAt(int mhz) {
    std::lock_guard<std::mutex> lock(mutex_);
    fail_at_.insert(mhz);
  }
  // While held, SetLockedClocks blocks (after saying it entered).
  void Hold() {
    std::lock_guard<std::mutex> lock(mutex_);
    hold_ = true;
    entered_ = false;
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return entered_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    hold_ = false;
    changed_.notify_all();
  }
  std::vector<std::string> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  int Count(const std::string& call) const {
    int n = 0;
    for (const std::string& c : calls()) n += c == call;
    return n;
  }

 private:
  void Record(const std::string& call) {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back(call);
  }
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool hold_ = false;
  bool entered_ = false;
  bool fail_power_limit_ = false;
  std::set<int> fail_at_;
  std::vector<std::string> calls_;
};

// Energy counter that the test advances by hand; constant instant power.
class FakeMeter : public monitor::GpuMeter {
 public:
  int index() const override { return 0; }
  std::optional<std::uint64_t> ReadEnergyMj() const override {
    if (!has_counter) return std::nullopt;
    return energy_mj;
  }
  double ReadPowerW() const override { return power_w; }
  bool has_counter = true;
  std::uint64_t energy_mj = 1000000;
  double power_w = 100;
};

struct ReportedInstruction {
  model::Kind kind;
  int mhz;
  double seconds;
  double joules;
  bool approximate;
};

class RecordingSource : public ClockSource {
 public:
  int ClockFor(model::Kind kind) override {
    if (throw_in_clock_for) throw std::runtime_error("profiler broke");
    return kind == model::Kind::kForward ? forward_mhz : backward_mhz;
  }
  void OnInstruction(model::Kind kind, int mhz, double seconds, double joules, bool approximate,
                     int actual_mhz = 0) override {
    instructions.push_back({kind, mhz, seconds, joules, approximate});
    actual.push_back(actual_mhz);
  }
  void OnWait(double seconds, double joules) override { waits.push_back({seconds, joules}); }
  void OnStepEnd() override { ++step_ends; }

  std::vector<int> actual;  // actual_mhz per instruction, as instructions
  int forward_mhz = 1200;
  int backward_mhz = 1000;
  bool throw_in_clock_for = false;
  std::vector<ReportedInstruction> instructions;
  std::vector<std::pair<double, double>> waits;
  int step_ends = 0;
};

// A 1F1B-like stage plan: `n` forwards then `n` backwards, chunk 0, with
// forwards at `forward_mhz` and backwards at `backward_mhz`.
inline std::vector<model::PlannedInstruction> SimplePlan(int n, int forward_mhz, int backward_mhz) {
  std::vector<model::PlannedInstruction> plan;
  for (int kind = 0; kind < 2; ++kind) {
    for (int mb = 0; mb < n; ++mb) {
      model::PlannedInstruction p;
      p.instruction.kind = kind == 0 ? model::Kind::kForward : model::Kind::kBackward;
      p.instruction.microbatch = mb;
      p.mhz = kind == 0 ? forward_mhz : backward_mhz;
      plan.push_back(p);
    }
  }
  return plan;
}

// Runs every instruction of `plan` through the hooks, one step.
// One step through `hooks`: an Agent, or a CoordinatedPlan (which drives its
// agent).
template <typename Hooks>
void RunStep(Hooks& agent, const std::vector<model::PlannedInstruction>& plan) {
  agent.OnStepBegin();
  for (const model::PlannedInstruction& p : plan) {
    agent.OnInstructionBegin(p.instruction.kind, p.instruction.microbatch, p.instruction.chunk);
    agent.OnInstructionEnd(p.instruction.kind, p.instruction.microbatch, p.instruction.chunk);
  }
  agent.OnStepEnd();
}

}  // namespace joulepipe::runtime::testing
