// Scheduler: the queue (lightest first, one planner kept for light jobs),
// the planner threads (one solve under its time limit) and the timer
// (time limits, light budgets, store retries).
#include "scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <new>

#include "joulepipe/model/format.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;

namespace {

SteadyClock::duration Seconds(double s) {
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

Scheduler::Scheduler(const ServerOptions& options, Metrics* metrics, Client* client)
    : options_(options), metrics_(metrics), client_(client) {}

Scheduler::~Scheduler() {
  BeginStop();
  Finish();
}

void Scheduler::Start() {
  for (int k = 0; k < options_.planners; ++k) {
    planners_.emplace_back([this] { PlannerLoop(); });
  }
  timer_ = std::thread([this] { TimerLoop(); });
}

void Scheduler::BeginStop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  for (auto& [id, running] : running_) running.cancel->store(true);
  planner_cv_.notify_all();
  timer_cv_.notify_all();
}

void Scheduler::Finish() {
  for (std::thread& planner : planners_) {
    if (planner.joinable()) planner.join();
  }
  if (timer_.joinable()) timer_.join();
}

void Scheduler::Queue(const std::string& id, Work work) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = std::find_if(queue_.begin(), queue_.end(),
                               [&](const auto& queued) { return queued.first == id; });
  if (it == queue_.end()) {
    queue_.emplace_back(id, work);
  } else {
    it->second = work;
  }
  planner_cv_.notify_all();
  timer_cv_.notify_one();  // a light solve over its budget now yields to it
}

void Scheduler::Forget(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(queue_, [&](const auto& queued) { return queued.first == id; });
  retries_.erase(id);
}

Scheduler::State Scheduler::StateOf(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto running = running_.find(id);
  if (running != running_.end()) {
    return State{
        State::Is::kRunning,
        std::chrono::duration<double>(SteadyClock::now() - running->second.started).count()};
  }
  const bool queued = std::any_of(queue_.begin(), queue_.end(),
                                  [&](const auto& queued) { return queued.first == id; });
  return State{queued ? State::Is::kQueued : State::Is::kIdle, 0};
}

Scheduler::Counts Scheduler::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Counts{static_cast<int>(queue_.size()), static_cast<int>(running_.size())};
}

bool Scheduler::HeavyMayStart() const {
  return heavy_running_ < std::max(1, options_.planners - 1);
}

std::optional<std::pair<std::string, Scheduler::Work>> Scheduler::TakeNext() {
  const bool heavy_may_start = HeavyMayStart();
  auto best = queue_.end();
  double best_cost = 0;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (running_.count(it->first) != 0) continue;  // solving an older profile; queued again after
    if (it->second.heavy && !heavy_may_start) continue;
    const double cost =
        it->second.work < 0 ? std::numeric_limits<double>::infinity() : it->second.work;
    if (best == queue_.end() || cost < best_cost) {
      best = it;
      best_cost = cost;
    }
  }
  if (best == queue_.end()) return std::nullopt;
  std::pair<std::string, Work> next = *best;
  queue_.erase(best);
  return next;
}

bool Scheduler::AnotherCouldStart(const std::string& solving) const {
  const bool heavy_may_start = HeavyMayStart();
  return std::any_of(queue_.begin(), queue_.end(), [&](const auto& queued) {
    return queued.first != solving && running_.count(queued.first) == 0 &&
           (!queued.second.heavy || heavy_may_start);
  });
}

void Scheduler::PlannerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::optional<std::pair<std::string, Work>> next;
    planner_cv_.wait(lock, [&] {
      if (stopping_) return true;
      next = TakeNext();
      return next.has_value();
    });
    if (stopping_) return;
    SolveOne(next->first, next->second, lock);
    planner_cv_.notify_all();  // a heavy job's slot, or a job queued again meanwhile
  }
}

void Scheduler::SolveOne(const std::string& id, Work work, std::unique_lock<std::mutex>& lock) {
  // The job's solve, from the client without our lock. It is marked
  // running first, so that a profile arriving meanwhile queues it again
  // instead of starting a second solve of the same job.
  Running& mark = running_[id];
  mark.started = SteadyClock::now();
  mark.deadline = mark.started + Seconds(options_.plan_time_limit_s);
  mark.cancel = std::make_shared<std::atomic<bool>>(false);
  mark.heavy = work.heavy;
  if (work.heavy) ++heavy_running_;
  const std::shared_ptr<std::atomic<bool>> cancel = mark.cancel;
  auto unmark = [&] {
    running_.erase(id);
    if (work.heavy) --heavy_running_;
  };
  lock.unlock();
  std::optional<Ticket> ticket = client_->BeginSolve(id);
  if (!ticket) {
    lock.lock();
    unmark();
    retries_.erase(id);
    return;
  }
  client_->Log(Format("job %s: planning (%s%s; time limit %g s)", id.c_str(), ticket->what.c_str(),
                      work.heavy ? "; a heavy job" : "", options_.plan_time_limit_s));
  lock.lock();
  timer_cv_.notify_one();  // it watches the deadline
  lock.unlock();

  std::string phase;
  auto progress = [&](const char* now, double) {
    if (phase != now) {
      phase = now;
      client_->Log(Format("job %s: planning: %s", id.c_str(), now));
    }
  };
  Outcome outcome;
  bool cancelled = false;
  const SteadyClock::time_point start = SteadyClock::now();
  try {
    outcome.plan = ticket->task.Run(cancel.get(), progress);
  } catch (const model::Cancelled&) {
    cancelled = true;
  } catch (const InputError& error) {
    outcome.failure = ForApi(error.what());
  } catch (const std::bad_alloc&) {
    outcome.failure = "out of memory while solving the frontier";
  } catch (const std::exception& error) {
    outcome.failure = std::string("internal error while solving: ") + error.what();
  }
  outcome.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  lock.lock();
  const bool timed_out = running_.at(id).timed_out;
  const bool yielded = running_.at(id).yielded;
  unmark();
  if (cancelled && yielded && !timed_out) {
    lock.unlock();
    client_->Log(
        Format("job %s: planning ran %.1f s, longer than a light job's budget (%g s), while "
               "other jobs waited: cancelled and queued again as a heavy job",
               id.c_str(), outcome.seconds, options_.light_solve_budget_s));
    if (client_->Overran(id, *ticket)) Queue(id, Work{-1, true});
    lock.lock();
    return;
  }
  if (cancelled && !timed_out) {
    lock.unlock();
    client_->Log(
        Format("job %s: planning cancelled; it is planned again at the next start", id.c_str()));
    lock.lock();
    return;
  }
  if (timed_out) {
    metrics_->CountPlanTimeout();
    outcome.failure = Format(
        "planning took longer than its time limit of %g s (ServerOptions::plan_time_limit_s) "
        "and was cancelled; the job plans %lld instructions "
        "per iteration: plan it with a coarser frontier grid (JobConfig::resolution_s) or fewer "
        "microbatches, or raise the limit",
        options_.plan_time_limit_s, static_cast<long long>(ticket->instructions));
  }
  metrics_->ObserveSolve(outcome.seconds, outcome.plan.has_value());
  lock.unlock();
  const Applied applied = client_->FinishSolve(id, *ticket, std::move(outcome));
  lock.lock();
  if (applied != Applied::kStoreFailed) {
    retries_.erase(id);  // this job's retries are over
    return;
  }
  Retry& retry = retries_[id];
  retry.backoff_s = retry.backoff_s == 0 ? kFirstRetryS : std::min(kMaxRetryS, 2 * retry.backoff_s);
  retry.at = SteadyClock::now() + Seconds(retry.backoff_s);
  retry.work = work;
  timer_cv_.notify_all();
  const double backoff_s = retry.backoff_s;
  lock.unlock();
  client_->Log(Format("job %s: its plan is solved again in %g s", id.c_str(), backoff_s));
  lock.lock();
}

void Scheduler::TimerLoop() {
  const SteadyClock::duration light_budget = Seconds(options_.light_solve_budget_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    SteadyClock::time_point wake_at = SteadyClock::time_point::max();
    for (const auto& [id, running] : running_) {
      if (!running.timed_out) wake_at = std::min(wake_at, running.deadline);
      // A light solve's budget, while it is ahead (past it, Queue's
      // notification brings the timer back when a job starts to wait).
      const SteadyClock::time_point budget_end = running.started + light_budget;
      if (!running.heavy && !running.yielded && budget_end > SteadyClock::now()) {
        wake_at = std::min(wake_at, budget_end);
      }
    }
    for (const auto& [id, retry] : retries_) wake_at = std::min(wake_at, retry.at);
    if (wake_at == SteadyClock::time_point::max()) {
      timer_cv_.wait(lock);
    } else {
      timer_cv_.wait_until(lock, wake_at);
    }
    if (stopping_) break;
    const SteadyClock::time_point now = SteadyClock::now();
    std::vector<std::string> due;
    for (auto& [id, retry] : retries_) {
      if (retry.at > now) continue;
      retry.at = SteadyClock::time_point::max();  // until SolveOne sets it again or clears it
      due.push_back(id);
    }
    for (auto& [id, running] : running_) {
      if (!running.timed_out && running.deadline <= now) {
        running.timed_out = true;
        running.cancel->store(true);
        const std::string line =
            Format("job %s: planning reached its time limit (%g s); cancelling it", id.c_str(),
                   options_.plan_time_limit_s);
        lock.unlock();
        client_->Log(line);
        lock.lock();
        break;  // running_ may have changed meanwhile: look again
      }
      if (!running.heavy && !running.yielded && !running.timed_out &&
          now - running.started >= light_budget && AnotherCouldStart(id)) {
        // Its estimate was wrong and others wait: it yields (SolveOne
        // queues it again as heavy).
        running.yielded = true;
        running.cancel->store(true);
      }
    }
    for (const std::string& id : due) {
      const Work work = retries_.count(id) != 0 ? retries_.at(id).work : Work{};
      lock.unlock();
      client_->Log(
          Format("job %s: planning again (its plan could not be stored before)", id.c_str()));
      Queue(id, work);
      lock.lock();
    }
  }
}

}  // namespace joulepipe::serve
