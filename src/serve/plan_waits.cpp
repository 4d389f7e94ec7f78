// Jobs: a rank's plan, now or when it exists: the answer to each kind of
// wait, Zeus's schedule barrier, and parking the waits that have none yet.
#include <chrono>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/model/format.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using For = Parked::Wait::For;

std::optional<Reply> Jobs::Answer(const Entry& e, const Parked::Wait& w) const {
  const coord::Job& job = e.job;
  switch (w.what) {
    case For::kUpload:
      return std::nullopt;  // the intake thread answers it
    case For::kSchedule:
      if (job.phase() != coord::JobPhase::kFailed &&
          !(e.schedule_released && job.frontier() != nullptr)) {
        return std::nullopt;
      }
      break;
    case For::kPlan:
      if (job.phase() != coord::JobPhase::kFailed && job.plan_version() <= w.after) {
        return std::nullopt;
      }
      break;
  }
  if (job.phase() == coord::JobPhase::kFailed) {
    const std::string failure =
        w.what == For::kSchedule ? ForZeus(job.failure()) : ForApi(job.failure());
    return ErrorReply(409, Format("planning job %s failed: %s; upload another profile (PUT "
                                  "/jobs/{id}/profile) to plan again",
                                  w.job_id.c_str(), failure.c_str()));
  }
  const std::optional<protocol::RankPlan> plan = job.PlanFor(w.rank);
  if (!plan) return std::nullopt;
  return JsonReply(200, w.what == For::kSchedule ? protocol::FrequencyScheduleToJson(*plan)
                                                 : protocol::RankPlanToJson(*plan, w.job_id));
}

void Jobs::WakeReady(const Entry& e, Wakeups* wakeups) {
  waiters_->Wake(
      e.job.config().job_id, [&](const Parked::Wait& w) { return Answer(e, w); }, wakeups);
}

void Jobs::MaybeReleaseSchedule(Entry& e, Wakeups* wakeups) {
  const coord::Job& job = e.job;
  if (!e.schedule_released &&
      static_cast<std::int64_t>(e.schedule_asked.size()) == job.config().world_size) {
    const std::string& id = job.config().job_id;
    try {
      store_.Write([&] { store_.SetScheduleReleased(id); });
    } catch (const StoreError& error) {
      // The barrier stays closed (memory follows the store); the next rank
      // to ask tries again.
      log_(Format("error: job %s: opening the schedule barrier failed: %s", id.c_str(),
                  error.what()));
      return;
    }
    e.schedule_released = true;
    log_(Format("job %s: every rank asked for its schedule%s", id.c_str(),
                job.frontier() != nullptr ? "; answering all" : "; they wait for the plan"));
  }
  WakeReady(e, wakeups);
}

std::optional<Reply> Jobs::AskPlan(const std::string& job_id, const PlanAsk& ask, Parked* parked) {
  Wakeups wake;
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(job_id);
  const std::string& id = e->job.config().job_id;
  if (e->job.ranks().count(ask.rank) == 0) {
    throw coord::RankConflictError(
        ask.rank_field, Format("rank %d is not registered with job %s; register it first (%s)",
                               ask.rank, id.c_str(), ask.register_hint.c_str()));
  }
  Parked::Wait w;
  w.what = ask.what;
  w.job_id = id;
  w.rank = ask.rank;
  w.after = ask.after;
  if (ask.wait_s) {
    w.deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                          std::chrono::duration<double>(*ask.wait_s));
  }
  if (ask.what == For::kSchedule && e->schedule_asked.insert(ask.rank).second) {
    MaybeReleaseSchedule(*e, &wake);
  }
  if (std::optional<Reply> now = Answer(*e, w)) return now;
  if (ask.wait_s && *ask.wait_s == 0) return Plain(204, "");
  // Parked under mu_: no wake-up for this job can come between the answer
  // above and the park.
  return waiters_->Park(parked, std::move(w), ask.wait_s.value_or(0));
}

}  // namespace joulepipe::serve
