// Service: the routes of `joulepipe serve` over coord::Job, the Store, the
// planner thread and the timer thread, with no HTTP in it: the transport
// (http_server.hpp) hands it decoded requests and parks the connections it
// asks to park. Private to the serve part.
//
// Threads: the transport's (which calls Handle and Resumed), the planners,
// the timer (long-poll deadlines, hang-ups, eviction, solve time limits)
// and the intake (profile uploads: parsing and checks, off the HTTP thread).
//
// Locking: one mutex (mu_) guards every job, the store and the waiter
// registry. Request handlers hold it only for in-memory changes and their
// store write (parsing, profile checks and solving happen outside it).
//
// Parking (long polls): Handle() returns nullopt after calling
// Parked::Suspend() with mu_ held and registering the request as a waiter.
// Whoever makes its answer possible (the planner, a switch, the Zeus
// barrier, the timer at the deadline, a deletion, Stop) claims the waiter
// under mu_ (removing it from every registry, so only one party ever
// resumes it) and calls Parked::Resume() after releasing mu_. The transport
// then calls Resumed(), which answers (or, rarely, parks again). Since
// Suspend happens under mu_ and claiming needs mu_, a Resume never precedes
// its Suspend.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "joulepipe/coord/job.hpp"
#include "joulepipe/serve/server.hpp"
#include "joulepipe/serve/store.hpp"
#include "metrics.hpp"

namespace joulepipe::serve {

using SteadyClock = std::chrono::steady_clock;

// The routes. RouteOf maps a method and decoded path to one of them.
enum class Route {
  kHealthz,
  kMetrics,
  kListJobs,
  kCreateJob,
  kGetJob,
  kDeleteJob,
  kRegisterRank,
  kPutProfile,
  kGetPlan,
  kReportIteration,
  kZeusInfo,
  kZeusRegisterJob,
  kZeusRegisterRank,
  kZeusSchedule,
  kZeusResult,
  kMethodNotAllowed,  // a known path with another method
  kNotFound,
};

struct RouteMatch {
  Route route = Route::kNotFound;
  std::string template_name;  // "GET /jobs/{id}/plan": the metrics label
  std::string job_id;         // decoded, for routes with one
  std::string allowed;        // kMethodNotAllowed: "GET, DELETE"
};
RouteMatch RouteOf(const std::string& method, const std::vector<std::string>& segments);

// A solve's work: the pipeline's instructions per iteration x the frontier
// grid's deadlines (PlanWork). A job over this is heavy (on a 2-core
// machine, about a second of solving): at most ServerOptions::planners - 1
// heavy jobs plan at once. One of unknown work counts as heavy.
inline constexpr double kLightPlanWork = 2e7;

// The largest body a route accepts: 64 MiB for PUT /jobs/{id}/profile,
// 1 MiB for the other POST routes, 0 for routes that take none (GET,
// DELETE, unknown paths): their bodies are refused before a byte is read.
// The connection slots the transport keeps free for new clients (it closes
// the longest-waiting idle connection below this many, http_server.hpp):
// what waiting ranks may hold is max_connections less these.
inline int FreeConnectionRoom(int max_connections) {
  return max_connections / 16 > 1 ? max_connections / 16 : 1;
}
// Zeus's GET /schedule waits (its client cannot be told to come back: it
// waits with no timeout, and anything but 200 fails the rank) may hold at
// most this many connections at once.
inline int ZeusWaitLimit(int max_connections) {
  return max_connections - FreeConnectionRoom(max_connections);
}

inline constexpr std::size_t kMaxProfileBody = 64u << 20;
inline constexpr std::size_t kMaxJsonBody = 1u << 20;
// Profile uploads queued for the intake thread hold at most this many body
// bytes; a further upload is answered 503 with Retry-After (two whole
// uploads: one being parsed, one waiting, is the most a healthy job needs).
inline constexpr std::size_t kMaxIntakeBytes = 2 * kMaxProfileBody;
std::size_t BodyLimit(Route route);

struct Request {
  std::string method;
  RouteMatch match;
  std::vector<std::pair<std::string, std::string>> query;  // decoded
  std::string body;
};

struct Reply {
  int status = 200;
  std::string body;  // JSON unless content_type says otherwise; empty for 204
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// {"error": message, "field": field or null} with `status`.
Reply ErrorReply(int status, const std::string& message, const std::string& field = "");

// A request the service may park; implemented by the transport.
class Parked {
 public:
  virtual ~Parked() = default;
  // Stops serving the connection. Called by the service, from the request's
  // handler, with the service's lock held.
  virtual void Suspend() = 0;
  // Serves it again (the transport then calls Service::Resumed). Called by
  // the service from any thread without its lock, once per Suspend.
  virtual void Resume() = 0;
  // The connection's socket, polled for a hang-up while parked; -1: unknown.
  virtual int Socket() const = 0;

  // The service's record of the wait (guarded by the service's lock).
  enum class Outcome { kNone, kReady, kDeadline, kJobGone, kStopping, kHungUp };
  struct Wait {
    bool registered = false;
    bool zeus = false;  // GET /schedule (else GET /jobs/{id}/plan)
    std::string job_id;
    int rank = 0;
    int after = 0;  // plan: answer when version > after
    std::optional<SteadyClock::time_point> deadline;
    Outcome outcome = Outcome::kNone;
    std::string gone_reason;  // kJobGone: "deleted" or "evicted"
    bool pending = false;     // claimed and resumed, its answer not yet sent
    // A profile upload on the intake thread: its number (0: not one) and,
    // once done, its answer.
    std::uint64_t intake = 0;
    std::optional<Reply> reply;
  } wait;
};

class Service {
 public:
  // Opens the store and restores its jobs; starts the planner and timer
  // threads. Throws model::InputError (ServerOptions::...).
  explicit Service(const ServerOptions& options);
  ~Service();

  // A complete request (body received). nullopt: parked (see above). A
  // profile upload's body is moved out of `request` (to the intake thread).
  std::optional<Reply> Handle(Request& request, Parked* parked);
  // A parked request that was resumed.
  std::optional<Reply> Resumed(const Request& request, Parked* parked);
  // The transport is done with `parked` (its answer was sent, or its
  // connection closed): forget it.
  void Forget(Parked* parked);

  // Stop, first half: no more parking; every parked request is resumed (to
  // answer 503) and every solve in progress is cancelled. Then waits up to
  // `wait_s` until the resumed requests have been answered.
  void BeginStop(double wait_s);
  // Second half, after the transport stopped: joins the threads and writes
  // the last-active times.
  void Finish();

  // Metrics of one answered request (the transport's completion callback).
  void ObserveRequest(const std::string& route, int status, double handling_s, double parked_s) {
    metrics_.ObserveRequest(route, status, handling_s, parked_s);
  }
  // The transport closed a connection after its answer because more than
  // ServerOptions::keep_alive_connections were open.
  void CountClosedForRoom() { metrics_.CountClosedForRoom(); }
  // The transport closed a connection that waited for a request's headers
  // too long, or the longest when it ran out of room (http_server.hpp).
  void CountClosedWaiting() { metrics_.CountClosedWaiting(); }
  // The transport's open connections: +1 / -1 as they open and close; the
  // count now (Connection: close above keep_alive_connections, /metrics).
  int AddOpenConnections(int delta) { return open_connections_.fetch_add(delta) + delta; }
  int open_connections() const { return open_connections_.load(std::memory_order_relaxed); }
  // A line to ServerOptions::log (serialized).
  void Log(const std::string& line);

  int restored_jobs() const { return restored_; }
  bool persistent() const { return store_.persistent(); }
  int jobs() const;
  int waiting() const;

 private:
  struct Entry {
    explicit Entry(coord::JobConfig config) : job(std::move(config)) {}
    coord::Job job;
    std::int64_t seq = 0;
    double created_unix_s = 0;
    double last_active_unix_s = 0;
    double stored_last_active_unix_s = 0;
    std::uint64_t profile_generation = 0;  // bumped by every profile change
    double plan_work = -1;                 // PlanWork of the profile; -1: unknown
    std::set<Parked*> waiters;
    // Zeus: ranks that asked GET /schedule, and whether all have (persisted).
    std::set<int> schedule_asked;
    bool schedule_released = false;
    std::map<int, std::int64_t> zeus_iteration;  // rank -> its next iteration
  };
  using EntryPtr = std::shared_ptr<Entry>;

  // Routes (called with no lock held; each takes mu_ as it needs).
  Reply Healthz();
  Reply MetricsText();
  Reply ListJobs();
  Reply CreateJob(const Request& r);
  Reply GetJob(const Request& r);
  Reply DeleteJob(const Request& r);
  Reply RegisterRank(const Request& r, bool zeus);
  std::optional<Reply> PutProfile(Request& r, Parked* parked);  // parks; the intake answers
  struct Intake;
  Reply ApplyProfile(const Intake& item, std::string body);  // intake thread
  void IntakeLoop();
  // A claimed upload's queued body, freed before it is parsed (mu_ held).
  void DropIntake(std::uint64_t id);
  // The status and message for an exception a route threw: one table.
  Reply ErrorFor(std::exception_ptr error, bool zeus);
  std::optional<Reply> GetPlan(const Request& r, Parked* parked, bool zeus);
  Reply ReportIteration(const Request& r);
  Reply ZeusInfo();
  Reply ZeusRegisterJob(const Request& r);
  Reply ZeusResult(const Request& r);

  // The answer to a wait if it has one now (with mu_ held), else nullopt.
  std::optional<Reply> AnswerWait(const Parked::Wait& wait);
  void Park(Parked* parked);  // mu_ held
  // 204 + Retry-After + Connection: close for a plan wait over
  // ServerOptions::max_waiting (mu_ held). A rank told to come back that
  // asks again before its time is promised the same time: one rank holds
  // one come-back slot, however often it asks.
  Reply DeferWait(double wait_s, const std::string& job_id, int rank);
  // Claims `parked` (mu_ held): removes it from every registry. False if
  // it was not registered (someone else claimed it).
  bool Claim(Parked* parked, Parked::Outcome outcome, std::vector<Parked*>* claimed);
  // Claims the waiters of `entry` whose answer now exists (mu_ held).
  void WakeReady(Entry& entry, std::vector<Parked*>* claimed);
  static void ResumeAll(const std::vector<Parked*>& claimed);
  // A claimed wait's answer was sent or abandoned: lets Stop stop waiting for it (mu_ held).
  void MarkAnswered(Parked::Wait& wait);

  // Registers a job; mu_ held. Throws StoreError (nothing changed).
  EntryPtr Insert(coord::JobConfig config, const model::Profile* profile, const std::string& csv);
  EntryPtr Find(const std::string& id);  // mu_ held; 404 (or 409 for a broken one)
  // `base`, or base+"+2", "+3", ... : an id no job has (mu_ held).
  std::string UniqueId(const std::string& base) const;
  void Touch(Entry& entry);                      // mu_ held
  EntryPtr FindAndTouch(const std::string& id);  // Find, then Touch (mu_ held)
  // Rebuilds `entry`'s job from the store after a failed write (mu_ held).
  void Reload(const std::string& id);
  EntryPtr Replay(const StoredJob& stored);
  // Whether the wait's answer exists now (mu_ held).
  bool Ready(const Parked::Wait& wait, const Entry& entry) const;
  // Zeus: opens the schedule barrier once every rank asked (mu_ held).
  void MaybeReleaseSchedule(Entry& entry, std::vector<Parked*>* claimed);
  // Persists a plan switch the job just made; on failure reloads the job
  // and rethrows (mu_ held).
  void StoreSwitch(Entry& entry, const coord::PlanSwitch& s);
  // Deletes idle jobs and writes changed last-active times (mu_ held).
  void EvictAndFlush(std::vector<Parked*>* claimed);
  void SaveLastActive();  // mu_ held
  void FeedReport(Entry& e, const coord::IterationReport& report, std::vector<Parked*>* claimed,
                  coord::Job::Numbering numbering = coord::Job::Numbering::kByRank);  // mu_ held
  void QueuePlan(const std::string& id);                                              // mu_ held
  void Remove(const std::string& id, const std::string& reason, std::vector<Parked*>* claimed);

  // A solve in progress (guarded by mu_).
  struct Planning {
    SteadyClock::time_point started, deadline;
    std::shared_ptr<std::atomic<bool>> cancel;  // raised by Stop or at the deadline
    bool heavy = false;
    bool timed_out = false;
  };
  // The next job to plan, lightest first (a heavy one only while a planner
  // stays free for light ones), taken off the queue; nullopt if none may
  // start now (mu_ held).
  std::optional<std::string> TakeNextPlan();
  void PlanOne(const std::string& id, std::unique_lock<std::mutex>& lock);

  void PlannerLoop();
  void TimerLoop();
  static double NowUnix();

  ServerOptions options_;
  Store store_;
  std::atomic<int> open_connections_{0};
  Metrics metrics_;
  const SteadyClock::time_point started_ = SteadyClock::now();

  mutable std::mutex mu_;
  std::map<std::string, EntryPtr> jobs_;
  // Jobs in the store that could not be replayed: id -> why. Their rows are
  // kept until DELETE; their ids stay taken.
  std::map<std::string, std::string> broken_;
  std::int64_t next_seq_ = 1;
  int restored_ = 0;
  std::set<Parked*> parked_;
  int held_plan_waits_ = 0;  // parked native plan long polls (ServerOptions::max_waiting)
  int held_zeus_waits_ = 0;  // parked Zeus GET /schedule waits (ZeusWaitLimit)
  // The latest come-back time promised by a deferred wait: the next one is
  // promised 1/max_waiting s after it (and at least 1 s from now).
  SteadyClock::time_point last_comeback_{};
  // The come-back time promised to each (job, rank) told to come back, until
  // it passes (pruned as they do; at most the ranks promised a time ahead).
  std::map<std::pair<std::string, int>, SteadyClock::time_point> comebacks_;
  std::multimap<SteadyClock::time_point, std::pair<std::string, int>> comebacks_by_time_;
  std::multimap<SteadyClock::time_point, Parked*> deadlines_;
  int unanswered_ = 0;  // claimed and resumed, answer not yet sent
  std::condition_variable answered_cv_;
  bool stopping_ = false;

  std::deque<std::string> plan_queue_;
  std::map<std::string, Planning> planning_;  // by job id
  int heavy_planning_ = 0;
  std::condition_variable planner_cv_;
  std::condition_variable timer_cv_;
  std::mutex log_mu_;
  // Profile uploads waiting for the intake thread, and their parked
  // requests by intake number (a request that is claimed leaves the map).
  struct Intake {
    std::uint64_t id = 0;
    std::string job_id, body;
    EntryPtr entry;               // the job when it was queued (gone if deleted since)
    solver::PlanRequest request;  // its plan request, for the profile's checks
  };
  std::deque<Intake> intake_queue_;
  std::size_t intake_bytes_ = 0;  // the bodies in intake_queue_, at most kMaxIntakeBytes
  std::map<std::uint64_t, Parked*> intake_waiters_;
  std::uint64_t next_intake_ = 1;
  std::condition_variable intake_cv_;

  std::vector<std::thread> planners_;
  std::thread timer_, intake_;
};

}  // namespace joulepipe::serve
