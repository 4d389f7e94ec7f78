// Jobs: the service's job manager. The registry (each job a coord::Job with
// what serving it adds: ids, activity, Zeus's schedule barrier), the store
// every change is written to first, replay at start, eviction of idle
// jobs, and profile intake (uploads parsed and checked off the HTTP
// thread). When a job is ready to plan it is handed to the scheduler
// (scheduler.hpp), which decides when it is solved and gives the result
// back here (Scheduler::Client). Planning goes through coord only
// (coord/plan_task.hpp). Private to the serve part.
//
// Threads: the caller's (the routes), the evictor (idle jobs, last-active
// times) and the intake thread; the scheduler has its own.
//
// Locking: one mutex (mu_) over the jobs and the store, held for
// in-memory changes and their store write only (parsing, profile checks
// and solving happen outside it). It is taken before the scheduler's lock
// and before the waiters' lock (waiters.hpp): a job's waits are parked and
// woken under it. The intake queue has a lock of its own, taken last.
//
// Every method takes the locks it needs; none is called with one held.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api.hpp"
#include "joulepipe/coord/job.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/serve/server.hpp"
#include "joulepipe/serve/store.hpp"
#include "metrics.hpp"
#include "scheduler.hpp"
#include "waiters.hpp"

namespace joulepipe::serve {

// A job whose solve's work (coord::PlanWork) is over coord::kLightPlanWork
// is heavy (about a second of solving on a 2-core machine): at most
// ServerOptions::planners - 1 heavy jobs plan at once. One of unknown work
// counts as heavy. A light job's solve that runs longer than
// ServerOptions::light_solve_budget_s while another job waits for a planner
// yields: it is cancelled and queued again as heavy (its estimate was
// wrong), so the planner kept for light jobs is free again within that long
// whatever the estimate said.
using coord::kLightPlanWork;

// Instructions of one pipeline iteration (GET /jobs/{id}, the time-limit
// message).
inline std::int64_t PlanInstructions(const protocol::JobConfig& c) {
  return 2LL * c.spec.stages * c.spec.microbatches * c.spec.chunks;
}

// Who asks for a rank's plan, as its route words the refusals: the wait
// (a plan newer than `after`, or Zeus's schedule barrier), the field that
// names the rank and how a client registers one.
struct PlanAsk {
  Parked::Wait::For what = Parked::Wait::For::kPlan;
  int rank = 0;
  int after = 0;
  // How long a plan wait may be held; 0: answer now (204 if no plan).
  // Zeus's schedule waits have none: they wait until the barrier opens.
  std::optional<double> wait_s;
  std::string rank_field;     // "PlanQuery::rank"
  std::string register_hint;  // "POST /jobs/{id}/ranks"
};

class Jobs final : private Scheduler::Client {
 public:
  // Opens the store (ServerOptions::db_path) and restores its jobs; a job
  // that cannot be restored keeps its rows and its id (409 until deleted).
  // Throws StoreError.
  Jobs(const ServerOptions& options, Waiters* waiters, Metrics* metrics,
       std::function<void(const std::string&)> log);
  ~Jobs() override;
  void Start();      // the scheduler, the evictor and the intake thread
  void BeginStop();  // cancels every solve; the threads end their loops
  void Finish();     // joins the threads, writes the last-active times

  int restored() const { return restored_; }
  bool persistent() const { return store_.persistent(); }
  struct Counts {
    int jobs = 0, plan_queue = 0, planning = 0;
  };
  Counts counts() const;
  // The jobs by phase, their ranks and saving, the planners' state.
  void FillGauges(Gauges* gauges) const;

  // The routes' work. Each throws what ErrorFor maps: InputError,
  // HttpError (404 no such job, 409 ...), coord's errors, StoreError (the
  // store and memory unchanged).
  nlohmann::json List() const;
  // A new job (an id is assigned when config.job_id is empty); the same
  // config under a registered id is answered with it (409 for another).
  std::string Create(protocol::JobConfig config);
  // A Zeus job: its id made unique, the server's default profile attached.
  std::string CreateUnique(protocol::JobConfig config, const model::Profile* profile);
  nlohmann::json Status(const std::string& id);
  void Delete(const std::string& id);
  void RegisterRank(const std::string& id, const protocol::RankInfo& info);
  // Parks the upload until the intake thread has checked and applied it
  // (nullopt), or answers 503 when the intake is full or the server stops.
  std::optional<Reply> QueueProfile(const std::string& id, std::string body, Parked* parked);
  // The same for any body whose parse would hold the HTTP thread (a Zeus
  // result of up to 1 MiB): `work` parses and applies it on the intake
  // thread and makes the answer, errors included.
  std::optional<Reply> QueueBody(const std::string& id, std::string body, Parked* parked,
                                 std::function<Reply(const std::string& body)> work);
  // The rank's plan now, or parks `parked` until it exists (nullopt).
  std::optional<Reply> AskPlan(const std::string& id, const PlanAsk& ask, Parked* parked);
  // An iteration report; returns the plan version after it.
  int Report(const std::string& id, const protocol::IterationReport& report);
  // Zeus's reports: the rank's next iterations, numbered by the server.
  void ReportNumbered(const std::string& id, int rank,
                      const std::vector<protocol::IterationReport>& reports,
                      const std::string& rank_field, const std::string& register_hint);

  // Frees upload `upload`'s queued body (only the intake's lock).
  void DropUpload(std::uint64_t upload);

 private:
  struct Entry {
    explicit Entry(protocol::JobConfig config) : job(std::move(config)) {}
    coord::Job job;
    std::int64_t seq = 0;
    double created_unix_s = 0;
    double last_active_unix_s = 0;
    double stored_last_active_unix_s = 0;
    std::uint64_t profile_generation = 0;  // bumped by every profile change
    double plan_work = -1;                 // coord::PlanWork of the profile; -1: unknown
    // Its solve outran ServerOptions::light_solve_budget_s: heavy, whatever plan_work says,
    // until its profile changes.
    bool solve_overran = false;
    bool heavy() const { return plan_work < 0 || plan_work > kLightPlanWork || solve_overran; }
    // Zeus: ranks that asked GET /schedule, and whether all have (persisted).
    std::set<int> schedule_asked;
    bool schedule_released = false;
    std::map<int, std::int64_t> zeus_iteration;  // rank -> its next iteration
  };
  using EntryPtr = std::shared_ptr<Entry>;

  // A profile upload waiting for the intake thread.
  struct Upload {
    std::uint64_t id = 0;
    std::string job_id, body;
    EntryPtr entry;               // the job when it was queued (gone if deleted since)
    solver::PlanRequest request;  // its plan request, for the profile's checks
    // A body other than a profile: what makes its answer (QueueBody).
    std::function<Reply(const std::string& body)> work;
  };

  // ---- The registry (mu_ held) ----
  EntryPtr Find(const std::string& id) const;  // 404 (or 409 for a broken one)
  EntryPtr FindAndTouch(const std::string& id);
  // Registers a job. Throws StoreError (nothing changed).
  EntryPtr Insert(protocol::JobConfig config, const model::Profile* profile);
  // `base`, or base+"+2", "+3", ... : an id no job has.
  std::string UniqueId(const std::string& base) const;
  EntryPtr Replay(const StoredJob& stored) const;
  // Rebuilds a job from the store after a failed write.
  void Reload(const std::string& id);
  void Remove(const std::string& id, const std::string& reason, Wakeups* wakeups);
  // Deletes idle jobs and writes changed last-active times.
  void EvictAndFlush(Wakeups* wakeups);
  void SaveLastActive();

  // ---- Answers (mu_ held) ----
  // The answer to `wait` if it has one now.
  std::optional<Reply> Answer(const Entry& entry, const Parked::Wait& wait) const;
  void WakeReady(const Entry& entry, Wakeups* wakeups);
  // Zeus: opens the schedule barrier once every rank asked.
  void MaybeReleaseSchedule(Entry& entry, Wakeups* wakeups);
  // One report into the job; a switch it causes is stored and wakes waits.
  void FeedReport(Entry& entry, const protocol::IterationReport& report, Wakeups* wakeups,
                  coord::Job::Numbering numbering = coord::Job::Numbering::kByRank);
  void StoreSwitch(Entry& entry, const protocol::PlanSwitch& s);

  // ---- Planning (job_plans.cpp) ----
  // Hands a job that is ready to plan to the scheduler (mu_ held).
  void QueuePlan(const Entry& entry);
  // Scheduler::Client: each takes mu_.
  std::optional<Scheduler::Ticket> BeginSolve(const std::string& id) override;
  Scheduler::Applied FinishSolve(const std::string& id, const Scheduler::Ticket& ticket,
                                 Scheduler::Outcome outcome) override;
  bool Overran(const std::string& id, const Scheduler::Ticket& ticket) override;
  void Log(const std::string& line) override { log_(line); }
  void EvictorLoop();

  // ---- Intake ----
  // Reserves `item`'s bytes, parks the request and queues the item, or
  // answers 503 (the intake full, the server stopping). mu_ held.
  std::optional<Reply> ParkForIntake(Upload item, Parked* parked);
  void IntakeLoop();
  // Parses and checks an upload (no lock), then applies it (mu_).
  Reply ApplyProfile(Upload& upload);

  static double NowUnix();
  // The predicted saving per iteration (J) of the plan switch in force; 0 unplanned.
  static double SavingInForce(const coord::Job& job);

  const ServerOptions& options_;
  Waiters* waiters_;
  Metrics* metrics_;
  std::function<void(const std::string&)> log_;
  Store store_;

  mutable std::mutex mu_;
  bool stopping_ = false;
  std::map<std::string, EntryPtr> jobs_;
  // Jobs in the store that could not be replayed: id -> why. Their rows are
  // kept until DELETE; their ids stay taken.
  std::map<std::string, std::string> broken_;
  std::int64_t next_seq_ = 1;
  int restored_ = 0;
  std::condition_variable evictor_cv_;

  std::mutex intake_mu_;  // over what follows, to intake_cv_
  bool intake_stopping_ = false;
  std::deque<Upload> intake_queue_;
  std::size_t intake_bytes_ = 0;  // queued and reserved bodies, at most kMaxIntakeBytes
  std::uint64_t next_upload_ = 1;
  std::condition_variable intake_cv_;

  std::thread evictor_, intake_;
  // Last: its threads call back into the members above (and stop first).
  Scheduler scheduler_;
};

}  // namespace joulepipe::serve
