// Service: life cycle, dispatch, the one error-to-status table, /healthz
// and /metrics. The routes live in the files named for their idea:
// job_registry.cpp, profile_intake.cpp, waiters.cpp, iteration_reports.cpp,
// zeus_routes.cpp, planner.cpp.
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

// ---- Life cycle --------------------------------------------------------------

Service::Service(const ServerOptions& options) : options_(options), store_(options.db_path) {
  model::Require(options.evict_after_s >= 0 && std::isfinite(options.evict_after_s),
                 "ServerOptions::evict_after_s",
                 Format("ServerOptions::evict_after_s must be >= 0 seconds, 0 for never (got %g)",
                        options.evict_after_s));
  model::Require(options.evict_check_period_s > 0, "ServerOptions::evict_check_period_s",
                 Format("ServerOptions::evict_check_period_s must be > 0 (got %g)",
                        options.evict_check_period_s));
  model::Require(
      options.max_jobs >= 1 && options.max_jobs <= 1'000'000, "ServerOptions::max_jobs",
      Format("ServerOptions::max_jobs must be 1..1000000 jobs (got %d)", options.max_jobs));
  model::Require(
      options.planners >= 1 && options.planners <= 64, "ServerOptions::planners",
      Format("ServerOptions::planners must be 1..64 planning threads (got %d)", options.planners));
  model::Require(std::isfinite(options.plan_time_limit_s) && options.plan_time_limit_s > 0 &&
                     options.plan_time_limit_s <= 7 * 86400,
                 "ServerOptions::plan_time_limit_s",
                 Format("ServerOptions::plan_time_limit_s must be > 0 seconds and at most a week "
                        "(got %g)",
                        options.plan_time_limit_s));
  model::Require(options.max_waiting >= 1 && options.max_waiting <= options.max_connections,
                 "ServerOptions::max_waiting",
                 Format("ServerOptions::max_waiting must be 1..max_connections (%d) plan waits "
                        "held at once (got %d)",
                        options.max_connections, options.max_waiting));
  model::Require(options.keep_alive_connections >= 0 &&
                     options.keep_alive_connections <= options.max_connections,
                 "ServerOptions::keep_alive_connections",
                 Format("ServerOptions::keep_alive_connections must be 0..max_connections (%d) "
                        "(got %d)",
                        options.max_connections, options.keep_alive_connections));
  const ZeusDefaults& z = options.zeus;
  model::Require(
      z.microbatches >= 0, "ZeusDefaults::microbatches",
      Format("ZeusDefaults::microbatches must be >= 1, or 0 for none (got %d)", z.microbatches));
  if (z.profile) {
    model::Require(z.microbatches > 0, "ZeusDefaults::microbatches",
                   "a default profile for Zeus jobs needs their schedule too: set "
                   "ZeusDefaults::microbatches");
    model::Require(z.p_block_w.has_value() || z.profile->metadata.p_block_w.has_value(),
                   "ZeusDefaults::p_block_w",
                   Format("%s has no p_block_w metadata line, so Zeus jobs could not be planned: "
                          "set ZeusDefaults::p_block_w (the GPU's power while blocked, W)",
                          z.profile_name.empty() ? "the default profile" : z.profile_name.c_str()));
    solver::CheckProfileRows(*z.profile,
                             z.profile_name.empty() ? "the default profile" : z.profile_name);
    if (options_.zeus.profile_csv.empty()) {
      options_.zeus.profile_csv = model::ProfileToCsv(*z.profile);
    }
  }
  if (options_.zeus.profile_name.empty()) options_.zeus.profile_name = "the default profile";

  std::unique_lock<std::mutex> lock(mu_);
  next_seq_ = store_.MaxSeq() + 1;
  for (const StoredJob& stored : store_.LoadAll()) {
    try {
      EntryPtr e = Replay(stored);
      jobs_[stored.id] = e;
      ++restored_;
      const coord::Job& job = e->job;
      Log(Format("job %s: restored (%s, %d of %lld ranks, plan version %d)", stored.id.c_str(),
                 coord::JobPhaseName(job.phase()), job.registered_ranks(),
                 static_cast<long long>(job.config().world_size), job.plan_version()));
      if (job.ready_to_plan()) QueuePlan(stored.id);
    } catch (const std::exception& e) {
      broken_[stored.id] = e.what();
      Log(
          Format("warning: job %s could not be restored from the state database: %s; its rows "
                 "are kept (DELETE /jobs/{id} removes them)",
                 stored.id.c_str(), e.what()));
    }
  }
  lock.unlock();
  for (int k = 0; k < options_.planners; ++k) {
    planners_.emplace_back([this] { PlannerLoop(); });
  }
  timer_ = std::thread([this] { TimerLoop(); });
  intake_ = std::thread([this] { IntakeLoop(); });
}

Service::~Service() {
  BeginStop(0);
  Finish();
}

void Service::BeginStop(double wait_s) {
  std::vector<Parked*> claimed;
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  for (auto& [id, planning] : planning_) planning.cancel->store(true);
  for (Parked* p : std::vector<Parked*>(parked_.begin(), parked_.end())) {
    Claim(p, Parked::Outcome::kStopping, &claimed);
  }
  planner_cv_.notify_all();
  timer_cv_.notify_all();
  intake_cv_.notify_all();
  lock.unlock();
  ResumeAll(claimed);
  lock.lock();
  answered_cv_.wait_for(lock, std::chrono::duration<double>(wait_s),
                        [&] { return unanswered_ == 0; });
}

// Writes the last-active times that changed since they were last written
// (one transaction); a failure is logged, the times are written next time.
void Service::SaveLastActive() {
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
    Log(std::string("warning: the jobs' last-active times were not saved: ") + e.what());
  }
}

void Service::Finish() {
  for (std::thread& planner : planners_) {
    if (planner.joinable()) planner.join();
  }
  if (timer_.joinable()) timer_.join();
  if (intake_.joinable()) intake_.join();
  std::lock_guard<std::mutex> lock(mu_);
  SaveLastActive();
}

int Service::jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(jobs_.size());
}

int Service::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(parked_.size());
}

double Service::NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Service::Log(const std::string& line) {
  if (!options_.log) return;
  std::lock_guard<std::mutex> lock(log_mu_);
  options_.log(line);
}

// ---- Dispatch ----------------------------------------------------------------

std::optional<Reply> Service::Handle(Request& r, Parked* parked) {
  const bool zeus = IsZeus(r.match.route);
  try {
    switch (r.match.route) {
      case Route::kHealthz:
        return Healthz();
      case Route::kMetrics:
        return MetricsText();
      case Route::kListJobs:
        return ListJobs();
      case Route::kCreateJob:
        return CreateJob(r);
      case Route::kGetJob:
        return GetJob(r);
      case Route::kDeleteJob:
        return DeleteJob(r);
      case Route::kRegisterRank:
        return RegisterRank(r, false);
      case Route::kPutProfile:
        return PutProfile(r, parked);
      case Route::kGetPlan:
        return GetPlan(r, parked, false);
      case Route::kReportIteration:
        return ReportIteration(r);
      case Route::kZeusInfo:
        return ZeusInfo();
      case Route::kZeusRegisterJob:
        return ZeusRegisterJob(r);
      case Route::kZeusRegisterRank:
        return RegisterRank(r, true);
      case Route::kZeusSchedule:
        return GetPlan(r, parked, true);
      case Route::kZeusResult:
        return ZeusResult(r);
      case Route::kMethodNotAllowed: {
        Reply reply = ErrorReply(
            405, Format("%s is not allowed here; this path takes %s",
                        model::ExcerptText(r.method, 20).c_str(), r.match.allowed.c_str()));
        reply.headers.emplace_back("Allow", r.match.allowed);
        return reply;
      }
      case Route::kNotFound:
        return ErrorReply(404,
                          "no such route; the routes are /healthz, /metrics, /jobs, "
                          "/jobs/{id}, /jobs/{id}/ranks, /jobs/{id}/profile, "
                          "/jobs/{id}/plan, /jobs/{id}/iterations and Zeus's /info, "
                          "/register_job, /register_rank/{id}, /schedule/{id}, "
                          "/result/{id} (docs/coordination.md)");
    }
    return ErrorReply(500, "internal error: unknown route");
  } catch (...) {
    return ErrorFor(std::current_exception(), zeus);
  }
}

// The one table from the library's error types to HTTP statuses (each
// mapping has a test in tests/serve): a route throws, this answers.
Reply Service::ErrorFor(std::exception_ptr error, bool zeus) {
  try {
    std::rethrow_exception(error);
  } catch (const HttpError& e) {
    return ErrorReply(e.status(), ForApi(e.what(), zeus), ForApi(e.field(), zeus));
  } catch (const coord::RankConflictError& e) {
    const InputError api = ForApi(e, zeus);
    return ErrorReply(409, api.what(), api.field());
  } catch (const InputError& e) {
    const InputError api = ForApi(e, zeus);
    return ErrorReply(400, api.what(), api.field());
  } catch (const coord::JobStateError& e) {
    return ErrorReply(409, ForApi(e.what(), zeus));
  } catch (const StoreError& e) {
    Log(std::string("error: ") + e.what());
    return ErrorReply(500, std::string(e.what()) + "; nothing was changed");
  } catch (const std::bad_alloc&) {
    return ErrorReply(500, "out of memory while handling the request; nothing was changed");
  } catch (const std::exception& e) {
    Log(std::string("error: internal error: ") + e.what());
    return ErrorReply(500, std::string("internal error: ") + e.what());
  } catch (...) {
    Log("error: internal error: an exception of unknown type");
    return ErrorReply(500, "internal error");
  }
}

Reply Service::Healthz() {
  std::lock_guard<std::mutex> lock(mu_);
  const double uptime = std::chrono::duration<double>(SteadyClock::now() - started_).count();
  return JsonReply(200, {{"ok", true},
                         {"service", "joulepipe serve"},
                         {"version", std::string(model::Version())},
                         {"jobs", jobs_.size()},
                         {"waiting_requests", parked_.size()},
                         {"planning_queue", plan_queue_.size()},
                         {"planning", planning_.size()},
                         {"persistent", store_.persistent()},
                         {"uptime_s", uptime}});
}

Reply Service::MetricsText() {
  Gauges g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (coord::JobPhase p :
         {coord::JobPhase::kWaitingForRanks, coord::JobPhase::kWaitingForProfile,
          coord::JobPhase::kReadyToPlan, coord::JobPhase::kPlanned, coord::JobPhase::kFailed}) {
      g.jobs_by_phase[coord::JobPhaseName(p)] = 0;
    }
    for (const auto& [id, e] : jobs_) {
      ++g.jobs_by_phase[coord::JobPhaseName(e->job.phase())];
      g.ranks += e->job.registered_ranks();
      g.saving_j_per_iteration += SavingInForce(e->job);
    }
    g.waiting_requests = static_cast<int>(parked_.size());
    g.planning = static_cast<int>(planning_.size());
    g.plan_queue = static_cast<int>(plan_queue_.size());
    g.plan_time_limit_s = options_.plan_time_limit_s;
    g.held_plan_waits = held_plan_waits_;
    g.max_waiting = options_.max_waiting;
  }
  g.open_connections = open_connections();
  Reply r;
  r.body = metrics_.Text(g);
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

}  // namespace joulepipe::serve
