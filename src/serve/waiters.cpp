#include "waiters.hpp"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "joulepipe/model/format.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;

Waiters::Waiters(const ServerOptions& options, Metrics* metrics,
                 std::function<void(std::uint64_t)> drop_upload,
                 std::function<void(const std::string&)> log)
    : options_(options),
      metrics_(metrics),
      drop_upload_(std::move(drop_upload)),
      log_(std::move(log)) {}

Waiters::~Waiters() {
  BeginStop(0);
  Finish();
}

void Waiters::Start() {
  timer_ = std::thread([this] { TimerLoop(); });
}

std::optional<Reply> Waiters::Park(Parked* p, Parked::Wait w, double wait_s) {
  using For = Parked::Wait::For;
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Unavailable();
  if (w.what == For::kPlan && held_plan_waits_ >= options_.max_waiting) {
    return DeferWait(wait_s, w.job_id, w.rank);
  }
  if (w.what == For::kSchedule && held_zeus_waits_ >= ZeusWaitLimit(options_.max_connections)) {
    // Holding one more would leave no connection for anyone else (the
    // barrier may need more ranks than the server can hold): fail this
    // rank now, with the reason, rather than hang every rank for good.
    return ErrorReply(
        503,
        Format("this server already holds %d Zeus ranks waiting on GET /schedule, all the "
               "connections it keeps for waiting ranks (ServerOptions::max_connections %d); "
               "raise it above the job's world size",
               held_zeus_waits_, options_.max_connections),
        "ServerOptions::max_connections");
  }
  if (w.what == For::kPlan) ++held_plan_waits_;
  if (w.what == For::kSchedule) ++held_zeus_waits_;
  w.registered = true;
  w.outcome = Parked::Outcome::kNone;
  p->wait = std::move(w);
  parked_.insert(p);
  by_job_[p->wait.job_id].insert(p);
  if (p->wait.what == For::kUpload) uploads_[p->wait.upload] = p;
  if (p->wait.deadline) deadlines_.emplace(*p->wait.deadline, p);
  p->Suspend();
  timer_cv_.notify_one();
  return std::nullopt;
}

Reply Waiters::DeferWait(double wait_s, const std::string& job_id, int rank) {
  // Spread the come-backs: at most max_waiting per second, none sooner than
  // 1 s, so the ranks told to come back never arrive as one burst. Beyond
  // the wait's own end the rank would only hear 204 again: promise no later.
  // A rank that asks again before its promised time keeps that time and
  // takes no further slot, so no rank can push the others' times out by
  // asking often (issue 41, 6): the schedule grows with the ranks waiting,
  // not with their requests.
  const SteadyClock::time_point now = SteadyClock::now();
  // Promises that came due are forgotten, oldest first (amortised O(log n)).
  while (!comebacks_by_time_.empty() && comebacks_by_time_.begin()->first <= now) {
    const auto due = comebacks_by_time_.begin();
    const auto it = comebacks_.find(due->second);
    if (it != comebacks_.end() && it->second == due->first) comebacks_.erase(it);
    comebacks_by_time_.erase(due);
  }
  SteadyClock::time_point& promised = comebacks_[{job_id, rank}];
  if (promised <= now) {
    const auto gap = std::chrono::duration_cast<SteadyClock::duration>(
        std::chrono::duration<double>(1.0 / options_.max_waiting));
    last_comeback_ = std::max(now + std::chrono::seconds(1), last_comeback_ + gap);
    promised = last_comeback_;
    comebacks_by_time_.emplace(promised, std::make_pair(job_id, rank));
  }
  const double in_s = std::chrono::duration<double>(promised - now).count();
  const double after_s = std::clamp(std::ceil(in_s), 1.0, std::max(1.0, std::ceil(wait_s)));
  metrics_->CountDeferredWait();
  Reply r = Plain(204, "");
  r.headers.emplace_back("Retry-After", Format("%.0f", after_s));
  r.headers.emplace_back("Connection", "close");
  return r;
}

bool Waiters::Claim(Parked* p, Parked::Outcome outcome, Wakeups* wakeups) {
  using For = Parked::Wait::For;
  Parked::Wait& w = p->wait;
  if (!w.registered) return false;
  w.registered = false;
  w.outcome = outcome;
  parked_.erase(p);
  if (w.what == For::kPlan) --held_plan_waits_;
  if (w.what == For::kSchedule) --held_zeus_waits_;
  if (w.what == For::kUpload) {
    uploads_.erase(w.upload);
    // Its answer exists (a hang-up, a deletion, the server stopping): the
    // body still queued for parsing is nobody's work any more.
    if (outcome != Parked::Outcome::kReady) drop_upload_(w.upload);
  }
  const auto job = by_job_.find(w.job_id);
  if (job != by_job_.end()) {
    job->second.erase(p);
    if (job->second.empty()) by_job_.erase(job);
  }
  if (w.deadline) {
    auto [begin, end] = deadlines_.equal_range(*w.deadline);
    for (auto it = begin; it != end; ++it) {
      if (it->second == p) {
        deadlines_.erase(it);
        break;
      }
    }
  }
  w.pending = true;
  ++unanswered_;
  wakeups->Add(p);
  return true;
}

void Waiters::Wake(const std::string& job_id, const Answer& answer, Wakeups* wakeups) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto job = by_job_.find(job_id);
  if (job == by_job_.end()) return;
  for (Parked* p : std::vector<Parked*>(job->second.begin(), job->second.end())) {
    std::optional<Reply> reply = answer(p->wait);
    if (!reply) continue;
    p->wait.reply = std::move(reply);
    Claim(p, Parked::Outcome::kReady, wakeups);
  }
}

void Waiters::JobGone(const std::string& job_id, const std::string& reason, Wakeups* wakeups) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto job = by_job_.find(job_id);
  if (job == by_job_.end()) return;
  for (Parked* p : std::vector<Parked*>(job->second.begin(), job->second.end())) {
    p->wait.gone_reason = reason;
    Claim(p, Parked::Outcome::kJobGone, wakeups);
  }
}

bool Waiters::UploadWaiting(std::uint64_t upload) const {
  std::lock_guard<std::mutex> lock(mu_);
  return uploads_.count(upload) != 0;
}

void Waiters::AnswerUpload(std::uint64_t upload, Reply reply) {
  Wakeups wake;
  std::lock_guard<std::mutex> lock(mu_);
  // The request may be gone (its client hung up, the job was deleted, the
  // server is stopping): then whoever claimed it answered it.
  const auto it = uploads_.find(upload);
  if (it == uploads_.end()) return;
  Parked* p = it->second;
  p->wait.reply = std::move(reply);
  Claim(p, Parked::Outcome::kReady, &wake);
}

Reply Waiters::Resumed(Parked* parked) {
  std::lock_guard<std::mutex> lock(mu_);
  // wait.pending stays set until the answer is sent (Forget, from the
  // transport's completion callback): Stop waits for that, not just for
  // the answer to be queued.
  const Parked::Wait& w = parked->wait;
  switch (w.outcome) {
    case Parked::Outcome::kStopping:
      return Unavailable();
    case Parked::Outcome::kHungUp:
      return ErrorReply(408, "the client hung up while waiting");
    case Parked::Outcome::kDeadline:
      return Plain(204, "");
    case Parked::Outcome::kJobGone:
      return ErrorReply(404, Format("job %s was %s while the request waited",
                                    model::ExcerptText(w.job_id, 300).c_str(),
                                    w.gone_reason.empty() ? "removed" : w.gone_reason.c_str()));
    case Parked::Outcome::kReady:
      if (w.reply) return *w.reply;
      break;
    case Parked::Outcome::kNone:
      break;
  }
  return ErrorReply(500, "internal error: a request resumed without its answer");
}

void Waiters::Forget(Parked* p) {
  std::lock_guard<std::mutex> lock(mu_);
  Wakeups gone;
  Claim(p, Parked::Outcome::kHungUp, &gone);  // a no-op unless it is still parked
  gone.Forget();                              // its connection is closed: nothing to resume
  MarkAnswered(p->wait);
}

void Waiters::MarkAnswered(Parked::Wait& w) {
  if (!w.pending) return;
  w.pending = false;
  --unanswered_;
  answered_cv_.notify_all();
}

int Waiters::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(parked_.size());
}

int Waiters::waiting_on(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_job_.find(job_id);
  return it == by_job_.end() ? 0 : static_cast<int>(it->second.size());
}

int Waiters::held_plan_waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_plan_waits_;
}

void Waiters::BeginStop(double wait_s) {
  Wakeups wake;
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  for (Parked* p : std::vector<Parked*>(parked_.begin(), parked_.end())) {
    Claim(p, Parked::Outcome::kStopping, &wake);
  }
  timer_cv_.notify_all();
  lock.unlock();
  wake.ResumeNow();
  lock.lock();
  answered_cv_.wait_for(lock, std::chrono::duration<double>(wait_s),
                        [&] { return unanswered_ == 0; });
}

void Waiters::Finish() {
  if (timer_.joinable()) timer_.join();
}

void Waiters::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  SteadyClock::time_point next_hangup = SteadyClock::now() + kHangUpCheck;
  while (!stopping_) {
    SteadyClock::time_point wake_at = SteadyClock::now() + std::chrono::hours(1);
    if (!deadlines_.empty()) wake_at = std::min(wake_at, deadlines_.begin()->first);
    if (!parked_.empty()) wake_at = std::min(wake_at, next_hangup);
    timer_cv_.wait_until(lock, wake_at);
    if (stopping_) break;
    const SteadyClock::time_point now = SteadyClock::now();
    Wakeups wake;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      Claim(deadlines_.begin()->second, Parked::Outcome::kDeadline, &wake);
    }
    if (now >= next_hangup) {
      // A parked connection is not read, so MHD cannot see its client go:
      // look for the hang-up here (POLLRDHUP: the peer closed its end).
      std::vector<pollfd> fds;
      std::vector<Parked*> polled;
      for (Parked* p : parked_) {
        const int fd = p->Socket();
        if (fd < 0) continue;
        fds.push_back({fd, POLLRDHUP, 0});
        polled.push_back(p);
      }
      if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
        for (std::size_t k = 0; k < fds.size(); ++k) {
          if ((fds[k].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
            Claim(polled[k], Parked::Outcome::kHungUp, &wake);
          }
        }
      }
      next_hangup = now + kHangUpCheck;
    }
    lock.unlock();
    wake.ResumeNow();
    lock.lock();
  }
}

}  // namespace joulepipe::serve
