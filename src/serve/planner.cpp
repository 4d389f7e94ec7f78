// Jobs: the planner threads (the queue: lightest first, one planner kept
// for light jobs; one solve under its time limit, through coord) and the
// timer (solve time limits, eviction).
#include <algorithm>
#include <chrono>
#include <limits>
#include <new>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/format.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;

void Jobs::QueuePlan(const std::string& id) {
  if (std::find(plan_queue_.begin(), plan_queue_.end(), id) == plan_queue_.end()) {
    plan_queue_.push_back(id);
  }
  planner_cv_.notify_all();
  timer_cv_.notify_one();  // a light solve over its budget now yields to it
}

std::optional<std::string> Jobs::TakeNextPlan() {
  // Ids of jobs gone or no longer ready leave the queue here.
  plan_queue_.erase(std::remove_if(plan_queue_.begin(), plan_queue_.end(),
                                   [&](const std::string& id) {
                                     const auto it = jobs_.find(id);
                                     return it == jobs_.end() || !it->second->job.ready_to_plan();
                                   }),
                    plan_queue_.end());
  const bool heavy_may_start = heavy_planning_ < std::max(1, options_.planners - 1);
  auto best = plan_queue_.end();
  double best_cost = 0;
  for (auto it = plan_queue_.begin(); it != plan_queue_.end(); ++it) {
    if (planning_.count(*it) != 0) continue;  // solving an older profile; queued again after
    const Entry& e = *jobs_.at(*it);
    if (e.heavy() && !heavy_may_start) continue;
    const double cost =
        e.plan_work < 0 || e.solve_overran ? std::numeric_limits<double>::infinity() : e.plan_work;
    if (best == plan_queue_.end() || cost < best_cost) {
      best = it;
      best_cost = cost;
    }
  }
  if (best == plan_queue_.end()) return std::nullopt;
  std::string id = *best;
  plan_queue_.erase(best);
  return id;
}

bool Jobs::AnotherCouldStart(const std::string& solving) const {
  const bool heavy_may_start = heavy_planning_ < std::max(1, options_.planners - 1);
  for (const std::string& id : plan_queue_) {
    if (id == solving) continue;
    const auto it = jobs_.find(id);
    if (it == jobs_.end() || !it->second->job.ready_to_plan()) continue;
    if (!it->second->heavy() || heavy_may_start) return true;
  }
  return false;
}

void Jobs::PlannerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::optional<std::string> next;
    planner_cv_.wait(lock, [&] {
      if (stopping_) return true;
      next = TakeNextPlan();
      return next.has_value();
    });
    if (stopping_) return;
    PlanOne(*next, lock);
    planner_cv_.notify_all();  // a heavy job's slot, or a job re-queued meanwhile
  }
}

void Jobs::PlanOne(const std::string& id, std::unique_lock<std::mutex>& lock) {
  const EntryPtr e = jobs_.at(id);
  const coord::PlanTask task = coord::PlanTaskOf(e->job);
  const std::uint64_t generation = e->profile_generation;
  const protocol::JobConfig& c = e->job.config();
  const std::int64_t instructions = PlanInstructions(c);
  const bool heavy = e->heavy();
  Planning& planning = planning_[id];
  planning.started = SteadyClock::now();
  planning.deadline =
      planning.started + std::chrono::duration_cast<SteadyClock::duration>(
                             std::chrono::duration<double>(options_.plan_time_limit_s));
  planning.cancel = std::make_shared<std::atomic<bool>>(false);
  planning.heavy = heavy;
  if (heavy) ++heavy_planning_;
  const std::shared_ptr<std::atomic<bool>> cancel = planning.cancel;
  timer_cv_.notify_one();  // it watches the deadline
  log_(Format("job %s: planning (%s, %d stages, %d microbatches%s; time limit %g s)", id.c_str(),
              std::string(schedule::KindName(c.spec.kind)).c_str(), c.spec.stages,
              c.spec.microbatches, heavy ? "; a heavy job" : "", options_.plan_time_limit_s));
  lock.unlock();

  std::string phase;
  auto progress = [&](const char* now, double) {
    if (phase != now) {
      phase = now;
      log_(Format("job %s: planning: %s", id.c_str(), now));
    }
  };
  std::optional<solver::PipelinePlan> plan;
  std::string failure;
  bool cancelled = false;
  const SteadyClock::time_point start = SteadyClock::now();
  try {
    plan = task.Run(cancel.get(), progress);
  } catch (const model::Cancelled&) {
    cancelled = true;
  } catch (const InputError& error) {
    failure = ForApi(error.what());
  } catch (const std::bad_alloc&) {
    failure = "out of memory while solving the frontier";
  } catch (const std::exception& error) {
    failure = std::string("internal error while solving: ") + error.what();
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  lock.lock();
  const bool timed_out = planning_.at(id).timed_out;
  const bool yielded = planning_.at(id).yielded;
  planning_.erase(id);
  if (heavy) --heavy_planning_;
  if (cancelled && yielded && !timed_out) {
    const auto still = jobs_.find(id);
    if (still != jobs_.end() && still->second == e && e->profile_generation == generation) {
      e->solve_overran = true;
      QueuePlan(id);
    }
    log_(
        Format("job %s: planning ran %.1f s, longer than a light job's budget (%g s), while "
               "other jobs waited: cancelled and queued again as a heavy job",
               id.c_str(), seconds, options_.light_solve_budget_s));
    return;
  }
  if (cancelled && !timed_out) {
    log_(Format("job %s: planning cancelled; it is planned again at the next start", id.c_str()));
    return;
  }
  if (timed_out) {
    metrics_->CountPlanTimeout();
    failure = Format(
        "planning took longer than its time limit of %g s (ServerOptions::plan_time_limit_s) "
        "and was cancelled; the job plans %lld instructions "
        "per iteration: plan it with a coarser frontier grid (JobConfig::resolution_s) or fewer "
        "microbatches, or raise the limit",
        options_.plan_time_limit_s, static_cast<long long>(instructions));
  }
  metrics_->ObserveSolve(seconds, plan.has_value());
  const auto still = jobs_.find(id);
  if (still == jobs_.end() || still->second != e || e->profile_generation != generation) {
    log_(Format("job %s: plan discarded: the job changed while it was solved", id.c_str()));
    return;
  }
  Wakeups wake;
  bool stored = false;
  try {
    if (plan) {
      e->job.SetPlan(*plan, NowUnix());
      store_.Write([&] {
        store_.PutFrontier(id, SolvedPlanToJson(e->job.Solved()).dump());
        store_.PutSwitch(id, 1, protocol::PlanSwitchToJson(e->job.switches().front()).dump());
        store_.SetFailure(id, "");
      });
      const solver::FrontierPoint& q = plan->chosen_point();
      log_(
          Format("job %s: planned in %.2f s: %zu frontier points; every pipeline runs %.4f s, "
                 "%.1f J per iteration (all max clocks: %.4f s, %.1f J)",
                 id.c_str(), seconds, plan->frontier.points.size(), q.time_s, q.energy_j,
                 plan->baseline.time_s, plan->baseline.energy_j));
    } else {
      e->job.SetPlanFailed(failure);
      store_.Write([&] { store_.SetFailure(id, failure); });
      log_(Format("job %s: planning failed: %s", id.c_str(), failure.c_str()));
    }
    stored = true;
  } catch (const std::exception& error) {
    // Memory back to what the database holds, and planning again once the
    // backoff has passed: a store that works again (space freed) plans the
    // job without a restart.
    Reload(id);
    StoreRetry& retry = store_retries_[id];
    retry.backoff_s =
        retry.backoff_s == 0 ? kFirstStoreRetryS : std::min(kMaxStoreRetryS, 2 * retry.backoff_s);
    retry.at = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                        std::chrono::duration<double>(retry.backoff_s));
    timer_cv_.notify_all();
    log_(
        Format("error: job %s: the plan could not be stored (%s); the job is planned again in "
               "%g s",
               id.c_str(), error.what(), retry.backoff_s));
  }
  if (stored) store_retries_.erase(id);  // this job's retries are over
  MaybeReleaseSchedule(*e, &wake);       // wakes the ready waits too
  lock.unlock();
  wake.ResumeNow();
  lock.lock();
}

void Jobs::TimerLoop() {
  const auto period = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(options_.evict_check_period_s));
  const auto light_budget = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(options_.light_solve_budget_s));
  std::unique_lock<std::mutex> lock(mu_);
  SteadyClock::time_point next_evict = SteadyClock::now() + period;
  while (!stopping_) {
    SteadyClock::time_point wake_at = next_evict;
    for (const auto& [id, planning] : planning_) {
      if (!planning.timed_out) wake_at = std::min(wake_at, planning.deadline);
      // A light solve's budget, while it is ahead (past it, QueuePlan's
      // notification brings the timer back when a job starts to wait).
      const SteadyClock::time_point budget_end = planning.started + light_budget;
      if (!planning.heavy && !planning.yielded && budget_end > SteadyClock::now()) {
        wake_at = std::min(wake_at, budget_end);
      }
    }
    for (const auto& [id, retry] : store_retries_) wake_at = std::min(wake_at, retry.at);
    timer_cv_.wait_until(lock, wake_at);
    if (stopping_) break;
    const SteadyClock::time_point now = SteadyClock::now();
    for (auto& [id, retry] : store_retries_) {
      if (retry.at > now) continue;
      retry.at = SteadyClock::time_point::max();  // until PlanOne sets it again or clears it
      const auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second->job.ready_to_plan()) {
        log_(Format("job %s: planning again (its plan could not be stored before)", id.c_str()));
        QueuePlan(id);
      }
    }
    std::erase_if(store_retries_, [&](const auto& r) {
      return r.second.at == SteadyClock::time_point::max() && !jobs_.count(r.first);
    });
    for (auto& [id, planning] : planning_) {
      if (!planning.timed_out && planning.deadline <= now) {
        planning.timed_out = true;
        planning.cancel->store(true);
        log_(Format("job %s: planning reached its time limit (%g s); cancelling it", id.c_str(),
                    options_.plan_time_limit_s));
      } else if (!planning.heavy && !planning.yielded && !planning.timed_out &&
                 now - planning.started >= light_budget && AnotherCouldStart(id)) {
        // Its estimate was wrong and others wait: it yields (PlanOne
        // queues it again as heavy).
        planning.yielded = true;
        planning.cancel->store(true);
      }
    }
    if (now >= next_evict) {
      Wakeups wake;
      EvictAndFlush(&wake);
      next_evict = now + period;
      lock.unlock();
      wake.ResumeNow();
      lock.lock();
    }
  }
}

}  // namespace joulepipe::serve
