// Agent: the per-rank runtime behind the training hooks. One per training
// process (rank), driving one GPU.
//
//   runtime::AgentOptions options;
//   options.nvml_index = device.nvml_index();
//   options.control = gpu::MakeNvmlClockControl();  // or MakeDaemonClockControl
//   runtime::Agent agent(std::move(options));
//   agent.SetPlan(plan.stages[my_stage]);
//   for (each iteration) {
//     agent.OnStepBegin();
//     for (each forward/backward of this stage, in schedule order) {
//       agent.OnInstructionBegin(kind, microbatch, chunk);
//       ...launch the instruction's kernels...
//       agent.OnInstructionEnd(kind, microbatch, chunk);
//     }
//     agent.OnStepEnd();
//   }
//
// Modes:
//   kOff      hooks are no-ops; the GPU runs at default clocks. The state
//             after Disable() and after a fallback.
//   kProfile  SetProfiler(source): each instruction's clock comes from
//             source->ClockFor(kind); the agent measures every instruction
//             and the wait before it and reports them to the source.
//   kExecute  SetPlan(stage_plan): the agent walks the plan in order and
//             requests each planned instruction's clock.
//             SetPowerLimitPlan(stage_plan, watts): the power-limit lever
//             (solver/power_limit_plan.hpp): the GPU's power limit is set
//             once (off the training thread), no clock is locked, and the
//             hooks only check that training runs the plan's sequence (a
//             mismatch falls back as with clocks).
//
// Clock changes never happen on the training thread: the hooks post the
// wanted clock to the ClockController (controller.hpp), whose thread applies
// it through gpu::ClockControl (direct NVML or the joulepiped daemon).
//
// Fail-safe (docs/architecture.md): any error — the executed instruction sequence does
// not match the plan, the daemon is gone, an NVML error, a clock rejected, a
// ClockSource that throws, a null control — makes the agent fall back: the
// default clocks are restored (off the training thread), the reason is
// logged once and kept in fallback_reason(), mode() becomes kOff and the
// hooks become no-ops until a new SetPlan/SetProfiler. Nothing here throws
// into the training loop.
//
// Threads: the hooks (OnStep*, OnInstruction*) are called from one training
// thread. SetPlan, SetProfiler and Disable must not run concurrently with the
// hooks (call them between iterations, from the training thread). mode(),
// fallback_reason() and stats() may be called from any thread.
//
// Cost: execute-mode hooks do no I/O, no allocation, no NVML call and take
// no lock: an atomic mode load, the plan comparison and a few atomic
// operations to post the clock (the controller polls; controller.hpp).
// About 0.05 µs median, < 0.7 µs p99 (bench/runtime_hooks.cpp,
// docs/runtime.md). Profile-mode hooks additionally read the GPU's energy
// counter or instant power through NVML on the training thread (tens of µs;
// profiling runs are short and not the steady state); with a stream they
// record an event instead and the meter's thread reads the GPU.
//
// Restoring clocks: the destructor restores the default clocks. A crash
// skips the destructor: with the daemon, the daemon restores the GPU when
// the connection closes; with direct NVML the clocks stay locked until
// `nvidia-smi -rgc` (or the next joulepipe run) resets them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/runtime/clock_source.hpp"
#include "joulepipe/runtime/controller.hpp"
#include "joulepipe/runtime/device_markers.hpp"

namespace joulepipe::runtime {

enum class Mode { kOff, kProfile, kExecute };
const char* ModeName(Mode mode);  // "off", "profile", "execute"

struct AgentOptions {
  int nvml_index = 0;                          // the GPU this rank drives
  std::shared_ptr<gpu::ClockControl> control;  // direct NVML or daemon
  // Applied between instructions (requested at every instruction end; the
  // next begin requests the instruction's clock, and a burst coalesces).
  // In execute mode, an instruction whose plan entry has wait_frequency
  // gets that clock at its end instead, with a restore to the next
  // instruction's clock wait_restore_s later (ClockController::RequestWait).
  std::optional<int> idle_clock_mhz;
  // One line per event (a fallback, SetPlan/SetProfiler); default: stderr
  // with a "joulepipe runtime: " prefix. Called from the training thread
  // (SetPlan, SetProfiler, a fallback it finds) or the controller thread (a
  // fallback on a ClockControl error); a fallback is logged once.
  std::function<void(const std::string&)> log;
  // Profile mode only: the GPU's meter; nullptr = the GPU nvml_index through
  // NVML (opened on the first SetProfiler). Profile mode measures every
  // instruction and every wait as a monitor::Monitor window over it, so the
  // rule is monitor's: a counter delta for windows of at least one counter
  // period, instant power x duration (approximate) for shorter ones, power
  // sampling for GPUs without the counter.
  std::shared_ptr<monitor::GpuMeter> meter;
  // Profile mode: NVML's energy counter update period (MonitorOptions).
  double counter_period_s = 0.1;
  // The controller thread's polling (controller.hpp).
  ControllerOptions controller;
};

struct Stats {
  // Controller (clock changes).
  std::uint64_t requested = 0;  // clocks posted by the hooks
  std::uint64_t applied = 0;    // SetLockedClocks calls that succeeded
  std::uint64_t restores = 0;   // default clocks restored (Disable, fallback)
  std::uint64_t skipped = 0;    // requests equal to the clock already applied
  std::uint64_t coalesced = 0;  // requests overwritten before the thread saw them
  std::uint64_t failed = 0;     // ClockControl calls that threw (each one a fallback)
  // Clocks while waiting (plans with wait_frequency): waits lowered at an
  // instruction's end, and their timed restores that came due (the others
  // were overtaken by the next instruction's begin).
  std::uint64_t lowered_waits = 0;
  std::uint64_t timed_restores = 0;
  // Grid-shaped plans (model::StageShape): waits held at the hold clock,
  // and clocks the start ramp capped (instructions, holds and the steps
  // between training steps while it runs).
  std::uint64_t held_waits = 0;
  std::uint64_t ramp_capped = 0;
  // Stream order (SetStream): markers the hooks recorded, and requests that
  // fell back to the host's point (the marker ring was full).
  std::uint64_t markers = 0;
  std::uint64_t markers_skipped = 0;
  // Hooks (counted while the mode is not kOff).
  std::uint64_t step_begins = 0;
  std::uint64_t step_ends = 0;
  std::uint64_t instruction_begins = 0;
  std::uint64_t instruction_ends = 0;
  int last_applied_mhz = 0;       // 0: default clocks
  double last_power_limit_w = 0;  // 0: the default power limit
};

class Agent {
 public:
  // Starts the controller thread. Never throws for GPU errors: a null
  // control falls back at once (fallback_reason() says so).
  explicit Agent(AgentOptions options);
  ~Agent();  // restores default clocks, joins the controller thread
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Execute mode: this rank's stage plan — its instructions in execution
  // order with clocks (model::Plan::stages[stage]). Clears a fallback. An
  // empty plan falls back. Not a hook: may allocate. `head_wait`
  // (model::Plan::head_waits[stage]): when lowered, OnStepBegin locks its
  // clock and restores the first instruction's clock restore_s later.
  //
  // `shape` (model::StageShapeOf, a grid-shaped plan): with hold_mhz, every
  // instruction's end locks hold_mhz instead of the idle clock (the wait
  // until the next instruction, or until the step's end, is held there).
  // With a start ramp, from the first OnStepBegin of a shaped plan on this
  // agent (a later SetPlan does not restart it) and for start_ramp_s
  // seconds, every clock the agent locks is capped by the ramp's step then
  // due, and between steps the GPU waits at that step's clock instead of its
  // default clocks (the default clocks would jump to full power). After the
  // ramp, steps end at default clocks as always.
  void SetPlan(std::vector<model::PlannedInstruction> stage_plan, model::HeadWait head_wait = {},
               model::StageShape shape = {});
  // Execute mode with a power limit instead of clocks: `watts` (0 = the
  // default limit) for the whole plan; the plan's clocks are not applied
  // (they are what the limit is predicted to give). The idle clock is not
  // applied either. Clears a fallback; an empty plan falls back.
  void SetPowerLimitPlan(std::vector<model::PlannedInstruction> stage_plan, double watts);
  // Profile mode: clocks come from `source`, measurements go to it. Clears
  // a fallback. nullptr = Disable().
  void SetProfiler(std::shared_ptr<ClockSource> source);
  // kOff: default clocks restored (asynchronously), hooks become no-ops.
  void Disable();

  // Where the GPU is (device_markers.hpp): in execute mode, every clock a
  // hook asks for is applied when the device reaches the hook's point on
  // `stream` (a CUstream: the stream the training launches its kernels on),
  // not when the host passes it; the hooks record a CUDA event there (one
  // cuEventRecord each) and never synchronise. False, with the reason, when
  // there is no CUDA driver (the hooks then keep marking the host's points,
  // as they do without this call). Once per agent, before the first plan,
  // from the training thread (the one whose CUDA context owns the stream).
  // Profile mode then measures there too (device_meter.hpp): each
  // instruction's time is the device's between its events, its energy the
  // GPU's meter read while it ran, and the profiler hears of them (and of
  // each step's end) in device order, a few instructions after the hooks.
  bool SetStream(gpu::CudaStream stream, std::string* why_not);
  // Whether SetStream succeeded: clocks follow the device.
  bool stream_ordered() const;

  // Hooks, called on the training thread: never throw, never block on the
  // GPU, no allocation (execute mode).
  void OnStepBegin() noexcept;
  // Execute mode: the whole plan must have run; a step that ended early
  // falls back. Resets the plan position. In both modes the GPU then goes
  // back to its default clocks (the plan's lowered wait after the step's
  // last instruction, if it has one, first): whatever runs between steps —
  // the optimizer, evaluation, checkpointing — runs untouched.
  void OnStepEnd() noexcept;
  void OnInstructionBegin(model::Kind kind, int microbatch, int chunk) noexcept;
  void OnInstructionEnd(model::Kind kind, int microbatch, int chunk) noexcept;

  // A grid plan's stop ramp (StageShape::stop_ramp_s > 0): training ends in
  // about `seconds`. From now on every clock the agent locks (between steps
  // too) is capped by the start ramp's clocks in descending order, each for
  // an equal share of min(seconds, stop_ramp_s), then the lowest until the
  // agent is closed or disabled, so the job's power falls in steps before
  // the last one to idle. Training thread, like the hooks; never throws.
  // False (nothing done) outside execute mode, without a stop ramp, or
  // once it has begun.
  bool BeginStopRamp(double seconds) noexcept;

  // Execute mode: the knob setting (model::PlannedInstruction::knobs, e.g.
  // "overlap=2;comm_sms=12") the plan gives the instruction now running
  // (after its OnInstructionBegin) or, between instructions, the next one;
  // "" in other modes, after a fallback, or when the plan names none. The
  // training code reads it after OnInstructionBegin and applies it itself
  // (the agent sets only clocks). Training thread only, like the hooks; no
  // allocation; valid until the next SetPlan/SetProfiler/Disable.
  std::string_view planned_knobs() const noexcept;

  Mode mode() const;
  // Set once the agent fell back; cleared by SetPlan/SetProfiler.
  std::optional<std::string> fallback_reason() const;
  Stats stats() const;

  // Blocks until the controller has handled every posted clock (tests,
  // benchmarks). Returns false on timeout.
  bool WaitIdle(double timeout_s = 5.0) const;

  struct State;  // agent.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace joulepipe::runtime
