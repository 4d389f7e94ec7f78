// CoordinatedPlan (coordinated_plan.hpp has the contract).
//
// Two threads, two hand-overs:
//   * reports, training thread -> background thread: a fixed ring of
//     queue_capacity entries under `mutex` (allocated once; pushing never
//     allocates and holds the lock for a copy), drop-oldest when full;
//   * plans, background thread -> training thread: one slot under
//     `slot_mutex`, latest wins, announced by the atomic `has_pending` so
//     the training thread's check at every boundary is one load.
// The background thread is the only user of `worker_client`; Start() (the
// training thread) uses `start_client`, before that thread exists. Each
// client's waits are cut short by its own cancel predicate: the stop flag
// for the background thread, Start()'s deadline for Start().
#include "joulepipe/runtime/coordinated_plan.hpp"
#include "joulepipe/runtime/grid_timing.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/protocol/json.hpp"

namespace joulepipe::runtime {

namespace {

using SteadyClock = std::chrono::steady_clock;

std::string Seconds(double s) {
  return model::Format("%g s", s);
}

inline void Bump(std::atomic<std::uint64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

// The client's kCancelled: this object is going away.
bool IsCancellation(const std::exception& e) {
  const auto* error = dynamic_cast<const CoordinatorError*>(&e);
  return error != nullptr && error->kind() == CoordinatorError::Kind::kCancelled;
}

// Throws InputError for options CoordinatorClient does not check itself.
void CheckOptions(const CoordinatedPlanOptions& o) {
  model::Require(o.rank >= 0, "CoordinatedPlanOptions::rank",
                 "CoordinatedPlanOptions::rank must be >= 0 (got " + std::to_string(o.rank) + ")");
  model::Require(o.queue_capacity >= 1, "CoordinatedPlanOptions::queue_capacity",
                 "CoordinatedPlanOptions::queue_capacity must be at least 1 (got 0)");
  if (o.source == PlanSource::kPlan) {
    model::Require(o.plan != nullptr, "CoordinatedPlanOptions::plan",
                   "CoordinatedPlanOptions::plan must be set for PlanSource::kPlan");
  }
  if (o.source != PlanSource::kCoordinator) return;
  model::Require(!o.job_id.empty(), "CoordinatedPlanOptions::job_id",
                 "CoordinatedPlanOptions::job_id must name the job (the id RegisterJob returned)");
  auto wait_ok = [](double s) { return std::isfinite(s) && s >= 0 && s <= kMaxPlanWaitS; };
  model::Require(wait_ok(o.start_wait_s), "CoordinatedPlanOptions::start_wait_s",
                 model::Format("CoordinatedPlanOptions::start_wait_s must be between 0 and %g "
                               "seconds, the coordinator's longest long poll (got %g s)",
                               kMaxPlanWaitS, o.start_wait_s));
  model::Require(std::isfinite(o.start_timeout_s) && o.start_timeout_s > 0,
                 "CoordinatedPlanOptions::start_timeout_s",
                 model::Format("CoordinatedPlanOptions::start_timeout_s must be a positive number "
                               "of seconds (got %g s)",
                               o.start_timeout_s));
  model::Require(wait_ok(o.fetch_wait_s), "CoordinatedPlanOptions::fetch_wait_s",
                 model::Format("CoordinatedPlanOptions::fetch_wait_s must be between 0 and %g "
                               "seconds (got %g s)",
                               kMaxPlanWaitS, o.fetch_wait_s));
}

}  // namespace

struct CoordinatedPlan::State {
  State(Agent& a, CoordinatedPlanOptions o) : agent(a), options(std::move(o)) {}

  Agent& agent;
  CoordinatedPlanOptions options;
  bool in_process() const { return options.source == PlanSource::kInProcess; }

  bool off = false;                                // a bad option: coordination off
  std::optional<CoordinatorClient> start_client;   // kCoordinator only
  std::optional<CoordinatorClient> worker_client;  // the background thread's
  std::string off_reason;                          // why coordination is off

  std::mutex log_mutex;

  // Start() (training thread).
  bool started = false;
  bool start_result = false;
  SteadyClock::time_point start_deadline;

  // The report ring and the stop flag, under `mutex`; `wake` wakes the
  // background thread for a report or the stop, and ends its sleeps. `stop`
  // is atomic too, for the cancel predicates that read it without the lock.
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<bool> stop{false};
  std::vector<IterationReport> ring;
  std::size_t head = 0;
  std::size_t count = 0;
  std::thread worker;

  // The plan slot. `offered_version`: the newest version Offer() took.
  std::mutex slot_mutex;
  std::optional<RankPlan> pending;
  std::atomic<bool> has_pending{false};
  int offered_version = 0;

  // Training thread: the loop's order (recorded during the first step) and
  // the plan the agent runs, as given (not reordered).
  std::vector<LoopStep> loop;
  bool recording = false;
  bool loop_known = false;
  std::optional<RankPlan> running;
  model::HeadWait running_head_wait;  // kPlan: its stage's
  model::StageShape running_shape;    // kPlan: a grid plan's, its stage's
  GridTiming grid_timing{options.pipeline, options.last_iteration};
  std::int64_t steps_begun = 0;
  std::optional<double> running_power_limit_w;  // kPlan: a power-limit plan's (W)

  // Training thread: the iteration being measured.
  bool step_open = false;
  SteadyClock::time_point step_start;
  std::optional<std::uint64_t> step_start_mj;
  std::int64_t next_iteration = 0;

  // Background thread (and Start() before it exists).
  int fetched_version = 0;
  bool registered = false;

  std::atomic<int> running_version{0};
  std::atomic<double> running_predicted_time_s{0};
  std::atomic<double> running_predicted_energy_j{0};
  std::atomic<int> announced_version{0};
  std::atomic<bool> connected{false};
  std::atomic<std::uint64_t> reports_queued{0};
  std::atomic<std::uint64_t> reports_sent{0};
  std::atomic<std::uint64_t> reports_failed{0};
  std::atomic<std::uint64_t> reports_dropped{0};
  std::atomic<std::uint64_t> plans_fetched{0};
  std::atomic<std::uint64_t> plans_applied{0};
  std::atomic<std::uint64_t> fetch_failures{0};
  std::atomic<std::uint64_t> plans_refused{0};
  mutable std::mutex refusal_mutex;
  std::string refusal;

  const std::string& url() const { return options.coordinator.url; }

  void Log(const std::string& line) noexcept {
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

  // The two clients, each with its own way of being interrupted.
  void MakeClients() {
    const CoordinatorOptions& base = options.coordinator;
    const std::function<bool()> user_cancelled = base.cancelled;

    CoordinatorOptions start = base;
    start.cancelled = [this, user_cancelled] {
      return SteadyClock::now() >= start_deadline || (user_cancelled && user_cancelled());
    };
    if (!start.sleep) {
      start.sleep = [this](double seconds) {
        const auto until = std::min(start_deadline, SteadyClock::now() + ToDuration(seconds));
        std::this_thread::sleep_until(until);
      };
    }
    start_client.emplace(std::move(start));

    CoordinatorOptions worker_options = base;
    worker_options.cancelled = [this, user_cancelled] {
      return stop.load(std::memory_order_acquire) || (user_cancelled && user_cancelled());
    };
    if (!worker_options.sleep) {
      worker_options.sleep = [this](double seconds) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait_for(lock, ToDuration(seconds), [this] { return stop.load(); });
      };
    }
    worker_client.emplace(std::move(worker_options));
  }

  static SteadyClock::duration ToDuration(double seconds) {
    return std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(std::max(0.0, seconds)));
  }

  std::string Keeps() const {
    const int version = running_version.load(std::memory_order_relaxed);
    return version > 0 ? "this rank keeps plan version " + std::to_string(version)
                       : std::string("this rank keeps default clocks");
  }

  // The line that says `plan` was applied, in the source's terms.
  std::string AppliedLine(const RankPlan& plan, const std::vector<model::PlannedInstruction>& in,
                          bool reordered, const char* how) const {
    if (options.source == PlanSource::kCoordinator) {
      return std::string(how) + " plan version " + std::to_string(plan.version) + " for rank " +
             std::to_string(plan.rank) + " (pipeline " + std::to_string(plan.pipeline) +
             ", stage " + std::to_string(plan.stage) + ") from the coordinator at " + url() +
             (plan.reason.empty() ? "" : ": " + plan.reason) +
             (reordered ? " (reordered to the order the loop ran)" : "");
    }
    const std::string name = options.source == PlanSource::kPlan
                                 ? "plan " + options.plan_name
                                 : "plan v" + std::to_string(plan.version);
    const std::string through = options.through.empty() ? "" : " through " + options.through;
    if (running_power_limit_w) {
      const double w = *running_power_limit_w;
      return "power-limit " + name + " applied to stage " + std::to_string(plan.stage) + through +
             ": " + (w > 0 ? model::Format("%g W", w) : std::string("the default limit")) +
             ", default clocks";
    }
    const std::string head =
        running_head_wait.mhz > 0 ? "head-wait@" + std::to_string(running_head_wait.mhz) + " " : "";
    return name + " applied to stage " + std::to_string(plan.stage) + through + ": " + head +
           ClocksText(in) + " MHz" + ShapeText(running_shape) +
           (reordered ? " (joulepipe reordered it to the order the loop ran)" : "") +
           (options.source == PlanSource::kInProcess ? "; " + plan.reason : "");
  }

  // Training thread, between iterations: `plan` to the agent, in the loop's
  // order when that is known; refused when it is not the loop's. A plan
  // source's head wait and power limit (kPlan) go with it.
  void Apply(RankPlan plan, const char* how, model::HeadWait head_wait = {},
             std::optional<double> power_limit_w = std::nullopt, model::StageShape shape = {},
             double pipeline_offset_s = 0) {
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
    running_head_wait = head_wait;
    running_shape = shape;
    running_power_limit_w = power_limit_w;
    // Said applied only once the agent runs it (a GPU that refuses every
    // change makes the agent fall back at once, and it says why).
    const std::string applied = AppliedLine(plan, instructions, reordered, how);
    const double stop_ramp_s = shape.stop_ramp_s;
    running_version.store(plan.version, std::memory_order_relaxed);
    running_predicted_time_s.store(plan.predicted ? plan.predicted->time_s : 0,
                                   std::memory_order_relaxed);
    running_predicted_energy_j.store(plan.predicted ? plan.predicted->energy_j : 0,
                                     std::memory_order_relaxed);
    Bump(plans_applied);
    running = std::move(plan);
    if (power_limit_w) {
      agent.SetPowerLimitPlan(std::move(instructions), *power_limit_w);
    } else {
      agent.SetPlan(std::move(instructions), head_wait, std::move(shape));
    }
    if (agent.mode() != Mode::kExecute) return;
    Log(applied);
    for (const std::string& line : grid_timing.SetPlan(pipeline_offset_s, stop_ramp_s)) {
      Log(line);
    }
  }

  // Start(), kPlan: stage options.stage of options.plan, or why not.
  void ApplyPlanSource() {
    const model::Plan& plan = *options.plan;
    const std::string& name = options.plan_name;
    if (options.stages > 0 && plan.num_stages != options.stages) {
      Refuse("the plan " + name + " is for " + std::to_string(plan.num_stages) +
             " pipeline stages, this job has " + std::to_string(options.stages) +
             "; plan the job's own profile");
      return;
    }
    if (options.stage < 0 || options.stage >= static_cast<int>(plan.stages.size())) {
      Refuse("the plan " + name + " has no stage " + std::to_string(options.stage) + " (it has " +
             std::to_string(plan.stages.size()) + ")");
      return;
    }
    RankPlan r;
    r.rank = options.rank;
    r.stage = options.stage;
    r.version = 1;
    r.reason = "plan file " + name;
    r.predicted = plan.predicted;
    r.instructions = plan.stages[options.stage];
    model::HeadWait head_wait;
    if (options.stage < static_cast<int>(plan.head_waits.size())) {
      head_wait = plan.head_waits[options.stage];
    }
    std::optional<double> limit;
    if (!plan.power_limits_w.empty()) limit = plan.power_limits_w.at(options.stage);
    Apply(std::move(r), "running", head_wait, limit, model::StageShapeOf(plan, options.stage),
          plan.grid ? plan.grid->pipeline_offset_s : 0);
  }

  // Training thread: a plan that is not the loop's. Default clocks.
  void Refuse(const RankPlan& plan, const std::string& why) {
    const std::string name = options.source == PlanSource::kPlan
                                 ? "the plan " + options.plan_name
                                 : "plan v" + std::to_string(plan.version);
    Refuse(why, name + " for stage " + std::to_string(plan.stage) + " not applied: " + why);
  }
  // `line` says why (default: `why` itself).
  void Refuse(const std::string& why, const std::string& line = "") {
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

  // Training thread, after the agent's OnStepEnd: the first step's order is
  // the loop's; a plan applied before then is put into it (or refused).
  void EndRecording() noexcept {
    if (!recording) return;
    recording = false;
    loop_known = !loop.empty();
    if (!loop_known || !running || SameOrder(running->instructions, loop)) return;
    try {
      RankPlan plan = std::move(*running);
      running.reset();
      Apply(std::move(plan), "running", running_head_wait, running_power_limit_w);
    } catch (const std::exception& e) {
      Log(std::string("could not reorder the plan: ") + e.what());
    }
  }

  void LogStartFailure(const CoordinatorError& e) {
    const std::string tail = "; this rank keeps default clocks, training goes on";
    const std::string attempts =
        std::to_string(e.attempts()) + " attempt" + (e.attempts() == 1 ? "" : "s");
    switch (e.kind()) {
      case CoordinatorError::Kind::kUnreachable:
        Log("coordinator unreachable at " + url() + " after " + attempts +
            " (last error: " + e.last_error() + ")" + tail);
        return;
      case CoordinatorError::Kind::kCancelled:
        // Start()'s own deadline (or the caller's cancel predicate).
        if (e.last_error().empty()) {
          Log("no answer from the coordinator at " + url() + " within " +
              Seconds(options.start_timeout_s) + tail);
        } else {
          Log("coordinator unreachable at " + url() + " after " + attempts + " in " +
              Seconds(options.start_timeout_s) + " (last error: " + e.last_error() + ")" + tail);
        }
        return;
      case CoordinatorError::Kind::kRejected:
      case CoordinatorError::Kind::kBadResponse:
        Log(e.what() + tail);
        return;
    }
  }

  // Background thread: contact regained / lost, each logged once.
  void NoteConnected() {
    if (!connected.exchange(true, std::memory_order_relaxed)) {
      Log("coordinator at " + url() + " reachable; reporting iterations");
    }
  }
  void NoteLost(const std::string& why) {
    if (connected.exchange(false, std::memory_order_relaxed)) {
      Log("lost the coordinator at " + url() + ": " + why + "; " + Keeps() + ", training goes on");
    }
  }

  void Run() {
    for (;;) {
      IterationReport report;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [this] { return stop.load() || count > 0; });
        if (stop.load()) return;
        report = ring[head];
        head = (head + 1) % ring.size();
        --count;
      }
      if (!Exchange(report)) return;
    }
  }

  // One report and, when the answer names a version not fetched yet, that
  // plan. False once cancelled (the object is going away).
  bool Exchange(const IterationReport& report) {
    CoordinatorClient& client = *worker_client;
    int version = 0;
    try {
      if (options.registration && !registered) {
        client.RegisterRank(options.job_id, *options.registration);
        registered = true;
      }
      version = client.ReportIteration(options.job_id, report);
    } catch (const std::exception& e) {
      if (IsCancellation(e)) return false;
      Bump(reports_failed);
      NoteLost(e.what());
      return true;
    }
    Bump(reports_sent);
    announced_version.store(version, std::memory_order_relaxed);
    NoteConnected();
    if (version <= 0 || version == fetched_version) return true;
    // after = version - 1 fetches `version` (or newer) whether it is above
    // or below what this rank has (a restarted coordinator counts from 1).
    try {
      std::optional<RankPlan> plan =
          client.WaitForPlan(options.job_id, options.rank, version - 1, options.fetch_wait_s);
      if (!plan) return true;  // not there after all; the next report asks again
      fetched_version = plan->version;
      Bump(plans_fetched);
      {
        std::lock_guard<std::mutex> lock(slot_mutex);
        pending = std::move(*plan);
      }
      has_pending.store(true, std::memory_order_release);
    } catch (const std::exception& e) {
      if (IsCancellation(e)) return false;
      Bump(fetch_failures);
      NoteLost(e.what());
    }
    return true;
  }

  // Training thread.
  void Push(double time_s, std::optional<double> energy_j) {
    const std::int64_t iteration = next_iteration++;
    if (!worker.joinable()) return;                     // not started, or coordination off
    if (!std::isfinite(time_s) || time_s <= 0) return;  // the server takes > 0 only
    if (energy_j && (!std::isfinite(*energy_j) || *energy_j < 0)) energy_j.reset();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (count == ring.size()) {
        head = (head + 1) % ring.size();
        --count;
        Bump(reports_dropped);
      }
      IterationReport& slot = ring[(head + count) % ring.size()];
      slot.rank = options.rank;
      slot.iteration = iteration;
      slot.time_s = time_s;
      slot.energy_j = energy_j;
      ++count;
    }
    Bump(reports_queued);
    wake.notify_one();
  }

  std::optional<std::uint64_t> ReadEnergyMj() noexcept {
    if (!options.meter) return std::nullopt;
    try {
      return options.meter->ReadEnergyMj();
    } catch (...) {
      return std::nullopt;
    }
  }
};

CoordinatedPlan::CoordinatedPlan(Agent& agent, CoordinatedPlanOptions options)
    : state_(std::make_unique<State>(agent, std::move(options))) {
  State& s = *state_;
  s.next_iteration = s.options.first_iteration;
  try {
    CheckOptions(s.options);
    if (s.options.source == PlanSource::kCoordinator) s.MakeClients();
    s.ring.resize(s.options.queue_capacity);
  } catch (const std::exception& e) {
    s.off = true;
    s.start_client.reset();
    s.worker_client.reset();
    s.off_reason = e.what();
  }
}

CoordinatedPlan::~CoordinatedPlan() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stop.store(true, std::memory_order_release);
  }
  s.wake.notify_all();
  if (s.worker.joinable()) s.worker.join();
}

bool CoordinatedPlan::Start() noexcept {
  State& s = *state_;
  if (s.started) return s.start_result;
  s.started = true;
  if (s.off) {
    s.Log("coordination off: " + s.off_reason +
          "; this rank keeps default clocks, training goes on");
    return false;
  }
  if (s.options.source == PlanSource::kPlan) {
    try {
      s.ApplyPlanSource();
    } catch (const std::exception& e) {
      s.Refuse(std::string("the plan ") + s.options.plan_name +
               " could not be applied: " + e.what());
    }
    s.start_result = s.running_version.load(std::memory_order_relaxed) > 0;
    return s.start_result;
  }
  if (s.in_process()) {
    s.start_result = ApplyPendingPlan();
    return s.start_result;
  }
  s.start_deadline = SteadyClock::now() + State::ToDuration(s.options.start_timeout_s);
  try {
    if (s.options.registration) {
      s.start_client->RegisterRank(s.options.job_id, *s.options.registration);
      s.registered = true;
    }
    const double wait_s = std::min(s.options.start_wait_s, s.options.start_timeout_s);
    std::optional<RankPlan> plan =
        s.start_client->WaitForPlan(s.options.job_id, s.options.rank, 0, wait_s);
    s.connected.store(true, std::memory_order_relaxed);
    if (plan) {
      s.fetched_version = plan->version;
      s.announced_version.store(plan->version, std::memory_order_relaxed);
      s.Apply(std::move(*plan), "running");
      s.start_result = true;
    } else {
      s.Log("the coordinator at " + s.url() + " has no plan for rank " +
            std::to_string(s.options.rank) + " of job '" + s.options.job_id + "' after " +
            Seconds(wait_s) + "; this rank keeps default clocks until one comes, training goes on");
    }
  } catch (const CoordinatorError& e) {
    s.LogStartFailure(e);
  } catch (const std::exception& e) {
    s.Log(std::string("coordination failed at start: ") + e.what() +
          "; this rank keeps default clocks, training goes on");
  }
  try {
    s.worker = std::thread([&s] { s.Run(); });
  } catch (const std::exception& e) {
    s.Log(std::string("cannot start the coordinator thread: ") + e.what() +
          "; iterations are not reported");
  }
  return s.start_result;
}

bool CoordinatedPlan::Offer(const std::string& rank_plan_json) noexcept {
  State& s = *state_;
  if (!s.in_process() || s.off) return false;
  try {
    RankPlan plan = protocol::RankPlanFromJson(
        model::ParseJsonBounded(rank_plan_json, "the offered plan"), s.options.rank, 0);
    {
      std::lock_guard<std::mutex> lock(s.slot_mutex);
      if (plan.version <= s.offered_version) return false;
      s.offered_version = plan.version;
      s.announced_version.store(plan.version, std::memory_order_relaxed);
      s.pending = std::move(plan);
    }
    s.has_pending.store(true, std::memory_order_release);
    Bump(s.plans_fetched);
    return true;
  } catch (const std::exception& e) {
    s.Log(std::string("a plan offered to rank ") + std::to_string(s.options.rank) +
          " was not taken: " + e.what() + "; " + s.Keeps());
    return false;
  }
}

const std::vector<LoopStep>& CoordinatedPlan::loop_order() const noexcept {
  static const std::vector<LoopStep> kNone;
  return state_->loop_known ? state_->loop : kNone;
}

bool CoordinatedPlan::ApplyPendingPlan() noexcept {
  State& s = *state_;
  if (!s.has_pending.load(std::memory_order_acquire)) return false;
  try {
    std::optional<RankPlan> plan;
    {
      std::lock_guard<std::mutex> lock(s.slot_mutex);
      plan.swap(s.pending);
      s.has_pending.store(false, std::memory_order_relaxed);
    }
    if (!plan) return false;
    s.Apply(std::move(*plan), "switching to");
    return true;
  } catch (const std::exception& e) {
    s.Log(std::string("could not switch plans: ") + e.what());
    return false;
  }
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
  try {
    s.Push(time_s, energy_j);
  } catch (...) {
    // Nothing in Push allocates; a throwing mutex is the only way here.
  }
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
