// The table of waiting requests: long polls for plans (and Zeus's
// schedule barrier), claiming and resuming them, and the timer thread
// (deadlines, hang-ups, eviction, solve time limits).
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "service.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

bool Service::Ready(const Parked::Wait& w, const Entry& e) const {
  if (w.intake != 0) return false;  // the intake thread answers it
  if (e.job.phase() == coord::JobPhase::kFailed) return true;
  if (w.zeus) return e.schedule_released && e.job.frontier() != nullptr;
  return e.job.plan_version() > w.after;
}

std::optional<Reply> Service::AnswerWait(const Parked::Wait& w) {
  if (w.reply) return w.reply;  // computed off the HTTP thread
  const auto it = jobs_.find(w.job_id);
  if (it == jobs_.end()) {
    return ErrorReply(404, Format("job %s was %s while the request waited",
                                  model::ExcerptText(w.job_id, 300).c_str(),
                                  w.gone_reason.empty() ? "removed" : w.gone_reason.c_str()));
  }
  const Entry& e = *it->second;
  if (!Ready(w, e)) return std::nullopt;
  if (e.job.phase() == coord::JobPhase::kFailed) {
    return ErrorReply(409, Format("planning job %s failed: %s; upload another profile (PUT "
                                  "/jobs/{id}/profile) to plan again",
                                  w.job_id.c_str(), ForApi(e.job.failure(), w.zeus).c_str()));
  }
  const std::optional<coord::RankPlan> plan = e.job.PlanFor(w.rank);
  if (!plan) return std::nullopt;
  return JsonReply(200, w.zeus ? FrequencyScheduleToJson(*plan) : RankPlanToJson(*plan, w.job_id));
}

Reply Service::DeferWait(double wait_s, const std::string& job_id, int rank) {
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
  metrics_.CountDeferredWait();
  Reply r = Plain(204, "");
  r.headers.emplace_back("Retry-After", Format("%.0f", after_s));
  r.headers.emplace_back("Connection", "close");
  return r;
}

void Service::Park(Parked* p) {
  if (!p->wait.zeus && p->wait.intake == 0) ++held_plan_waits_;
  if (p->wait.zeus) ++held_zeus_waits_;
  p->wait.registered = true;
  p->wait.outcome = Parked::Outcome::kNone;
  parked_.insert(p);
  jobs_.at(p->wait.job_id)->waiters.insert(p);
  if (p->wait.deadline) deadlines_.emplace(*p->wait.deadline, p);
  p->Suspend();
  timer_cv_.notify_one();
}

bool Service::Claim(Parked* p, Parked::Outcome outcome, std::vector<Parked*>* claimed) {
  Parked::Wait& w = p->wait;
  if (!w.registered) return false;
  w.registered = false;
  w.outcome = outcome;
  parked_.erase(p);
  if (!w.zeus && w.intake == 0) --held_plan_waits_;
  if (w.zeus) --held_zeus_waits_;
  if (w.intake != 0) {
    intake_waiters_.erase(w.intake);
    // Its answer exists (a hang-up, a deletion, the server stopping): the
    // body still queued for parsing is nobody's work any more.
    if (outcome != Parked::Outcome::kReady) DropIntake(w.intake);
  }
  const auto job = jobs_.find(w.job_id);
  if (job != jobs_.end()) job->second->waiters.erase(p);
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
  claimed->push_back(p);
  return true;
}

void Service::WakeReady(Entry& e, std::vector<Parked*>* claimed) {
  for (Parked* p : std::vector<Parked*>(e.waiters.begin(), e.waiters.end())) {
    if (Ready(p->wait, e)) Claim(p, Parked::Outcome::kReady, claimed);
  }
}

void Service::ResumeAll(const std::vector<Parked*>& claimed) {
  for (Parked* p : claimed) p->Resume();
}

std::optional<Reply> Service::GetPlan(const Request& r, Parked* parked, bool zeus) {
  const std::string q = zeus ? "ScheduleQuery" : "PlanQuery";
  const int rank = static_cast<int>(
      QueryInt(r, "rank", q + "::rank", std::nullopt, 0, std::numeric_limits<int>::max(),
               zeus ? "ask GET /schedule/{job_id}?rank=R" : "ask GET /jobs/{id}/plan?rank=R"));
  int after = 0;
  double wait_s = 0;
  if (!zeus) {
    after = static_cast<int>(
        QueryInt(r, "after", q + "::after", 0, 0, std::numeric_limits<int>::max(), ""));
    wait_s =
        QueryNumber(r, "wait_s", q + "::wait_s", coord::kDefaultPlanWaitS, 0, coord::kMaxPlanWaitS);
  }
  std::vector<Parked*> claimed;
  std::optional<Reply> reply;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const EntryPtr e = FindAndTouch(r.match.job_id);
    const std::string& id = e->job.config().job_id;
    if (e->job.ranks().count(rank) == 0) {
      throw InputError(
          q + "::rank",
          Format("rank %d is not registered with job %s; register it first (%s)", rank, id.c_str(),
                 zeus ? "POST /register_rank/{job_id}" : "POST /jobs/{id}/ranks"));
    }
    Parked::Wait w;
    w.zeus = zeus;
    w.job_id = id;
    w.rank = rank;
    w.after = after;
    if (!zeus) {
      w.deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                            std::chrono::duration<double>(wait_s));
    }
    if (zeus && e->schedule_asked.insert(rank).second) MaybeReleaseSchedule(*e, &claimed);
    reply = AnswerWait(w);
    if (!reply && !zeus && wait_s == 0) reply = Plain(204, "");
    if (!reply && stopping_) reply = Unavailable();
    if (!reply && !zeus && held_plan_waits_ >= options_.max_waiting)
      reply = DeferWait(wait_s, id, rank);
    if (!reply && zeus && held_zeus_waits_ >= ZeusWaitLimit(options_.max_connections)) {
      // Holding one more would leave no connection for anyone else (the
      // barrier may need more ranks than the server can hold): fail this
      // rank now, with the reason, rather than hang every rank for good.
      reply = ErrorReply(
          503,
          Format("this server already holds %d Zeus ranks waiting on GET /schedule, all the "
                 "connections it keeps for waiting ranks (ServerOptions::max_connections %d); "
                 "raise it above the job's world size",
                 held_zeus_waits_, options_.max_connections),
          "ServerOptions::max_connections");
    }
    if (!reply) {
      parked->wait = w;
      Park(parked);
    }
  }
  ResumeAll(claimed);
  return reply;
}

std::optional<Reply> Service::Resumed(const Request& r, Parked* parked) {
  (void)r;
  std::lock_guard<std::mutex> lock(mu_);
  Parked::Wait& w = parked->wait;
  // w.pending stays set until the answer is sent (Forget, from the
  // transport's completion callback): Stop waits for that, not just for
  // the answer to be queued.
  try {
    switch (w.outcome) {
      case Parked::Outcome::kStopping:
        return Unavailable();
      case Parked::Outcome::kHungUp:
        return ErrorReply(408, "the client hung up while waiting");
      default:
        break;
    }
    std::optional<Reply> reply = AnswerWait(w);
    if (reply) return reply;
    if (w.intake != 0) return ErrorReply(500, "internal error: an upload resumed unanswered");
    if (w.outcome == Parked::Outcome::kDeadline) return Plain(204, "");
    if (stopping_) return Unavailable();
    MarkAnswered(w);
    Park(parked);  // woken early (the plan changed back?): wait on
    return std::nullopt;
  } catch (const std::exception& e) {
    return ErrorReply(500, std::string("internal error: ") + e.what());
  }
}

void Service::Forget(Parked* p) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Parked*> ignored;
  Claim(p, Parked::Outcome::kHungUp, &ignored);
  MarkAnswered(p->wait);
}

void Service::MarkAnswered(Parked::Wait& w) {
  if (!w.pending) return;
  w.pending = false;
  --unanswered_;
  answered_cv_.notify_all();
}

void Service::TimerLoop() {
  const auto period = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(options_.evict_check_period_s));
  std::unique_lock<std::mutex> lock(mu_);
  SteadyClock::time_point next_evict = SteadyClock::now() + period;
  SteadyClock::time_point next_hangup = SteadyClock::now() + kHangUpCheck;
  while (!stopping_) {
    SteadyClock::time_point wake = next_evict;
    if (!deadlines_.empty()) wake = std::min(wake, deadlines_.begin()->first);
    if (!parked_.empty()) wake = std::min(wake, next_hangup);
    for (const auto& [id, planning] : planning_) {
      if (!planning.timed_out) wake = std::min(wake, planning.deadline);
    }
    timer_cv_.wait_until(lock, wake);
    if (stopping_) break;
    const SteadyClock::time_point now = SteadyClock::now();
    for (auto& [id, planning] : planning_) {
      if (!planning.timed_out && planning.deadline <= now) {
        planning.timed_out = true;
        planning.cancel->store(true);
        Log(Format("job %s: planning reached its time limit (%g s); cancelling it", id.c_str(),
                   options_.plan_time_limit_s));
      }
    }
    std::vector<Parked*> claimed;
    while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
      Claim(deadlines_.begin()->second, Parked::Outcome::kDeadline, &claimed);
    }
    if (now >= next_hangup) {
      // A parked connection is not read, so MHD cannot see its client go:
      // look for the hang-up here (POLLRDHUP: the peer closed its end).
      std::vector<Parked*> list(parked_.begin(), parked_.end());
      std::vector<pollfd> fds;
      std::vector<Parked*> polled;
      for (Parked* p : list) {
        const int fd = p->Socket();
        if (fd < 0) continue;
        fds.push_back({fd, POLLRDHUP, 0});
        polled.push_back(p);
      }
      if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
        for (std::size_t k = 0; k < fds.size(); ++k) {
          if ((fds[k].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
            Claim(polled[k], Parked::Outcome::kHungUp, &claimed);
          }
        }
      }
      next_hangup = now + kHangUpCheck;
    }
    if (now >= next_evict) {
      EvictAndFlush(&claimed);
      next_evict = now + period;
    }
    if (!claimed.empty()) {
      lock.unlock();
      ResumeAll(claimed);
      lock.lock();
    }
  }
}

}  // namespace joulepipe::serve
