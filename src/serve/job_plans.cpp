// Jobs, the job manager's side of planning: a ready job handed to the
// scheduler with its weight, the snapshot a solve runs on, and the result
// applied to the job and written to the store.
#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::serve {

using model::Format;

void Jobs::QueuePlan(const Entry& entry) {
  scheduler_.Queue(entry.job.config().job_id,
                   Scheduler::Work{entry.solve_overran ? -1 : entry.plan_work, entry.heavy()});
}

std::optional<Scheduler::Ticket> Jobs::BeginSolve(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second->job.ready_to_plan()) return std::nullopt;
  const Entry& e = *it->second;
  const protocol::JobConfig& c = e.job.config();
  return Scheduler::Ticket{
      coord::PlanTaskOf(e.job), e.profile_generation,
      Format("%s, %d stages, %d microbatches", std::string(schedule::KindName(c.spec.kind)).c_str(),
             c.spec.stages, c.spec.microbatches),
      PlanInstructions(c)};
}

bool Jobs::Overran(const std::string& id, const Scheduler::Ticket& ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->profile_generation != ticket.generation) return false;
  it->second->solve_overran = true;
  return true;
}

Scheduler::Applied Jobs::FinishSolve(const std::string& id, const Scheduler::Ticket& ticket,
                                     Scheduler::Outcome outcome) {
  Wakeups wake;
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second->profile_generation != ticket.generation) {
    log_(Format("job %s: plan discarded: the job changed while it was solved", id.c_str()));
    return Scheduler::Applied::kDiscarded;
  }
  const EntryPtr e = it->second;
  try {
    if (outcome.plan) {
      const solver::PipelinePlan& plan = *outcome.plan;
      e->job.SetPlan(plan, NowUnix());
      store_.Write([&] {
        store_.PutFrontier(id, SolvedPlanToJson(e->job.Solved()).dump());
        store_.PutSwitch(id, 1, protocol::PlanSwitchToJson(e->job.switches().front()).dump());
        store_.SetFailure(id, "");
      });
      const solver::FrontierPoint& q = plan.chosen_point();
      log_(
          Format("job %s: planned in %.2f s: %zu frontier points; every pipeline runs %.4f s, "
                 "%.1f J per iteration (all max clocks: %.4f s, %.1f J)",
                 id.c_str(), outcome.seconds, plan.frontier.points.size(), q.time_s, q.energy_j,
                 plan.baseline.time_s, plan.baseline.energy_j));
    } else {
      e->job.SetPlanFailed(outcome.failure);
      store_.Write([&] { store_.SetFailure(id, outcome.failure); });
      log_(Format("job %s: planning failed: %s", id.c_str(), outcome.failure.c_str()));
    }
  } catch (const std::exception& error) {
    // Memory back to what the database holds; the scheduler solves it
    // again after its backoff, so a store that works again (space freed)
    // plans the job without a restart.
    Reload(id);
    log_(Format("error: job %s: the plan could not be stored (%s)", id.c_str(), error.what()));
    MaybeReleaseSchedule(*e, &wake);
    return Scheduler::Applied::kStoreFailed;
  }
  MaybeReleaseSchedule(*e, &wake);  // wakes the ready waits too
  return Scheduler::Applied::kApplied;
}

}  // namespace joulepipe::serve
