#include "joulepipe/runtime/agent.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/runtime/controller.hpp"
#include "joulepipe/runtime/device_meter.hpp"

namespace joulepipe::runtime {

namespace {

using SteadyClock = std::chrono::steady_clock;

inline void Bump(std::atomic<std::uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// "forward mb 4 chunk 0"
std::string Name(model::Kind kind, int microbatch, int chunk) {
  return std::string(model::KindName(kind)) + " mb " + std::to_string(microbatch) + " chunk " +
         std::to_string(chunk);
}

// Lends the agent's shared meter to the Monitor, which owns its meters.
class SharedMeter final : public monitor::GpuMeter {
 public:
  explicit SharedMeter(std::shared_ptr<monitor::GpuMeter> meter) : meter_(std::move(meter)) {}
  int index() const override { return meter_->index(); }
  std::string name() const override { return meter_->name(); }
  std::optional<std::uint64_t> ReadEnergyMj() const override { return meter_->ReadEnergyMj(); }
  double ReadPowerW() const override { return meter_->ReadPowerW(); }
  int ReadSmClockMhz() const override { return meter_->ReadSmClockMhz(); }

 private:
  std::shared_ptr<monitor::GpuMeter> meter_;
};

// Window names of profile mode; at most one of them is open at a time.
constexpr std::string_view kInstructionWindow = "instruction";
constexpr std::string_view kWaitWindow = "wait";
// Profile mode at the host's points: how often the monitor's sampler reads
// the GPU's power (an instruction of 10 ms gets 10 samples).
constexpr double kHostProfileSamplingS = 0.001;

}  // namespace

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kOff:
      return "off";
    case Mode::kProfile:
      return "profile";
    case Mode::kExecute:
      return "execute";
  }
  return "unknown";
}

struct Agent::State {
  AgentOptions options;
  // Declared before the controller, so destroyed after it (its thread asks
  // the markers until it is joined).
  std::unique_ptr<DeviceMarkers> markers;       // SetStream's; null: the host's points
  gpu::CudaStream stream = nullptr;             // SetStream's
  std::unique_ptr<ClockController> controller;  // null when options.control is null
  std::atomic<std::uint64_t> markers_recorded{0};
  std::atomic<Mode> mode{Mode::kOff};

  // The fallback: set once (until SetPlan/SetProfiler clear it); logged once.
  mutable std::mutex reason_mutex;
  std::optional<std::string> reason;
  bool fell_back = false;  // guarded by reason_mutex

  // Hook counters: one writer (the training thread).
  std::atomic<std::uint64_t> step_begins{0};
  std::atomic<std::uint64_t> step_ends{0};
  std::atomic<std::uint64_t> instruction_begins{0};
  std::atomic<std::uint64_t> instruction_ends{0};
  std::atomic<std::uint64_t> lowered_waits{0};
  std::atomic<std::uint64_t> held_waits{0};
  std::atomic<std::uint64_t> ramp_capped{0};

  // Instruction tracking (training thread only).
  std::vector<model::PlannedInstruction> plan;  // execute mode
  model::HeadWait head_wait;                    // execute mode: the wait before plan[0]
  model::StageShape shape;                      // execute mode: a grid plan's levers
  // The start ramp (training thread only): started at the first step of a
  // plan with one, over once start_ramp_s has passed since.
  bool ramp_started = false;
  bool ramping = false;
  SteadyClock::time_point ramp_start;
  // The stop ramp (training thread only): from BeginStopRamp on, the start
  // ramp's clocks descending over stop_s, then the lowest held.
  bool stopping = false;
  double stop_s = 0;
  SteadyClock::time_point stop_start;
  bool power_limit_plan = false;  // execute mode: no clock requests
  std::size_t position = 0;       // next plan entry
  bool in_instruction = false;
  model::Kind current_kind = model::Kind::kForward;
  int current_microbatch = 0;
  int current_chunk = 0;

  // Profile mode (training thread only). Energy is measured through
  // monitor's windows: the instruction's, and the wait before it (from the
  // previous instruction's end, or the step's begin).
  std::shared_ptr<ClockSource> source;
  std::unique_ptr<monitor::Monitor> monitor;
  // Profile mode: the meter the monitor measures through, also read for the
  // clock each instruction really ran at.
  std::shared_ptr<monitor::GpuMeter> clock_meter;
  monitor::Measurement measurement;  // reused: no allocation once warm
  int current_mhz = 0;
  bool waiting = false;  // kWaitWindow is open
  // Profile mode with a stream: instructions and waits measured where the
  // GPU is (device_meter.hpp) instead of the monitor's host windows. Spans
  // reach the source in device order, each step's end with them; `epoch`
  // tells the spans of this profiler from those a mode change left behind.
  std::unique_ptr<DeviceMeter> device_meter;
  bool profile_on_device = false;
  std::uint32_t epoch = 0;

  // Whether a hook's clock waits for the device: in execute mode with a
  // stream, and in profile mode when it measures on the device too.
  bool DeviceOrdered() const noexcept {
    if (!markers) return false;
    const Mode m = mode.load(std::memory_order_relaxed);
    return m == Mode::kExecute || (m == Mode::kProfile && profile_on_device);
  }

  // A hook's clock: at the device's point when markers are set (execute
  // mode), else now.
  void Post(int mhz) noexcept {
    if (DeviceOrdered()) {
      const std::uint64_t m = markers->Record();
      if (m != 0)
        markers_recorded.store(markers_recorded.load(std::memory_order_relaxed) + 1,
                               std::memory_order_relaxed);
      controller->RequestAt(m, mhz);
      return;
    }
    controller->Request(mhz);
  }
  void PostWait(int wait_mhz, int restore_mhz, double restore_after_s) noexcept {
    if (DeviceOrdered()) {
      const std::uint64_t m = markers->Record();
      if (m != 0)
        markers_recorded.store(markers_recorded.load(std::memory_order_relaxed) + 1,
                               std::memory_order_relaxed);
      controller->RequestWaitAt(m, wait_mhz, restore_mhz, restore_after_s);
      return;
    }
    controller->RequestWait(wait_mhz, restore_mhz, restore_after_s);
  }

  void Log(const std::string& line) noexcept {
    try {
      if (options.log) {
        options.log(line);
      } else {
        std::fprintf(stderr, "joulepipe runtime: %s\n", line.c_str());
      }
    } catch (...) {
    }
  }

  // Falls back to default clocks: hooks become no-ops, the reason is kept
  // and logged once. `restore`: ask the controller to restore (false when
  // the controller failed and already did).
  void FallBack(const std::string& why, bool restore) noexcept {
    mode.store(Mode::kOff, std::memory_order_release);
    if (restore && controller) controller->Request(ClockController::kDefaultClocks);
    bool first = false;
    try {
      std::lock_guard<std::mutex> lock(reason_mutex);
      if (!fell_back) {
        fell_back = true;
        first = true;
        reason = why;
      }
    } catch (...) {
    }
    if (first) {
      try {
        Log("fell back to default clocks: " + why);
      } catch (...) {
      }
    }
  }

  // Whether the clock control accepts changes to the GPU (asked once per
  // lever, through the controller's thread): a plan is not said to run on
  // a GPU that refuses every change (no permission); the agent falls back
  // at once, saying why.
  bool probed_clocks = false;
  bool probed_power = false;
  bool probed_clocks_skip = false;  // SetPowerLimitPlan's SetPlan
  bool ControlAccepts(bool power_limit) {
    bool& probed = power_limit ? probed_power : probed_clocks;
    if (probed || (!power_limit && probed_clocks_skip)) return true;
    const std::string why = controller->Probe(power_limit);
    if (!why.empty()) {
      std::string control = "the clock control";
      try {
        control = options.control->Describe();
      } catch (...) {
      }
      FallBack(std::string("cannot change GPU ") + std::to_string(options.nvml_index) + "'s " +
                   (power_limit ? "power limit" : "clocks") + " through " + control + ": " + why,
               /*restore=*/false);
      return false;
    }
    probed = true;
    return true;
  }

  void ClearFallback() {
    std::lock_guard<std::mutex> lock(reason_mutex);
    fell_back = false;
    reason.reset();
  }

  // The ramp's clock cap now: the stop ramp's once begun (its lowest clock
  // after it), else the start ramp's while it runs (it ends here once its
  // time is up); 0 for none. Reads the steady clock only while one runs.
  int RampCap() noexcept {
    const std::vector<int>& caps = shape.start_ramp_mhz;
    if (stopping) {
      if (caps.empty()) return 0;
      const double elapsed = SecondsSince(stop_start);
      return elapsed >= stop_s ? caps.front() : caps[caps.size() - 1 - StepAt(elapsed, stop_s)];
    }
    if (!ramping) return 0;
    const double elapsed = SecondsSince(ramp_start);
    if (elapsed >= shape.start_ramp_s || caps.empty()) {
      ramping = false;
      return 0;
    }
    return caps[StepAt(elapsed, shape.start_ramp_s)];
  }

  // Which of the ramp's equal steps `elapsed` of `length` seconds falls in.
  std::size_t StepAt(double elapsed, double length) const noexcept {
    const std::size_t n = shape.start_ramp_mhz.size();
    const auto step = static_cast<std::size_t>(elapsed / length * static_cast<double>(n));
    return step < n ? step : n - 1;
  }

  static double SecondsSince(SteadyClock::time_point start) noexcept {
    return std::chrono::duration<double>(SteadyClock::now() - start).count();
  }

  // `mhz` under the ramp's cap (kDefaultClocks, i.e. the GPU's highest,
  // becomes the cap itself).
  int Capped(int mhz) noexcept {
    const int cap = RampCap();
    if (cap <= 0 || (mhz > 0 && mhz <= cap)) return mhz;
    Bump(ramp_capped);
    return cap;
  }

  void ResetTracking() {
    position = 0;
    in_instruction = false;
    ++epoch;  // spans still on their way belong to what ran before
    CloseWindows();
  }

  // Ends whatever profile window a fallback or a mode change left open, so the
  // next Begin finds none; the readings are dropped.
  void CloseWindows() {
    waiting = false;
    if (!monitor) return;
    for (std::string_view name : {kInstructionWindow, kWaitWindow}) {
      try {
        if (monitor->IsOpen(name)) monitor->End(name, &measurement);
      } catch (const std::exception&) {
        // A failing GPU read leaves the window closed anyway (End erases it
        // first); the fallback that follows reports the failure.
      }
    }
  }

  // Closes the wait window, if one is open, and reports it.
  void EndWait() {
    if (!waiting) return;
    waiting = false;
    monitor->End(kWaitWindow, &measurement);
    source->OnWait(measurement.duration_s, measurement.gpu_energy_j);
  }

  void BeginWait() {
    if (waiting) monitor->End(kWaitWindow, &measurement);  // restart it
    monitor->Begin(kWaitWindow);
    waiting = true;
  }

  void StopWait() {
    if (waiting) monitor->End(kWaitWindow, &measurement);
    waiting = false;
  }

  void ProfileBegin(model::Kind kind) {
    if (profile_on_device) {
      DeliverSpans();
      current_mhz = source->ClockFor(kind);
      if (current_mhz > 0 && controller) Post(current_mhz);
      device_meter->Mark({Point::kInstructionBegin, kind, current_mhz, epoch});
      return;
    }
    EndWait();
    current_mhz = source->ClockFor(kind);
    if (current_mhz > 0 && controller) controller->Request(current_mhz);
    monitor->Begin(kInstructionWindow);
  }

  // Profile mode on the device: the spans measured so far, to the source in
  // device order (an instruction, the wait before one, a step's end).
  void DeliverSpans() {
    DeviceMeter::Span span;
    while (device_meter->Take(&span)) {
      if (span.to.tag != epoch || span.from.tag != epoch) continue;
      if (span.to.type == Point::kInstructionEnd) {
        if (span.from.type == Point::kInstructionBegin && span.from.kind == span.to.kind)
          source->OnInstruction(span.to.kind, span.from.mhz, span.seconds, span.joules,
                                span.approximate, span.actual_mhz);
      } else if (span.to.type == Point::kInstructionBegin) {
        if (span.from.type == Point::kInstructionEnd || span.from.type == Point::kStepBegin)
          source->OnWait(span.seconds, span.joules);
      } else if (span.to.type == Point::kStepEnd) {
        source->OnStepEnd();
      }
    }
  }

  void ProfileEnd(model::Kind kind) {
    if (profile_on_device) {
      device_meter->Mark({Point::kInstructionEnd, kind, current_mhz, epoch});
      DeliverSpans();
      return;
    }
    monitor->End(kInstructionWindow, &measurement);
    // The clock the GPU really ran (a power or thermal cap throttles it
    // below the one requested), read as the instruction ends.
    const int actual_mhz = clock_meter ? clock_meter->ReadSmClockMhz() : 0;
    source->OnInstruction(kind, current_mhz, measurement.duration_s, measurement.gpu_energy_j,
                          measurement.approximate(), actual_mhz);
    BeginWait();
  }
};

Agent::Agent(AgentOptions options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.options = std::move(options);
  if (!s.options.control) {
    s.FallBack("no clock control given (AgentOptions::control is null); running at default clocks",
               /*restore=*/false);
    return;
  }
  State* raw = state_.get();
  try {
    s.controller = std::make_unique<ClockController>(
        s.options.control, s.options.nvml_index,
        [raw](const std::string& why) { raw->FallBack(why, /*restore=*/false); },
        s.options.controller);
  } catch (const std::exception& e) {
    s.FallBack(std::string("could not start the clock controller: ") + e.what(), false);
  }
}

Agent::~Agent() {
  // The controller's destructor restores the default clocks and joins.
  state_->mode.store(Mode::kOff, std::memory_order_release);
  state_->controller.reset();
}

void Agent::SetPlan(std::vector<model::PlannedInstruction> stage_plan, model::HeadWait head_wait,
                    model::StageShape shape) {
  State& s = *state_;
  s.mode.store(Mode::kOff, std::memory_order_release);
  s.plan = std::move(stage_plan);
  s.head_wait = head_wait;
  s.shape = std::move(shape);
  if (s.shape.start_ramp_s <= 0 || s.shape.start_ramp_mhz.empty()) s.ramping = false;
  if (s.shape.stop_ramp_s <= 0 || s.shape.start_ramp_mhz.empty()) s.stopping = false;
  s.power_limit_plan = false;
  s.source.reset();
  s.ResetTracking();
  if (!s.controller) return;  // fell back at construction; reason kept
  s.ClearFallback();
  s.controller->Clear();
  if (s.plan.empty()) {
    s.FallBack("the stage plan is empty", /*restore=*/true);
    return;
  }
  if (!s.ControlAccepts(/*power_limit=*/false)) return;
  s.Log("executing a plan of " + std::to_string(s.plan.size()) + " instructions per step on GPU " +
        std::to_string(s.options.nvml_index));
  s.mode.store(Mode::kExecute, std::memory_order_release);
}

void Agent::SetPowerLimitPlan(std::vector<model::PlannedInstruction> stage_plan, double watts) {
  State& s = *state_;
  s.probed_clocks_skip = true;  // this plan sets no clock
  SetPlan(std::move(stage_plan));
  s.probed_clocks_skip = false;
  if (s.mode.load(std::memory_order_acquire) != Mode::kExecute) return;
  if (!s.ControlAccepts(/*power_limit=*/true)) return;
  s.power_limit_plan = true;
  // The limit, or back to defaults if a clock was locked before.
  s.controller->RequestPowerLimit(watts);
  s.Log(watts > 0 ? "power limit " + std::to_string(watts).substr(0, 8) + " W on GPU " +
                        std::to_string(s.options.nvml_index) + " (default clocks)"
                  : "default power limit on GPU " + std::to_string(s.options.nvml_index));
}

void Agent::SetProfiler(std::shared_ptr<ClockSource> source) {
  State& s = *state_;
  if (!source) {
    Disable();
    return;
  }
  s.mode.store(Mode::kOff, std::memory_order_release);
  s.plan.clear();
  s.power_limit_plan = false;
  s.source = std::move(source);
  s.ResetTracking();
  if (!s.controller) return;
  s.ClearFallback();
  s.controller->Clear();
  if (!s.clock_meter) {
    try {
      s.clock_meter = s.options.meter ? s.options.meter
                                      : std::shared_ptr<monitor::GpuMeter>(
                                            monitor::NvmlGpuMeterByNvmlIndex(s.options.nvml_index));
    } catch (const std::exception& e) {
      s.FallBack(std::string("cannot measure GPU energy for profiling: ") + e.what(), true);
      return;
    }
  }
  if (s.markers && !s.device_meter) {
    DeviceMeterOptions options;
    options.counter_period_s = s.options.counter_period_s;
    std::string why;
    s.device_meter = DeviceMeter::Open(s.stream, s.clock_meter, options, &why);
    if (!s.device_meter) s.Log("profiling measures at the host's points: " + why);
  }
  s.profile_on_device = s.device_meter != nullptr;
  if (!s.monitor) {
    try {
      std::vector<std::unique_ptr<monitor::GpuMeter>> meters;
      meters.push_back(std::make_unique<SharedMeter>(s.clock_meter));
      monitor::MonitorOptions options;
      options.cpu = monitor::CpuMode::kOff;
      options.counter_period_s = s.options.counter_period_s;
      if (!s.profile_on_device) {
        // At the host's points an instruction's window is milliseconds: the
        // power sampled while it ran, never one reading at its end (where
        // the host waited for the GPU, that reads the idle GPU).
        options.short_windows_sampled = true;
        options.sampling_period_s = kHostProfileSamplingS;
      }
      s.monitor = std::make_unique<monitor::Monitor>(std::move(meters), options);
    } catch (const std::exception& e) {
      s.FallBack(std::string("cannot measure GPU energy for profiling: ") + e.what(), true);
      return;
    }
  }
  s.Log("profiling on GPU " + std::to_string(s.options.nvml_index) +
        (s.profile_on_device ? " where the GPU is (each instruction's time and energy between "
                               "its events on the training's stream)"
                             : ""));
  s.mode.store(Mode::kProfile, std::memory_order_release);
}

void Agent::Disable() {
  State& s = *state_;
  s.mode.store(Mode::kOff, std::memory_order_release);
  s.ResetTracking();
  if (s.controller) s.controller->Request(ClockController::kDefaultClocks);
}

void Agent::OnStepBegin() noexcept {
  State& s = *state_;
  const Mode mode = s.mode.load(std::memory_order_acquire);
  if (mode == Mode::kOff) return;
  Bump(s.step_begins);
  try {
    if (s.position != 0 || s.in_instruction) {
      s.FallBack("step began after " + std::to_string(s.position) + " of " +
                     std::to_string(s.plan.size()) + " planned instructions without a step end",
                 true);
      return;
    }
    if (mode == Mode::kProfile) {
      if (s.profile_on_device) {
        s.DeliverSpans();
        s.device_meter->Mark({Point::kStepBegin, model::Kind::kForward, 0, s.epoch});
      } else {
        s.BeginWait();
      }
    }
    if (mode == Mode::kExecute && !s.ramp_started && s.shape.start_ramp_s > 0 &&
        !s.shape.start_ramp_mhz.empty()) {
      s.ramp_started = true;
      s.ramping = true;
      s.ramp_start = SteadyClock::now();
    }
    if (mode == Mode::kExecute && (s.ramping || s.stopping) && s.controller &&
        !s.power_limit_plan) {
      // The wait before the first instruction, at the ramp's clock (none
      // once the ramp is over: the step end's default clocks stand).
      const int cap = s.RampCap();
      if (cap > 0) {
        s.Post(cap);
        Bump(s.ramp_capped);
      }
    }
    if (mode == Mode::kExecute && s.head_wait.mhz > 0 && s.controller && !s.power_limit_plan) {
      // The plan lowers the wait before the first instruction (the fill):
      // its clock back in time for it.
      s.PostWait(s.head_wait.mhz, s.plan.front().mhz, s.head_wait.restore_s);
      Bump(s.lowered_waits);
    }
  } catch (const std::exception& e) {
    s.FallBack(std::string("step begin failed: ") + e.what(), true);
  } catch (...) {
    s.FallBack("step begin failed: unknown exception", true);
  }
}

void Agent::OnStepEnd() noexcept {
  State& s = *state_;
  const Mode mode = s.mode.load(std::memory_order_acquire);
  if (mode == Mode::kOff) return;
  Bump(s.step_ends);
  try {
    if (s.in_instruction) {
      s.FallBack("step ended inside " +
                     Name(s.current_kind, s.current_microbatch, s.current_chunk) +
                     " (no instruction end)",
                 true);
      return;
    }
    if (mode == Mode::kExecute) {
      if (s.position != s.plan.size()) {
        const model::Instruction& next = s.plan[s.position].instruction;
        s.FallBack("step ended after " + std::to_string(s.position) + " of " +
                       std::to_string(s.plan.size()) + " planned instructions (plan expected " +
                       Name(next.kind, next.microbatch, next.chunk) + " at position " +
                       std::to_string(s.position) + ")",
                   true);
        return;
      }
      s.position = 0;
    } else if (s.profile_on_device) {
      // The source hears of the step's end with its spans, when the device
      // gets there (a point that cannot be recorded: now).
      if (!s.device_meter->Mark({Point::kStepEnd, model::Kind::kForward, 0, s.epoch}))
        s.source->OnStepEnd();
      s.DeliverSpans();
    } else {
      s.StopWait();
      s.source->OnStepEnd();
    }
    // Between steps (the optimizer, evaluation passes, checkpoints, the data
    // loader) the GPU runs at its default clocks: only the plan's
    // instructions are slowed. A last instruction whose wait the plan lowers
    // has already asked for the default clocks after that wait
    // (OnInstructionEnd's RequestWait), so it is left to run.
    // While a ramp (start or stop) runs, the step ends at its clock instead.
    const bool tail_wait = mode == Mode::kExecute && s.plan.back().wait_mhz > 0;
    if (s.controller && !s.power_limit_plan && !tail_wait) {
      s.Post(mode == Mode::kExecute ? s.Capped(ClockController::kDefaultClocks)
                                    : ClockController::kDefaultClocks);
    }
  } catch (const std::exception& e) {
    s.FallBack(std::string("step end failed: ") + e.what(), true);
  } catch (...) {
    s.FallBack("step end failed: unknown exception", true);
  }
}

void Agent::OnInstructionBegin(model::Kind kind, int microbatch, int chunk) noexcept {
  State& s = *state_;
  const Mode mode = s.mode.load(std::memory_order_acquire);
  if (mode == Mode::kOff) return;
  Bump(s.instruction_begins);
  try {
    if (s.in_instruction) {
      s.FallBack("training began " + Name(kind, microbatch, chunk) + " before " +
                     Name(s.current_kind, s.current_microbatch, s.current_chunk) + " ended",
                 true);
      return;
    }
    if (mode == Mode::kExecute) {
      if (s.position >= s.plan.size()) {
        s.FallBack("plan has " + std::to_string(s.plan.size()) +
                       " instructions per step, training ran a further " +
                       Name(kind, microbatch, chunk) + " (missing step end?)",
                   true);
        return;
      }
      const model::PlannedInstruction& expected = s.plan[s.position];
      const model::Instruction& e = expected.instruction;
      if (e.kind != kind || e.microbatch != microbatch || e.chunk != chunk) {
        s.FallBack("plan expected " + Name(e.kind, e.microbatch, e.chunk) + " at position " +
                       std::to_string(s.position) + ", training ran " +
                       Name(kind, microbatch, chunk),
                   true);
        return;
      }
      if (!s.power_limit_plan) s.Post(s.Capped(expected.mhz));
    } else {
      s.ProfileBegin(kind);
    }
    s.in_instruction = true;
    s.current_kind = kind;
    s.current_microbatch = microbatch;
    s.current_chunk = chunk;
  } catch (const std::exception& e) {
    s.FallBack(std::string("instruction begin failed: ") + e.what(), true);
  } catch (...) {
    s.FallBack("instruction begin failed: unknown exception", true);
  }
}

void Agent::OnInstructionEnd(model::Kind kind, int microbatch, int chunk) noexcept {
  State& s = *state_;
  const Mode mode = s.mode.load(std::memory_order_acquire);
  if (mode == Mode::kOff) return;
  Bump(s.instruction_ends);
  try {
    if (!s.in_instruction || s.current_kind != kind || s.current_microbatch != microbatch ||
        s.current_chunk != chunk) {
      s.FallBack("training ended " + Name(kind, microbatch, chunk) + " but " +
                     (s.in_instruction ? "had begun " + Name(s.current_kind, s.current_microbatch,
                                                             s.current_chunk)
                                       : std::string("no instruction had begun")),
                 true);
      return;
    }
    s.in_instruction = false;
    const model::PlannedInstruction* done = nullptr;
    if (mode == Mode::kExecute) {
      done = &s.plan[s.position];
      ++s.position;
    } else {
      s.ProfileEnd(kind);
    }
    if (s.controller && !s.power_limit_plan) {
      if (done != nullptr && s.shape.hold_mhz > 0) {
        // A grid plan holds the wait up at its clock until the next
        // instruction (or the step's end) asks for another.
        s.Post(s.Capped(s.shape.hold_mhz));
        Bump(s.held_waits);
      } else if (done != nullptr && done->wait_mhz > 0) {
        // The plan lowers this wait: back to the next instruction's clock
        // (the default clocks after the step's last) in time for it.
        const int next =
            s.position < s.plan.size() ? s.plan[s.position].mhz : ClockController::kDefaultClocks;
        s.PostWait(done->wait_mhz, next, done->wait_restore_s);
        Bump(s.lowered_waits);
      } else if (s.options.idle_clock_mhz) {
        s.Post(*s.options.idle_clock_mhz);
      }
    }
  } catch (const std::exception& e) {
    s.FallBack(std::string("instruction end failed: ") + e.what(), true);
  } catch (...) {
    s.FallBack("instruction end failed: unknown exception", true);
  }
}

bool Agent::BeginStopRamp(double seconds) noexcept {
  State& s = *state_;
  if (s.mode.load(std::memory_order_acquire) != Mode::kExecute || s.power_limit_plan ||
      s.stopping || s.shape.stop_ramp_s <= 0 || s.shape.start_ramp_mhz.empty() || !(seconds > 0) ||
      !s.controller) {
    return false;
  }
  s.ramping = false;  // the stop ramp takes over from a start ramp still running
  s.stopping = true;
  s.stop_s = std::min(seconds, s.shape.stop_ramp_s);
  s.stop_start = SteadyClock::now();
  Bump(s.ramp_capped);
  s.Post(s.RampCap());
  return true;
}

std::string_view Agent::planned_knobs() const noexcept {
  const State& s = *state_;
  if (s.mode.load(std::memory_order_acquire) != Mode::kExecute) return {};
  if (s.position >= s.plan.size()) return {};
  return s.plan[s.position].knobs;
}

Mode Agent::mode() const {
  return state_->mode.load(std::memory_order_acquire);
}

std::optional<std::string> Agent::fallback_reason() const {
  std::lock_guard<std::mutex> lock(state_->reason_mutex);
  return state_->reason;
}

Stats Agent::stats() const {
  const State& s = *state_;
  Stats out;
  if (s.controller) {
    const ControllerStats c = s.controller->stats();
    out.requested = c.requested;
    out.applied = c.applied;
    out.restores = c.restores;
    out.skipped = c.skipped;
    out.coalesced = c.coalesced;
    out.failed = c.failed;
    out.last_applied_mhz = c.last_applied_mhz;
    out.last_power_limit_w = c.last_power_limit_w;
    out.timed_restores = c.timed_restores;
  }
  out.lowered_waits = s.lowered_waits.load(std::memory_order_relaxed);
  out.held_waits = s.held_waits.load(std::memory_order_relaxed);
  out.ramp_capped = s.ramp_capped.load(std::memory_order_relaxed);
  out.step_begins = s.step_begins.load(std::memory_order_relaxed);
  out.step_ends = s.step_ends.load(std::memory_order_relaxed);
  out.instruction_begins = s.instruction_begins.load(std::memory_order_relaxed);
  out.instruction_ends = s.instruction_ends.load(std::memory_order_relaxed);
  out.markers = s.markers_recorded.load(std::memory_order_relaxed);
  out.markers_skipped = s.markers ? s.markers->skipped() : 0;
  return out;
}

bool Agent::SetStream(gpu::CudaStream stream, std::string* why_not) {
  State& s = *state_;
  std::string why;
  if (s.markers) {
    why = "the agent follows a stream already";
  } else if (!s.controller) {
    why = "the agent has no clock controller";
  } else if (s.mode.load(std::memory_order_acquire) != Mode::kOff) {
    why = "the agent runs a plan or profile already: give the stream before";
  } else {
    s.markers = DeviceMarkers::Open(stream, &why);
    if (s.markers) {
      s.stream = stream;
      s.controller->SetMarkers(s.markers.get());
      s.Log(
          "clocks follow the GPU: each is applied when the device reaches its instruction on "
          "the training's stream (CUDA events through " +
          s.markers->library() + ")");
      return true;
    }
  }
  if (why_not != nullptr) *why_not = why;
  return false;
}

bool Agent::stream_ordered() const {
  return state_->markers != nullptr;
}

bool Agent::WaitIdle(double timeout_s) const {
  return !state_->controller || state_->controller->WaitIdle(timeout_s);
}

}  // namespace joulepipe::runtime
