// CoordinatedPlan (coordinated_plan.hpp has the contract; the state and the
// sources of plans: coordinated_plan_state.hpp).
#include "joulepipe/runtime/coordinated_plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <thread>
#include <utility>

#include "coordinated_plan_state.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::runtime {

namespace {

// Throws InputError for the options every source needs (MakePlanFeed checks
// its source's own).
void CheckOptions(const CoordinatedPlanOptions& o) {
  model::Require(o.rank >= 0, "CoordinatedPlanOptions::rank",
                 "CoordinatedPlanOptions::rank must be >= 0 (got " + std::to_string(o.rank) + ")");
  model::Require(o.queue_capacity >= 1, "CoordinatedPlanOptions::queue_capacity",
                 "CoordinatedPlanOptions::queue_capacity must be at least 1 (got 0)");
}

}  // namespace

void CoordinatedPlan::State::Log(const std::string& line) noexcept {
  try {
    std::lock_guard<std::mutex> lock(log_mutex);
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "joulepipe runtime: %s\n", line.c_str());
    }
  } catch (...) {
  }
}

SteadyClock::duration CoordinatedPlan::State::ToDuration(double seconds) {
  return std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(std::max(0.0, seconds)));
}

std::string CoordinatedPlan::State::Keeps() const {
  const int version = running_version.load(std::memory_order_relaxed);
  return version > 0 ? "this rank keeps plan version " + std::to_string(version)
                     : std::string("this rank keeps default clocks");
}

std::string CoordinatedPlan::State::LocalAppliedLine(
    const std::string& name, const protocol::RankPlan& plan,
    const std::vector<model::PlannedInstruction>& in, bool reordered,
    const std::string& suffix) const {
  const std::string through = options.through.empty() ? "" : " through " + options.through;
  if (running_extras.power_limit_w) {
    const double w = *running_extras.power_limit_w;
    return "power-limit " + name + " applied to stage " + std::to_string(plan.stage) + through +
           ": " + (w > 0 ? model::Format("%g W", w) : std::string("the default limit")) +
           ", default clocks";
  }
  const model::HeadWait& head_wait = running_extras.head_wait;
  const std::string head =
      head_wait.mhz > 0 ? "head-wait@" + std::to_string(head_wait.mhz) + " " : "";
  return name + " applied to stage " + std::to_string(plan.stage) + through + ": " + head +
         ClocksText(in) + " MHz" + ShapeText(running_extras.shape) +
         (reordered ? " (joulepipe reordered it to the order the loop ran)" : "") + suffix;
}

void CoordinatedPlan::State::Apply(protocol::RankPlan plan, const char* how, PlanExtras extras) {
  std::vector<model::PlannedInstruction> instructions = plan.instructions;
  bool reordered = false;
  if (loop_known && !SameOrder(instructions, loop)) {
    std::string why;
    if (!InLoopOrder(plan.instructions, loop, instructions, why)) {
      Refuse(plan, why);
      return;
    }
    reordered = true;
  }
  running_extras = extras;
  // Said applied only once the agent runs it (a GPU that refuses every
  // change makes the agent fall back at once, and it says why).
  const std::string applied = feed->AppliedLine(plan, instructions, reordered, how);
  running_version.store(plan.version, std::memory_order_relaxed);
  running_predicted_time_s.store(plan.predicted ? plan.predicted->time_s : 0,
                                 std::memory_order_relaxed);
  running_predicted_energy_j.store(plan.predicted ? plan.predicted->energy_j : 0,
                                   std::memory_order_relaxed);
  Bump(plans_applied);
  running = std::move(plan);
  if (extras.power_limit_w) {
    agent.SetPowerLimitPlan(std::move(instructions), *extras.power_limit_w);
  } else {
    agent.SetPlan(std::move(instructions), extras.head_wait, std::move(extras.shape));
  }
  if (agent.mode() != Mode::kExecute) return;
  Log(applied);
  for (const std::string& line :
       grid_timing.SetPlan(extras.pipeline_offset_s, running_extras.shape.stop_ramp_s)) {
    Log(line);
  }
}

void CoordinatedPlan::State::Refuse(const protocol::RankPlan& plan, const std::string& why) {
  Refuse(why,
         feed->Name(plan) + " for stage " + std::to_string(plan.stage) + " not applied: " + why);
}

void CoordinatedPlan::State::Refuse(const std::string& why, const std::string& line) {
  Log((line.empty() ? why : line) + "; this rank runs at default clocks, training goes on");
  {
    std::lock_guard<std::mutex> lock(refusal_mutex);
    refusal = why;
  }
  Bump(plans_refused);
  running_version.store(0, std::memory_order_relaxed);
  running_predicted_time_s.store(0, std::memory_order_relaxed);
  running_predicted_energy_j.store(0, std::memory_order_relaxed);
  running.reset();
  grid_timing.Clear();
  agent.Disable();
}

void CoordinatedPlan::State::Deliver(protocol::RankPlan plan) {
  {
    std::lock_guard<std::mutex> lock(slot_mutex);
    pending = std::move(plan);
  }
  has_pending.store(true, std::memory_order_release);
}

bool CoordinatedPlan::State::DeliverNewer(protocol::RankPlan plan) {
  {
    std::lock_guard<std::mutex> lock(slot_mutex);
    if (plan.version <= offered_version) return false;
    offered_version = plan.version;
    announced_version.store(plan.version, std::memory_order_relaxed);
    pending = std::move(plan);
  }
  has_pending.store(true, std::memory_order_release);
  return true;
}

bool CoordinatedPlan::State::ApplyPending() noexcept {
  if (!has_pending.load(std::memory_order_acquire)) return false;
  try {
    std::optional<protocol::RankPlan> plan;
    {
      std::lock_guard<std::mutex> lock(slot_mutex);
      plan.swap(pending);
      has_pending.store(false, std::memory_order_relaxed);
    }
    if (!plan) return false;
    Apply(std::move(*plan), "switching to");
    return true;
  } catch (const std::exception& e) {
    Log(std::string("could not switch plans: ") + e.what());
    return false;
  }
}

void CoordinatedPlan::State::EndRecording() noexcept {
  if (!recording) return;
  recording = false;
  loop_known = !loop.empty();
  if (!loop_known || !running || SameOrder(running->instructions, loop)) return;
  try {
    protocol::RankPlan plan = std::move(*running);
    running.reset();
    Apply(std::move(plan), "running", running_extras);
  } catch (const std::exception& e) {
    Log(std::string("could not reorder the plan: ") + e.what());
  }
}

std::optional<std::uint64_t> CoordinatedPlan::State::ReadEnergyMj() noexcept {
  if (!options.meter) return std::nullopt;
  try {
    return options.meter->ReadEnergyMj();
  } catch (...) {
    return std::nullopt;
  }
}

CoordinatedPlan::CoordinatedPlan(Agent& agent, CoordinatedPlanOptions options)
    : state_(std::make_unique<State>(agent, std::move(options))) {
  State& s = *state_;
  s.next_iteration = s.options.first_iteration;
  try {
    CheckOptions(s.options);
    s.feed = MakePlanFeed(s);
  } catch (const std::exception& e) {
    s.feed.reset();
    s.off_reason = e.what();
  }
}

CoordinatedPlan::~CoordinatedPlan() {
  if (state_->feed) state_->feed->Stop();
}

bool CoordinatedPlan::Start() noexcept {
  State& s = *state_;
  if (s.started) return s.start_result;
  s.started = true;
  if (!s.feed) {
    s.Log("coordination off: " + s.off_reason +
          "; this rank keeps default clocks, training goes on");
    return false;
  }
  s.start_result = s.feed->Start();
  return s.start_result;
}

bool CoordinatedPlan::Offer(const std::string& rank_plan_json) noexcept {
  State& s = *state_;
  return s.feed && s.feed->Offer(rank_plan_json);
}

const std::vector<LoopStep>& CoordinatedPlan::loop_order() const noexcept {
  static const std::vector<LoopStep> kNone;
  return state_->loop_known ? state_->loop : kNone;
}

bool CoordinatedPlan::ApplyPendingPlan() noexcept {
  return state_->ApplyPending();
}

void CoordinatedPlan::OnStepBegin(std::optional<std::int64_t> iteration) noexcept {
  State& s = *state_;
  ApplyPendingPlan();
  s.step_start = SteadyClock::now();
  s.step_start_mj = s.ReadEnergyMj();
  s.step_open = true;
  if (!s.loop_known && !s.recording) {
    s.recording = true;
    s.loop.clear();
  }
  s.agent.OnStepBegin();
  const std::int64_t number = iteration.value_or(s.options.first_iteration + s.steps_begun);
  ++s.steps_begun;
  // A plan refused or fallen back from (default clocks) times nothing.
  if (!s.running || s.agent.mode() != Mode::kExecute) return;
  const GridTiming::AtStepBegin now = s.grid_timing.OnStepBegin(number, s.step_start);
  if (now.stop_ramp_s > 0 && s.agent.BeginStopRamp(now.stop_ramp_s)) {
    s.Log(model::Format(
        "ramping the job's stop: clocks step down over the last %lld iteration(s), about %.3g s",
        static_cast<long long>(now.iterations_left), now.stop_ramp_s));
  }
  // The offset between pipelines: this pipeline's work starts later, the
  // GPU waiting meanwhile (part of the iteration, as simulated).
  if (now.wait_s > 0) std::this_thread::sleep_for(State::ToDuration(now.wait_s));
}

void CoordinatedPlan::OnInstructionBegin(model::Kind kind, int microbatch, int chunk) noexcept {
  State& s = *state_;
  if (s.recording) {
    try {
      s.loop.push_back({kind, microbatch, chunk});  // the first step only
    } catch (...) {
      s.recording = false;  // out of memory: the order stays unknown
    }
  }
  s.agent.OnInstructionBegin(kind, microbatch, chunk);
}

void CoordinatedPlan::OnInstructionEnd(model::Kind kind, int microbatch, int chunk) noexcept {
  state_->agent.OnInstructionEnd(kind, microbatch, chunk);
}

void CoordinatedPlan::OnStepEnd() noexcept {
  State& s = *state_;
  s.agent.OnStepEnd();
  s.EndRecording();
  if (s.step_open) {
    const double time_s = std::chrono::duration<double>(SteadyClock::now() - s.step_start).count();
    std::optional<double> energy_j;
    if (s.step_start_mj) {
      const std::optional<std::uint64_t> end_mj = s.ReadEnergyMj();
      if (end_mj && *end_mj >= *s.step_start_mj) {
        energy_j = static_cast<double>(*end_mj - *s.step_start_mj) / 1000.0;
      }
    }
    Report(time_s, energy_j);
    return;
  }
  ++s.next_iteration;  // no begin: nothing measured, the numbering goes on
  ApplyPendingPlan();
}

void CoordinatedPlan::OnStepEnd(double time_s, std::optional<double> energy_j) noexcept {
  state_->agent.OnStepEnd();
  state_->EndRecording();
  Report(time_s, energy_j);
}

void CoordinatedPlan::Report(double time_s, std::optional<double> energy_j) noexcept {
  State& s = *state_;
  s.step_open = false;
  const std::int64_t iteration = s.next_iteration++;
  if (s.feed) s.feed->Report(iteration, time_s, energy_j);
  ApplyPendingPlan();
}

CoordinationStats CoordinatedPlan::stats() const {
  const State& s = *state_;
  CoordinationStats out;
  out.running_version = s.running_version.load(std::memory_order_relaxed);
  out.running_predicted_time_s = s.running_predicted_time_s.load(std::memory_order_relaxed);
  out.running_predicted_energy_j = s.running_predicted_energy_j.load(std::memory_order_relaxed);
  out.announced_version = s.announced_version.load(std::memory_order_relaxed);
  out.connected = s.connected.load(std::memory_order_relaxed);
  out.reports_queued = s.reports_queued.load(std::memory_order_relaxed);
  out.reports_sent = s.reports_sent.load(std::memory_order_relaxed);
  out.reports_failed = s.reports_failed.load(std::memory_order_relaxed);
  out.reports_dropped = s.reports_dropped.load(std::memory_order_relaxed);
  out.plans_fetched = s.plans_fetched.load(std::memory_order_relaxed);
  out.plans_applied = s.plans_applied.load(std::memory_order_relaxed);
  out.fetch_failures = s.fetch_failures.load(std::memory_order_relaxed);
  out.plans_refused = s.plans_refused.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(s.refusal_mutex);
    out.refusal = s.refusal;
  }
  return out;
}

}  // namespace joulepipe::runtime
