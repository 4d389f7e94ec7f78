// Jobs: life cycle (restore, threads, stop) and what the service's
// /healthz and /metrics read.
#include <chrono>
#include <utility>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/model/format.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;

double Jobs::SavingInForce(const coord::Job& job) {
  return job.switches().empty() ? 0 : job.switches().back().predicted_saving_j;
}

Jobs::Jobs(const ServerOptions& options, Waiters* waiters, Metrics* metrics,
           std::function<void(const std::string&)> log)
    : options_(options),
      waiters_(waiters),
      metrics_(metrics),
      log_(std::move(log)),
      store_(options.db_path) {
  std::lock_guard<std::mutex> lock(mu_);
  next_seq_ = store_.MaxSeq() + 1;
  for (const StoredJob& stored : store_.LoadAll()) {
    try {
      EntryPtr e = Replay(stored);
      jobs_[stored.id] = e;
      ++restored_;
      const coord::Job& job = e->job;
      log_(Format("job %s: restored (%s, %d of %lld ranks, plan version %d)", stored.id.c_str(),
                  coord::JobPhaseName(job.phase()), job.registered_ranks(),
                  static_cast<long long>(job.config().world_size), job.plan_version()));
      if (job.ready_to_plan()) QueuePlan(stored.id);
    } catch (const std::exception& e) {
      broken_[stored.id] = e.what();
      log_(
          Format("warning: job %s could not be restored from the state database: %s; its rows "
                 "are kept (DELETE /jobs/{id} removes them)",
                 stored.id.c_str(), e.what()));
    }
  }
}

Jobs::~Jobs() {
  BeginStop();
  Finish();
}

void Jobs::Start() {
  for (int k = 0; k < options_.planners; ++k) {
    planners_.emplace_back([this] { PlannerLoop(); });
  }
  timer_ = std::thread([this] { TimerLoop(); });
  intake_ = std::thread([this] { IntakeLoop(); });
}

void Jobs::BeginStop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, planning] : planning_) planning.cancel->store(true);
    planner_cv_.notify_all();
    timer_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(intake_mu_);
  intake_stopping_ = true;
  intake_cv_.notify_all();
}

void Jobs::Finish() {
  for (std::thread& planner : planners_) {
    if (planner.joinable()) planner.join();
  }
  if (timer_.joinable()) timer_.join();
  if (intake_.joinable()) intake_.join();
  std::lock_guard<std::mutex> lock(mu_);
  SaveLastActive();
}

double Jobs::NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Jobs::Counts Jobs::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Counts{static_cast<int>(jobs_.size()), static_cast<int>(plan_queue_.size()),
                static_cast<int>(planning_.size())};
}

void Jobs::FillGauges(Gauges* g) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (coord::JobPhase p :
       {coord::JobPhase::kWaitingForRanks, coord::JobPhase::kWaitingForProfile,
        coord::JobPhase::kReadyToPlan, coord::JobPhase::kPlanned, coord::JobPhase::kFailed}) {
    g->jobs_by_phase[coord::JobPhaseName(p)] = 0;
  }
  for (const auto& [id, e] : jobs_) {
    ++g->jobs_by_phase[coord::JobPhaseName(e->job.phase())];
    g->ranks += e->job.registered_ranks();
    g->saving_j_per_iteration += SavingInForce(e->job);
  }
  g->planning = static_cast<int>(planning_.size());
  g->plan_queue = static_cast<int>(plan_queue_.size());
}

// Writes the last-active times that changed since they were last written
// (one transaction); a failure is logged, the times are written next time.
void Jobs::SaveLastActive() {
  try {
    store_.Write([&] {
      for (auto& [id, e] : jobs_) {
        if (e->last_active_unix_s != e->stored_last_active_unix_s) {
          store_.SetLastActive(id, e->last_active_unix_s);
        }
      }
    });
    for (auto& [id, e] : jobs_) e->stored_last_active_unix_s = e->last_active_unix_s;
  } catch (const std::exception& e) {
    log_(std::string("warning: the jobs' last-active times were not saved: ") + e.what());
  }
}

}  // namespace joulepipe::serve
