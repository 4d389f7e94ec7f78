// Scheduler: which job is solved next, on which planner thread, and for
// how long. It knows a job only by its id and the work it was queued with
// (coord::PlanWork); what a solve needs and where its result goes is the
// job manager's (Jobs), reached through Scheduler::Client. Private to the
// serve part.
//
// The rules:
// - The lightest queued job starts first. A heavy one (work over
//   coord::kLightPlanWork, or unknown) starts only while a planner stays
//   free for light ones: at most ServerOptions::planners - 1 heavy solves
//   run at once.
// - A solve past ServerOptions::plan_time_limit_s is cancelled; the client
//   hears it as a failure that names the limit.
// - A light solve past ServerOptions::light_solve_budget_s while another
//   job could start yields: it is cancelled, the client is told (Overran),
//   and it is queued again as heavy.
// - A result the client could not store (a full disk) is solved again
//   after a backoff that doubles from 1 s to 60 s, so a store that works
//   again plans the job without a restart.
//
// Threads: `planners` planner threads and a timer (time limits, budgets,
// retries). Locking: one mutex over the queue, the solves in progress and
// the retries, held for those only. The client is never called with it
// held, and the client may call Queue, Forget and StateOf with its own
// lock held: the job manager's lock is always taken first.
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
#include <string>
#include <thread>
#include <vector>

#include "api.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/serve/server.hpp"
#include "metrics.hpp"

namespace joulepipe::serve {

class Scheduler {
 public:
  // A queued job's weight: work < 0 is unknown (heavy, and last in line).
  struct Work {
    double work = -1;
    bool heavy = true;
  };

  // One solve, as the client hands it out.
  struct Ticket {
    coord::PlanTask task;
    std::uint64_t generation = 0;   // the client's: which version of the job this is
    std::string what;               // for the log: "1f1b, 4 stages, 8 microbatches"
    std::int64_t instructions = 0;  // per pipeline iteration, for the time limit's message
  };
  // Its outcome: a plan, or a failure (an input error, the time limit, memory).
  struct Outcome {
    std::optional<solver::PipelinePlan> plan;
    std::string failure;
    double seconds = 0;
  };
  enum class Applied { kApplied, kDiscarded, kStoreFailed };

  // The job manager's side. Each is called on a planner or the timer
  // thread, without the scheduler's lock.
  class Client {
   public:
    virtual ~Client() = default;
    // The solve job `id` needs now; nullopt when it is gone or not ready.
    virtual std::optional<Ticket> BeginSolve(const std::string& id) = 0;
    // Applies and stores an outcome of `ticket` (kDiscarded when the job
    // changed since; kStoreFailed leaves the job as stored before).
    virtual Applied FinishSolve(const std::string& id, const Ticket& ticket, Outcome outcome) = 0;
    // A light solve of `ticket` outran its budget: the job counts as
    // heavy until its profile changes. False when the job changed since.
    virtual bool Overran(const std::string& id, const Ticket& ticket) = 0;
    virtual void Log(const std::string& line) = 0;
  };

  Scheduler(const ServerOptions& options, Metrics* metrics, Client* client);
  ~Scheduler();
  void Start();      // the planners and the timer
  void BeginStop();  // cancels every solve; the threads end their loops
  void Finish();     // joins the threads

  // Queues job `id` (again) with its weight; a queued one takes the new
  // weight. A job being solved is solved again after (a newer profile).
  void Queue(const std::string& id, Work work);
  // The job is gone: off the queue and the retries (a running solve's
  // result is discarded by the client).
  void Forget(const std::string& id);

  struct State {
    enum class Is { kIdle, kQueued, kRunning } is = Is::kIdle;
    double running_s = 0;
  };
  State StateOf(const std::string& id) const;
  struct Counts {
    int queued = 0, running = 0;
  };
  Counts counts() const;

 private:
  struct Running {
    SteadyClock::time_point started, deadline;
    std::shared_ptr<std::atomic<bool>> cancel;  // raised by BeginStop, the deadline or a yield
    bool heavy = false;
    bool timed_out = false;
    bool yielded = false;  // a light solve over its budget, cancelled for others
  };
  struct Retry {
    SteadyClock::time_point at;
    double backoff_s = 0;
    Work work;
  };

  // The next job to start, taken off the queue; nullopt if none may start
  // now (mu_ held).
  std::optional<std::pair<std::string, Work>> TakeNext();
  // Whether a queued job other than `solving` could start now (mu_ held).
  bool AnotherCouldStart(const std::string& solving) const;
  bool HeavyMayStart() const;  // mu_ held
  // Solves with mu_ released; called and returns with it held.
  void SolveOne(const std::string& id, Work work, std::unique_lock<std::mutex>& lock);
  void PlannerLoop();
  void TimerLoop();

  static constexpr double kFirstRetryS = 1;
  static constexpr double kMaxRetryS = 60;

  const ServerOptions& options_;
  Metrics* metrics_;
  Client* client_;

  mutable std::mutex mu_;
  bool stopping_ = false;
  std::deque<std::pair<std::string, Work>> queue_;  // in arrival order
  std::map<std::string, Running> running_;          // by job id
  std::map<std::string, Retry> retries_;            // results that could not be stored
  int heavy_running_ = 0;
  std::condition_variable planner_cv_, timer_cv_;
  std::vector<std::thread> planners_;
  std::thread timer_;
};

}  // namespace joulepipe::serve
