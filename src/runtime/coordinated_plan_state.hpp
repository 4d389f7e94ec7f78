// CoordinatedPlan's state, and the one interface behind which its plans'
// sources sit (private to runtime: coordinated_plan.hpp has the contract).
//
// CoordinatedPlan owns what happens to a plan on the rank, whatever its
// source: the waiting slot, the switch at an iteration boundary, the loop's
// order, refusal, the grid plan's timing and the stats (State). A source
// (PlanFeed) only brings plans, and says them in its own terms:
//   * CoordinatorFeed (coordinator_feed.cpp): `joulepipe serve` over HTTP;
//     registers the rank, reports each iteration and fetches the versions
//     the answers name, on a background thread of its own;
//   * InProcessFeed (local_feeds.cpp): plans offered by the job's own ranks;
//   * PlanFileFeed (local_feeds.cpp): one plan a `joulepipe plan` wrote.
// MakePlanFeed is the one place that reads CoordinatedPlanOptions::source.
//
// Two hand-overs between threads:
//   * plans, a feed's thread -> training thread: one slot under
//     `slot_mutex`, latest wins, announced by the atomic `has_pending` so
//     the training thread's check at every boundary is one load;
//   * reports, training thread -> a feed's thread: the feed's own (see
//     CoordinatorFeed).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/runtime/coordinated_plan.hpp"
#include "joulepipe/runtime/grid_timing.hpp"

namespace joulepipe::runtime {

using SteadyClock = std::chrono::steady_clock;

// What each source of plans does for CoordinatedPlan. Every call but Offer
// and Stop comes from the training thread.
class PlanFeed {
 public:
  virtual ~PlanFeed() = default;
  // CoordinatedPlan::Start(), once, before the first iteration, bounded:
  // true when the agent got a plan (through State::Apply).
  virtual bool Start() = 0;
  // After each step: its number, time and energy (nothing for a source
  // that takes no reports). Never blocks on the network.
  virtual void Report(std::int64_t /*iteration*/, double /*time_s*/,
                      std::optional<double> /*energy_j*/) noexcept {}
  // Any thread: a plan as protocol::RankPlanToJson text. False for a
  // source that takes none (CoordinatedPlan::Offer's contract otherwise).
  virtual bool Offer(const std::string& /*rank_plan_json*/) noexcept { return false; }
  // How a refusal names `plan`.
  virtual std::string Name(const protocol::RankPlan& plan) const {
    return "plan v" + std::to_string(plan.version);
  }
  // The line that says `plan` (in the loop's order, `in`) was applied.
  virtual std::string AppliedLine(const protocol::RankPlan& plan,
                                  const std::vector<model::PlannedInstruction>& in, bool reordered,
                                  const char* how) const = 0;
  // Stops what runs in the background (before the state goes away).
  virtual void Stop() noexcept {}
};

// A stage plan's extras besides its instructions (a plan file's).
struct PlanExtras {
  model::HeadWait head_wait;
  std::optional<double> power_limit_w;  // a power-limit plan's (W)
  model::StageShape shape;
  double pipeline_offset_s = 0;  // a grid plan's
};

struct CoordinatedPlan::State {
  State(Agent& a, CoordinatedPlanOptions o) : agent(a), options(std::move(o)) {}

  Agent& agent;
  CoordinatedPlanOptions options;
  std::unique_ptr<PlanFeed> feed;  // null when a bad option turned coordination off
  std::string off_reason;          // why it is off

  std::mutex log_mutex;

  // Start() (training thread).
  bool started = false;
  bool start_result = false;

  // The plan slot. `offered_version`: the newest version DeliverNewer took.
  std::mutex slot_mutex;
  std::optional<protocol::RankPlan> pending;
  std::atomic<bool> has_pending{false};
  int offered_version = 0;

  // Training thread: the loop's order (recorded during the first step) and
  // the plan the agent runs, as given (not reordered), with its extras.
  std::vector<LoopStep> loop;
  bool recording = false;
  bool loop_known = false;
  std::optional<protocol::RankPlan> running;
  PlanExtras running_extras;
  GridTiming grid_timing{options.pipeline, options.last_iteration};
  std::int64_t steps_begun = 0;

  // Training thread: the iteration being measured.
  bool step_open = false;
  SteadyClock::time_point step_start;
  std::optional<std::uint64_t> step_start_mj;
  std::int64_t next_iteration = 0;

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

  // One line to options.log (any thread, one call at a time).
  void Log(const std::string& line) noexcept;
  // "this rank keeps plan version N" / "... default clocks".
  std::string Keeps() const;

  // Training thread, between iterations: `plan` to the agent, in the loop's
  // order when that is known; refused when it is not the loop's.
  void Apply(protocol::RankPlan plan, const char* how, PlanExtras extras = {});
  // Training thread: a plan that is not the loop's (default clocks).
  void Refuse(const protocol::RankPlan& plan, const std::string& why);
  // `line` says why (default: `why` itself).
  void Refuse(const std::string& why, const std::string& line = "");
  // The applied line of a plan a local source names `name` (a plan file's,
  // an in-process plan's); `suffix` follows a clocks plan's.
  std::string LocalAppliedLine(const std::string& name, const protocol::RankPlan& plan,
                               const std::vector<model::PlannedInstruction>& in, bool reordered,
                               const std::string& suffix) const;

  // Any thread: `plan` becomes the waiting plan (latest wins).
  void Deliver(protocol::RankPlan plan);
  // The same, only when its version is newer than every one delivered this
  // way before; false otherwise.
  bool DeliverNewer(protocol::RankPlan plan);
  // Training thread: gives a waiting plan to the agent; true when it did.
  bool ApplyPending() noexcept;

  // Training thread, after the agent's OnStepEnd: the first step's order is
  // the loop's; a plan applied before then is put into it (or refused).
  void EndRecording() noexcept;
  std::optional<std::uint64_t> ReadEnergyMj() noexcept;

  static SteadyClock::duration ToDuration(double seconds);
};

// The feed of `state`'s options.source. Throws model::InputError for an
// option that source needs and lacks.
std::unique_ptr<PlanFeed> MakePlanFeed(CoordinatedPlan::State& state);
// The coordinator's (coordinator_feed.cpp), for MakePlanFeed.
std::unique_ptr<PlanFeed> MakeCoordinatorFeed(CoordinatedPlan::State& state);

inline void Bump(std::atomic<std::uint64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace joulepipe::runtime
