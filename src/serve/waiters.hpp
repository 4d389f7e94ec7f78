// Waiters: the requests the service parked (plan long polls, Zeus's
// schedule barrier, profile uploads being checked), their deadlines and
// hang-ups, the come-back times of the plan waits it declined to hold, and
// stopping (every parked request answered 503 before the transport stops).
// Knows nothing of jobs: whoever can answer a wait (jobs.hpp) wakes it with
// the answer. Private to the serve part.
//
// Locking: one mutex of its own. The jobs' lock is taken before it, never
// after (Jobs parks and wakes while holding its own lock, so no wake-up
// for a job falls between a route's check and its park); the intake's is
// taken after it (a claimed upload's queued body is dropped). A request is
// suspended (Parked::Suspend) under this lock, and whoever claims it
// (removing it from every index, so only one party ever resumes it) does so
// under this lock too: a Resume never precedes its Suspend. Claimed
// requests are resumed by Wakeups, after every lock is released.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api.hpp"
#include "joulepipe/serve/server.hpp"
#include "metrics.hpp"

namespace joulepipe::serve {

// Requests claimed under a lock, resumed when this goes out of scope or at
// ResumeNow: declare it before the lock guard, so the lock is released
// first. A claimed request is always resumed, even when the code that
// claimed it throws.
class Wakeups {
 public:
  Wakeups() = default;
  Wakeups(const Wakeups&) = delete;
  Wakeups& operator=(const Wakeups&) = delete;
  ~Wakeups() { ResumeNow(); }
  void Add(Parked* parked) { claimed_.push_back(parked); }
  void ResumeNow() {
    for (Parked* p : claimed_) p->Resume();
    claimed_.clear();
  }
  // Drops them unresumed: for requests whose connection is already gone.
  void Forget() { claimed_.clear(); }

 private:
  std::vector<Parked*> claimed_;
};

class Waiters {
 public:
  using Answer = std::function<std::optional<Reply>(const Parked::Wait& wait)>;

  // `drop_upload` frees a claimed upload's queued body (it takes only the
  // intake's lock); `log` writes one line.
  Waiters(const ServerOptions& options, Metrics* metrics,
          std::function<void(std::uint64_t upload)> drop_upload,
          std::function<void(const std::string&)> log);
  ~Waiters();
  void Start();  // the timer thread: deadlines and hang-ups

  // Parks `parked` for `wait` (Parked::Suspend), or answers why it will
  // not: 503 while stopping; for a plan wait over ServerOptions::max_waiting,
  // 204 + Retry-After (DeferWait; the rank asks again within `wait_s`); for
  // a Zeus schedule wait over ZeusWaitLimit, 503 naming the limit.
  std::optional<Reply> Park(Parked* parked, Parked::Wait wait, double wait_s);
  // Claims the waits on `job_id` that `answer` answers now, each with its
  // answer (resumed by `wakeups`).
  void Wake(const std::string& job_id, const Answer& answer, Wakeups* wakeups);
  // Claims every wait on `job_id`, to be told the job is gone ("deleted",
  // "evicted").
  void JobGone(const std::string& job_id, const std::string& reason, Wakeups* wakeups);
  // Whether upload `upload`'s request still waits for its answer; and that
  // answer (resumed at once; nothing if the request was claimed already).
  bool UploadWaiting(std::uint64_t upload) const;
  void AnswerUpload(std::uint64_t upload, Reply reply);

  // The transport: the answer of a resumed request (it never parks again);
  // and the request is done with (answered or hung up).
  Reply Resumed(Parked* parked);
  void Forget(Parked* parked);

  int waiting() const;
  int waiting_on(const std::string& job_id) const;
  int held_plan_waits() const;

  // Stop, first half: parks no more, resumes every parked request (to
  // answer 503) and waits up to `wait_s` for their answers to be sent.
  void BeginStop(double wait_s);
  void Finish();  // joins the timer

 private:
  // 204 + Retry-After + Connection: close for a plan wait over
  // ServerOptions::max_waiting. A rank told to come back that asks again
  // before its time is promised the same time: one rank holds one come-back
  // slot, however often it asks.
  Reply DeferWait(double wait_s, const std::string& job_id, int rank);
  // Removes `parked` from every index and records why; false if it was not
  // parked (someone else claimed it).
  bool Claim(Parked* parked, Parked::Outcome outcome, Wakeups* wakeups);
  void MarkAnswered(Parked::Wait& wait);
  void TimerLoop();

  const ServerOptions& options_;
  Metrics* metrics_;
  std::function<void(std::uint64_t)> drop_upload_;
  std::function<void(const std::string&)> log_;

  mutable std::mutex mu_;
  bool stopping_ = false;
  std::set<Parked*> parked_;
  std::map<std::string, std::set<Parked*>> by_job_;
  std::map<std::uint64_t, Parked*> uploads_;
  std::multimap<SteadyClock::time_point, Parked*> deadlines_;
  int held_plan_waits_ = 0;  // parked plan long polls (ServerOptions::max_waiting)
  int held_zeus_waits_ = 0;  // parked Zeus GET /schedule waits (ZeusWaitLimit)
  // The latest come-back time promised by a deferred wait: the next one is
  // promised 1/max_waiting s after it (and at least 1 s from now).
  SteadyClock::time_point last_comeback_{};
  // The come-back time promised to each (job, rank) told to come back, until
  // it passes (pruned as they do; at most the ranks promised a time ahead).
  std::map<std::pair<std::string, int>, SteadyClock::time_point> comebacks_;
  std::multimap<SteadyClock::time_point, std::pair<std::string, int>> comebacks_by_time_;
  int unanswered_ = 0;  // claimed and resumed, answer not yet sent
  std::condition_variable answered_cv_;
  std::condition_variable timer_cv_;
  std::thread timer_;
};

}  // namespace joulepipe::serve
