// CoordinatedPlan: runs an Agent on the plans a coordinator (`joulepipe
// serve`) hands this rank, without ever letting the coordinator slow or
// break training.
//
//   runtime::Agent agent(agent_options);
//   runtime::CoordinatedPlanOptions options;
//   options.coordinator.url = "http://10.0.0.1:8470";
//   options.job_id = job;
//   options.rank = rank;
//   runtime::CoordinatedPlan coordinated(agent, std::move(options));
//   coordinated.Start();                 // bounded wait for the first plan
//   for (each iteration) {
//     coordinated.OnStepBegin();
//     ...each instruction between coordinated.OnInstructionBegin(kind,
//        microbatch, chunk) and coordinated.OnInstructionEnd(...)...
//     coordinated.OnStepEnd();
//     ...gradient all-reduce, optimizer step...
//   }
//
// This object's hooks are the only ones a front end calls: they call the
// agent's in the order the agent needs (a waiting plan is handed over before
// agent.OnStepBegin(); the report is queued after agent.OnStepEnd()), so no
// caller sequences the two objects.
//
// What it does:
//   * Start() (training thread, before the first iteration) registers the
//     rank when `registration` is set, then long-polls for the rank's plan
//     for at most start_wait_s and, if one comes, gives it to the agent
//     (Agent::SetPlan). If the coordinator is unreachable, refuses, or has
//     no plan in time, it logs one line, e.g.
//       coordinator unreachable at http://10.0.0.1:8470 after 5 attempts
//       (last error: ...); this rank keeps default clocks, training goes on
//     and leaves the agent as it was (off: default clocks). Start() returns
//     within about start_timeout_s whatever the network does.
//   * OnStepEnd() measures the iteration (OnStepBegin to OnStepEnd on the
//     steady clock; energy from `meter` when given) and queues a report for
//     the background thread: no network, no waiting on it. The queue holds
//     queue_capacity reports; when full the oldest is dropped and counted
//     (stats().reports_dropped).
//   * The background thread sends each report (POST iterations, with the
//     client's retries). The answer names the plan version the rank should
//     run; when it differs from the newest one fetched, the thread fetches
//     that plan and leaves it in a slot. It also retries a registration
//     that failed at Start(), so a rank that started before the job was
//     registered joins later.
//   * OnStepBegin() and OnStepEnd() (between iterations, on the training
//     thread) hand a waiting plan to the agent: the switch always lands at
//     an iteration boundary, never inside a step. The check is one atomic
//     load when nothing waits.
//
// Plan sources (`source`):
//   * kCoordinator (the default): `joulepipe serve` over HTTP, as above.
//   * kInProcess: the job's own ranks hand this rank its plans (embedded
//     coordination: rank 0's coord::Job plans, the job's process group
//     carries each rank its plan as protocol::RankPlanToJson text). Offer()
//     takes them from any thread; nothing is registered, fetched or
//     reported, and Start() only applies a plan already offered.
//   * kPlan: a plan `joulepipe plan` wrote (`plan`, named `plan_name` in
//     lines); Start() applies its stage `stage` (its head wait, or its power
//     limit for a power-limit plan, with it) and nothing ever changes it.
// Each source is an object behind one interface (src/runtime/
// coordinated_plan_state.hpp: PlanFeed), chosen once from `source`. Whatever
// the source, this object owns what happens to a plan on the rank: the newest version wins, the
// switch lands at an iteration boundary, and the plan is put into the order the loop was seen to
// run (loop_order.hpp; the first step's forwards and backwards are recorded). A plan whose forwards
// and backwards are not the loop's is refused: logged once, the agent disabled (default clocks),
// stats().refusal says why; a later version that fits is applied. A plan applied before the loop's
// order was known (Start()) is reordered, or refused, at the end of the first step.
//
// Fail-safe: nothing here throws into the training loop (the hooks are
// noexcept; a bad option is logged at Start() and coordination stays off).
// Without a plan the agent stays off (default clocks). Losing the
// coordinator later keeps the plan in force (it is still valid) and is
// logged once; regaining it is logged once. The agent's own fail-safe (plan
// mismatch, NVML errors) is untouched: a plan the agent fell back from is
// not given again; the next new version is.
//
// Threads: Start, the hooks and ApplyPendingPlan are called from the
// training thread (the one thread that drives the agent);
// stats() from any thread. `log` is called from the training thread and the
// background thread, one call at a time. The agent must outlive this object.
// The destructor stops the background thread within about 50 ms (a request
// in flight is abandoned; queued reports are dropped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "joulepipe/runtime/coord_client.hpp"
#include "joulepipe/runtime/loop_order.hpp"

namespace joulepipe::runtime {

enum class PlanSource { kCoordinator, kInProcess, kPlan };

struct CoordinatedPlanOptions {
  PlanSource source = PlanSource::kCoordinator;
  CoordinatorOptions coordinator;  // kCoordinator only
  std::string job_id;              // kCoordinator: required; kInProcess: unused
  int rank = 0;
  // How clocks are set ("nvml", "daemon"), named in the line that says a
  // plan was applied; "" leaves it out.
  std::string through;
  // kPlan: the plan, its name in lines (its path), this rank's stage and the
  // job's stages (0: not checked; another count is refused).
  std::shared_ptr<const model::Plan> plan;
  std::string plan_name;
  int stage = 0;
  int stages = 0;
  // Registered at Start() (and retried in the background until it
  // succeeds) when set; registering again is idempotent on the server.
  std::optional<protocol::RankInfo> registration;
  // Start(): the plan's long poll waits at most this long (0..300 s)...
  double start_wait_s = 60;
  // ...and Start() as a whole (registration, retries, the long poll) gives
  // up after about this long (> 0; a longer start_wait_s is cut to it).
  double start_timeout_s = 90;
  // Background: the wait when fetching a version the server announced (it
  // normally answers at once). 0..300 s.
  double fetch_wait_s = 5;
  std::size_t queue_capacity = 64;  // reports waiting to be sent, >= 1
  // This rank's GPU energy per iteration (energy counter delta, OnStepBegin
  // to OnStepEnd: one read at each, on the training thread). nullptr: the
  // reports say energy_j null (not measured).
  std::shared_ptr<monitor::GpuMeter> meter;
  std::int64_t first_iteration = 0;  // the number of the first OnStepEnd's iteration
  // A grid plan's timed levers (grid_timing.hpp): this rank's pipeline
  // (data-parallel rank), whose every step waits pipeline x the plan's
  // offset at its beginning, and the number of the job's last iteration (as
  // OnStepBegin's `iteration` counts), without which no stop ramp begins.
  int pipeline = 0;
  std::optional<std::int64_t> last_iteration;
  // One line per event; default: stderr with a "joulepipe runtime: " prefix.
  std::function<void(const std::string&)> log;
};

struct CoordinationStats {
  int running_version = 0;  // the plan version given to the agent; 0: none
  // Its pipeline's predicted iteration time (s); 0: none or not given.
  double running_predicted_time_s = 0;
  double running_predicted_energy_j = 0;  // its pipeline's energy (J); 0: not given
  int announced_version = 0;              // the newest version the coordinator named
  bool connected = false;                 // the last exchange with the coordinator succeeded
  std::uint64_t reports_queued = 0;
  std::uint64_t reports_sent = 0;     // answered by the coordinator
  std::uint64_t reports_failed = 0;   // gave up after the client's retries
  std::uint64_t reports_dropped = 0;  // pushed out of a full queue
  std::uint64_t plans_fetched = 0;    // by the background thread, or taken by Offer()
  std::uint64_t plans_applied = 0;    // given to the agent (Start included)
  std::uint64_t fetch_failures = 0;
  std::uint64_t plans_refused = 0;  // not the loop's forwards and backwards
  std::string refusal;              // why the last refused plan was refused
};

class CoordinatedPlan {
 public:
  // Never throws for bad options or network trouble (Start() logs them);
  // starts no thread yet.
  CoordinatedPlan(Agent& agent, CoordinatedPlanOptions options);
  ~CoordinatedPlan();  // stops the background thread
  CoordinatedPlan(const CoordinatedPlan&) = delete;
  CoordinatedPlan& operator=(const CoordinatedPlan&) = delete;

  // Training thread, once, before the first iteration. True when the agent
  // got a plan. Starts the background thread (unless coordination is off
  // for a bad option). A second call does nothing and returns the same.
  bool Start() noexcept;

  // Training thread, at the iteration's start: applies a waiting plan, marks
  // the iteration's start, then agent.OnStepBegin(); then a running grid
  // plan's timing (grid_timing.hpp): the stop ramp begins when the
  // iterations left fit in it (Agent::BeginStopRamp, logged), and this
  // pipeline waits its offset, inside the step. `iteration`: the step's
  // number as the training framework counts (its logs, a resume included);
  // unset: first_iteration + the steps begun before.
  void OnStepBegin(std::optional<std::int64_t> iteration = std::nullopt) noexcept;
  // Training thread, around each forward/backward: the agent's hooks.
  void OnInstructionBegin(model::Kind kind, int microbatch, int chunk) noexcept;
  void OnInstructionEnd(model::Kind kind, int microbatch, int chunk) noexcept;
  // Training thread, after the iteration's last instruction: agent.OnStepEnd(),
  // then queues the iteration's report (time since OnStepBegin; nothing is
  // reported without one) and applies a waiting plan.
  void OnStepEnd() noexcept;
  // The same with the caller's own measurements.
  void OnStepEnd(double time_s, std::optional<double> energy_j) noexcept;
  // kInProcess, any thread: this rank's plan as protocol::RankPlanToJson
  // text. True when it was taken (it becomes the waiting plan, applied at
  // the next boundary); false, logged, for another rank's plan or a bad
  // document; false, silently, for a version not newer than one offered
  // before (every rank may be offered every rank's plans).
  bool Offer(const std::string& rank_plan_json) noexcept;

  // The first step's forwards and backwards in the order they ran; empty
  // until that step ended. Training thread.
  const std::vector<LoopStep>& loop_order() const noexcept;

  // Training thread, between iterations: gives a waiting plan to the agent.
  // True when it did. OnStepBegin/OnStepEnd call it.
  bool ApplyPendingPlan() noexcept;

  CoordinationStats stats() const;

  struct State;  // src/runtime/coordinated_plan_state.hpp

 private:
  // Queues the iteration's report and applies a waiting plan.
  void Report(double time_s, std::optional<double> energy_j) noexcept;

  std::unique_ptr<State> state_;
};

}  // namespace joulepipe::runtime
