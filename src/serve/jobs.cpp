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
      store_(options.db_path),
      scheduler_(options, metrics, this) {
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
      if (job.ready_to_plan()) QueuePlan(*e);
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
  scheduler_.Start();
  evictor_ = std::thread([this] { EvictorLoop(); });
  intake_ = std::thread([this] { IntakeLoop(); });
}

void Jobs::BeginStop() {
  scheduler_.BeginStop();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    evictor_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(intake_mu_);
  intake_stopping_ = true;
  intake_cv_.notify_all();
}

void Jobs::Finish() {
  scheduler_.Finish();
  if (evictor_.joinable()) evictor_.join();
  if (intake_.joinable()) intake_.join();
  std::lock_guard<std::mutex> lock(mu_);
  SaveLastActive();
}

double Jobs::NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Jobs::Counts Jobs::counts() const {
  const Scheduler::Counts planning = scheduler_.counts();
  std::lock_guard<std::mutex> lock(mu_);
  return Counts{static_cast<int>(jobs_.size()), planning.queued, planning.running};
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
  const Scheduler::Counts planning = scheduler_.counts();
  g->planning = planning.running;
  g->plan_queue = planning.queued;
}

void Jobs::EvictorLoop() {
  const auto period = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(options_.evict_check_period_s));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    evictor_cv_.wait_for(lock, period, [&] { return stopping_; });
    if (stopping_) break;
    Wakeups wake;
    EvictAndFlush(&wake);
    lock.unlock();
    wake.ResumeNow();
    lock.lock();
  }
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
