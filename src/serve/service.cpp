#include "service.hpp"

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

namespace joulepipe::serve {

namespace {

using model::Format;
using model::InputError;
using nlohmann::json;

// An answer other than 400 decided by a route (404, 409, ...).
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message, std::string field = "")
      : std::runtime_error(message), status_(status), field_(std::move(field)) {}
  int status() const { return status_; }
  const std::string& field() const { return field_; }

 private:
  int status_;
  std::string field_;
};

constexpr auto kHangUpCheck = std::chrono::seconds(1);

Reply JsonReply(int status, const json& body) {
  Reply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Reply Plain(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Reply Unavailable() {
  Reply r = ErrorReply(503, "the server is stopping; retry in a moment");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

bool IsZeus(Route route) {
  return route == Route::kZeusInfo || route == Route::kZeusRegisterJob ||
         route == Route::kZeusRegisterRank || route == Route::kZeusSchedule ||
         route == Route::kZeusResult;
}

const std::string* QueryValue(const Request& r, const char* key) {
  for (const auto& [k, v] : r.query) {
    if (k == key) return &v;
  }
  return nullptr;
}

// A query parameter that is a whole number in [min, max].
std::int64_t QueryInt(const Request& r, const char* key, const std::string& field,
                      std::optional<std::int64_t> fallback, std::int64_t min, std::int64_t max,
                      const std::string& hint) {
  const std::string* v = QueryValue(r, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    throw InputError(field, Format("%s is missing; %s", field.c_str(), hint.c_str()));
  }
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE || n < min || n > max) {
    throw InputError(field, Format("%s must be a whole number, %lld..%lld (got '%s')",
                                   field.c_str(), static_cast<long long>(min),
                                   static_cast<long long>(max), model::ExcerptText(*v).c_str()));
  }
  return n;
}

double QueryNumber(const Request& r, const char* key, const std::string& field, double fallback,
                   double min, double max) {
  const std::string* v = QueryValue(r, key);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !std::isfinite(x) || x < min || x > max) {
    throw InputError(field, Format("%s must be a number of seconds, %g..%g (got '%s')",
                                   field.c_str(), min, max, model::ExcerptText(*v).c_str()));
  }
  return x;
}

// The first member where two configs differ, as "JobConfig::<key> (<a> registered,
// <b> given)".
std::pair<std::string, std::string> FirstDifference(const coord::JobConfig& a,
                                                    const coord::JobConfig& b) {
  const json ja = JobConfigToJson(a), jb = JobConfigToJson(b);
  for (const auto& [key, value] : ja.items()) {
    const auto other = jb.find(key);
    const json given = other == jb.end() ? json(nullptr) : *other;
    if (value != given) {
      return {"JobConfig::" + key,
              Format("JobConfig::%s: %s registered, %s given", key.c_str(),
                     model::Excerpt(value).c_str(), model::Excerpt(given).c_str())};
    }
  }
  for (const auto& [key, value] : jb.items()) {
    if (!ja.contains(key)) {
      return {"JobConfig::" + key, Format("JobConfig::%s: unset registered, %s given", key.c_str(),
                                          model::Excerpt(value).c_str())};
    }
  }
  return {"", ""};
}

// Instructions of one pipeline iteration.
std::int64_t PlanInstructions(const coord::JobConfig& c) {
  return 2LL * c.spec.stages * c.spec.microbatches * c.spec.chunks;
}

// What a solve costs, roughly (each deadline of the grid is a pass over
// the instructions): from a PreparePipelinePlan result.
double PlanWork(const solver::PipelinePlan& prepared) {
  const double deadlines = std::max(
      1.0, (prepared.slowest_s - prepared.baseline.time_s) / prepared.request.resolution_s);
  return static_cast<double>(prepared.schedule.num_nodes()) * deadlines;
}

// PlanWork for `profile` planned as `request`; -1 if it cannot be planned.
double EstimatePlanWork(const model::Profile& profile, const solver::PlanRequest& request) {
  try {
    return PlanWork(solver::PreparePipelinePlan(profile, request));
  } catch (const std::exception&) {
    return -1;
  }
}

bool Heavy(double plan_work) {
  return plan_work < 0 || plan_work > kLightPlanWork;
}

// The predicted saving per iteration (J) of the plan switch in force; 0 unplanned.
double SavingInForce(const coord::Job& job) {
  return job.switches().empty() ? 0 : job.switches().back().predicted_saving_j;
}

}  // namespace

Reply ErrorReply(int status, const std::string& message, const std::string& field) {
  return JsonReply(status,
                   {{"error", message}, {"field", field.empty() ? json(nullptr) : json(field)}});
}

// ---- Routes ------------------------------------------------------------------

namespace {

// The method as a metrics label: one of HTTP's own, else "OTHER". A label
// never carries what a client typed, so no request adds a series.
const char* MethodLabel(const std::string& method) {
  for (const char* known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    if (method == known) return known;
  }
  return "OTHER";
}

}  // namespace

RouteMatch RouteOf(const std::string& method, const std::vector<std::string>& s) {
  RouteMatch m;
  auto pick = [&](std::initializer_list<std::pair<const char*, Route>> methods,
                  const std::string& path) {
    std::string allowed;
    for (const auto& [verb, route] : methods) {
      allowed += (allowed.empty() ? "" : ", ") + std::string(verb);
      if (method == verb) {
        m.route = route;
        m.template_name = std::string(verb) + " " + path;
        return;
      }
    }
    m.route = Route::kMethodNotAllowed;
    m.template_name = std::string(MethodLabel(method)) + " " + path;
    m.allowed = allowed;
  };
  const std::size_t n = s.size();
  if (n == 1 && s[0] == "healthz") {
    pick({{"GET", Route::kHealthz}}, "/healthz");
  } else if (n == 1 && s[0] == "metrics") {
    pick({{"GET", Route::kMetrics}}, "/metrics");
  } else if (n == 1 && s[0] == "jobs") {
    pick({{"GET", Route::kListJobs}, {"POST", Route::kCreateJob}}, "/jobs");
  } else if (n == 2 && s[0] == "jobs") {
    m.job_id = s[1];
    pick({{"GET", Route::kGetJob}, {"DELETE", Route::kDeleteJob}}, "/jobs/{id}");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "ranks") {
    m.job_id = s[1];
    pick({{"POST", Route::kRegisterRank}}, "/jobs/{id}/ranks");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "profile") {
    m.job_id = s[1];
    pick({{"PUT", Route::kPutProfile}}, "/jobs/{id}/profile");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "plan") {
    m.job_id = s[1];
    pick({{"GET", Route::kGetPlan}}, "/jobs/{id}/plan");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "iterations") {
    m.job_id = s[1];
    pick({{"POST", Route::kReportIteration}}, "/jobs/{id}/iterations");
  } else if (n == 1 && s[0] == "info") {
    pick({{"GET", Route::kZeusInfo}}, "/info");
  } else if (n == 1 && s[0] == "register_job") {
    pick({{"POST", Route::kZeusRegisterJob}}, "/register_job");
  } else if (n == 2 && s[0] == "register_rank") {
    m.job_id = s[1];
    pick({{"POST", Route::kZeusRegisterRank}}, "/register_rank/{job_id}");
  } else if (n == 2 && s[0] == "schedule") {
    m.job_id = s[1];
    pick({{"GET", Route::kZeusSchedule}}, "/schedule/{job_id}");
  } else if (n == 2 && s[0] == "result") {
    m.job_id = s[1];
    pick({{"POST", Route::kZeusResult}}, "/result/{job_id}");
  } else {
    m.route = Route::kNotFound;
    m.template_name = "unknown";
  }
  return m;
}

std::size_t BodyLimit(Route route) {
  return route == Route::kPutProfile ? kMaxProfileBody : kMaxJsonBody;
}

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
      options.planners >= 1 && options.planners <= 64, "ServerOptions::planners",
      Format("ServerOptions::planners must be 1..64 planning threads (got %d)", options.planners));
  model::Require(std::isfinite(options.plan_time_limit_s) && options.plan_time_limit_s > 0 &&
                     options.plan_time_limit_s <= 7 * 86400,
                 "ServerOptions::plan_time_limit_s",
                 Format("ServerOptions::plan_time_limit_s must be > 0 seconds and at most a week "
                        "(got %g)",
                        options.plan_time_limit_s));
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

// ---- Jobs --------------------------------------------------------------------

Service::EntryPtr Service::Find(const std::string& id) {
  const auto it = jobs_.find(id);
  if (it != jobs_.end()) return it->second;
  const auto broken = broken_.find(id);
  if (broken != broken_.end()) {
    throw HttpError(409, Format("job %s is in the state database but could not be restored (%s); "
                                "DELETE /jobs/{id} removes it",
                                model::ExcerptText(id, 300).c_str(), broken->second.c_str()));
  }
  throw HttpError(
      404, Format("no job '%s' (GET /jobs lists the jobs)", model::ExcerptText(id, 300).c_str()));
}

void Service::Touch(Entry& e) {
  e.last_active_unix_s = NowUnix();
}

Service::EntryPtr Service::FindAndTouch(const std::string& id) {
  EntryPtr e = Find(id);
  Touch(*e);
  return e;
}

Service::EntryPtr Service::Insert(coord::JobConfig config, const model::Profile* profile,
                                  const std::string& csv) {
  const double now = NowUnix();
  auto e = std::make_shared<Entry>(std::move(config));
  e->seq = next_seq_;
  e->created_unix_s = e->last_active_unix_s = e->stored_last_active_unix_s = now;
  if (profile != nullptr) {
    e->job.SetProfile(*profile, csv);
    e->plan_work = EstimatePlanWork(*profile, e->job.PlanRequest());
  }
  const std::string& id = e->job.config().job_id;
  store_.Write([&] {
    store_.InsertJob(id, e->seq, JobConfigToJson(e->job.config()).dump(), now);
    if (profile != nullptr) store_.PutProfile(id, e->job.profile_csv());
  });
  ++next_seq_;
  jobs_[id] = e;
  const coord::JobConfig& c = e->job.config();
  Log(Format("job %s: registered (pp %d x dp %d x tp %d = %lld ranks; %s, %d microbatches%s)",
             id.c_str(), c.pp_degree, c.dp_degree, c.tp_degree,
             static_cast<long long>(c.world_size),
             std::string(schedule::KindName(c.spec.kind)).c_str(), c.spec.microbatches,
             profile != nullptr ? "; default profile attached" : ""));
  return e;
}

Service::EntryPtr Service::Replay(const StoredJob& stored) {
  const std::string what = "the stored config of job " + stored.id;
  coord::JobConfig config = JobConfigFromJson(model::ParseJsonBounded(stored.config_json, what));
  if (config.job_id != stored.id) {
    throw InputError("JobConfig::job_id", what + " names another job (" + config.job_id + ")");
  }
  auto e = std::make_shared<Entry>(std::move(config));
  for (const auto& [rank, info] : stored.ranks) {
    e->job.RegisterRank(RankInfoFromJson(
        model::ParseJsonBounded(info, Format("stored rank %d of job %s", rank, stored.id.c_str())),
        true));
  }
  if (stored.profile_csv) {
    e->job.SetProfile(
        model::ParseProfileCsv(*stored.profile_csv, "the stored profile of job " + stored.id),
        *stored.profile_csv);
    if (!stored.frontier_json && stored.failure.empty()) {
      e->plan_work = EstimatePlanWork(*e->job.profile(), e->job.PlanRequest());
    }
  }
  if (stored.frontier_json) {
    std::vector<coord::PlanSwitch> switches;
    for (const std::string& s : stored.switches_json) {
      switches.push_back(coord::SwitchFromJson(
          model::ParseJsonBounded(s, "a stored plan switch of job " + stored.id)));
    }
    e->job.RestorePlan(
        model::ParseJsonBounded(*stored.frontier_json, "the stored frontier of job " + stored.id),
        switches);
  } else if (!stored.failure.empty()) {
    e->job.SetPlanFailed(stored.failure);
  }
  e->seq = stored.seq;
  e->created_unix_s = stored.created_unix_s;
  e->last_active_unix_s = e->stored_last_active_unix_s = stored.last_active_unix_s;
  e->schedule_released = stored.schedule_released;
  return e;
}

void Service::Reload(const std::string& id) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  try {
    std::optional<StoredJob> stored = store_.Load(id);
    if (!stored) {
      Log(
          Format("error: job %s is missing from the state database; it lives on in memory "
                 "until the server stops",
                 id.c_str()));
      return;
    }
    EntryPtr fresh = Replay(*stored);
    it->second->job = std::move(fresh->job);
    it->second->schedule_released = fresh->schedule_released;
    ++it->second->profile_generation;
  } catch (const std::exception& e) {
    Log(
        Format("error: job %s could not be reloaded after a failed write (%s); its state in "
               "memory may be ahead of the database until restart",
               id.c_str(), e.what()));
  }
}

void Service::Remove(const std::string& id, const std::string& reason,
                     std::vector<Parked*>* claimed) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  for (Parked* p : std::vector<Parked*>(it->second->waiters.begin(), it->second->waiters.end())) {
    p->wait.gone_reason = reason;
    Claim(p, Parked::Outcome::kJobGone, claimed);
  }
  jobs_.erase(it);
  plan_queue_.erase(std::remove(plan_queue_.begin(), plan_queue_.end(), id), plan_queue_.end());
}

void Service::QueuePlan(const std::string& id) {
  if (std::find(plan_queue_.begin(), plan_queue_.end(), id) == plan_queue_.end()) {
    plan_queue_.push_back(id);
  }
  planner_cv_.notify_all();
}

// One iteration report into the job: counted in the metrics (with the
// saving of the plan in force); a switch it causes is stored and wakes the
// job's waiters (claimed, to be resumed once mu_ is released). mu_ held.
void Service::FeedReport(Entry& e, const coord::IterationReport& report,
                         std::vector<Parked*>* claimed) {
  coord::Job& job = e.job;
  const std::int64_t before = job.completed_iterations();
  const double saving = SavingInForce(job);
  const std::optional<coord::PlanSwitch> s = job.ReportIteration(report, NowUnix());
  metrics_.CountReport(job.completed_iterations() - before, saving);
  if (s) {
    StoreSwitch(e, *s);
    WakeReady(e, claimed);
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
  }
  Reply r;
  r.body = metrics_.Text(g);
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

Reply Service::ListJobs() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EntryPtr> entries;
  for (const auto& [id, e] : jobs_) entries.push_back(e);
  std::sort(entries.begin(), entries.end(),
            [](const EntryPtr& a, const EntryPtr& b) { return a->seq < b->seq; });
  json list = json::array();
  for (const EntryPtr& e : entries) {
    const coord::Job& job = e->job;
    list.push_back({{"job_id", job.config().job_id},
                    {"phase", coord::JobPhaseName(job.phase())},
                    {"registered_ranks", job.registered_ranks()},
                    {"world_size", job.config().world_size},
                    {"plan_version", job.plan_version()},
                    {"created_unix_s", e->created_unix_s},
                    {"last_active_unix_s", e->last_active_unix_s}});
  }
  return JsonReply(200, {{"jobs", std::move(list)}});
}

Reply Service::CreateJob(const Request& r) {
  coord::JobConfig config = JobConfigFromJson(ParseBody(r.body));
  const bool assigned = config.job_id.empty();
  if (assigned) {
    config.job_id = ZeusStyleJobId(config.dp_degree, config.pp_degree, config.tp_degree,
                                   config.metadata, static_cast<std::int64_t>(NowUnix()));
  }
  coord::CheckJobConfig(&config);  // every check; world_size filled in
  std::lock_guard<std::mutex> lock(mu_);
  if (!assigned) {
    const auto it = jobs_.find(config.job_id);
    if (it != jobs_.end()) {
      Touch(*it->second);
      if (it->second->job.config() == config) {
        return JsonReply(200, {{"job_id", config.job_id}});
      }
      const auto [field, difference] = FirstDifference(it->second->job.config(), config);
      throw HttpError(409,
                      Format("job %s is already registered with another configuration (%s); "
                             "register it under a new job_id, or leave job_id out to get one",
                             config.job_id.c_str(), difference.c_str()),
                      field);
    }
    if (broken_.count(config.job_id) != 0) Find(config.job_id);  // throws its 409
  } else {
    config.job_id = UniqueId(config.job_id);
  }
  const EntryPtr e = Insert(std::move(config), nullptr, "");
  return JsonReply(200, {{"job_id", e->job.config().job_id}});
}

std::string Service::UniqueId(const std::string& base) const {
  auto taken = [&](const std::string& id) {
    return jobs_.count(id) != 0 || broken_.count(id) != 0;
  };
  if (!taken(base)) return base;
  for (int k = 2;; ++k) {
    const std::string suffix = Format("+%d", k);
    std::string id = base.substr(0, coord::kMaxJobIdLength - suffix.size()) + suffix;
    if (!taken(id)) return id;
  }
}

Reply Service::GetJob(const Request& r) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(r.match.job_id);
  const coord::Job& job = e->job;
  json j = job.StatusJson();
  j["created_unix_s"] = e->created_unix_s;
  j["last_active_unix_s"] = e->last_active_unix_s;
  j["waiting_requests"] = e->waiters.size();
  if (const solver::Frontier* f = job.frontier()) {
    json pipelines = json::array();
    const std::vector<double>* slow = job.detector() ? &job.detector()->slowdowns() : nullptr;
    for (std::size_t p = 0; p < job.point_of_pipeline().size(); ++p) {
      const int point = job.point_of_pipeline()[p];
      pipelines.push_back({{"pipeline", p},
                           {"point", point},
                           {"time_s", f->points[point].time_s},
                           {"energy_j", f->points[point].energy_j},
                           {"slowdown", slow != nullptr && p < slow->size() ? (*slow)[p] : 1.0}});
    }
    j["pipelines"] = std::move(pipelines);
  }
  {
    const auto running = planning_.find(e->job.config().job_id);
    const bool queued = std::find(plan_queue_.begin(), plan_queue_.end(), e->job.config().job_id) !=
                        plan_queue_.end();
    j["planning"] = {{"state", running != planning_.end() ? "running"
                               : queued                   ? "queued"
                                                          : "idle"},
                     {"running_s", running != planning_.end()
                                       ? json(std::chrono::duration<double>(SteadyClock::now() -
                                                                            running->second.started)
                                                  .count())
                                       : json(nullptr)},
                     {"time_limit_s", options_.plan_time_limit_s},
                     {"instructions", PlanInstructions(e->job.config())},
                     {"work", e->plan_work >= 0 ? json(e->plan_work) : json(nullptr)},
                     {"heavy", Heavy(e->plan_work)}};
  }
  j["zeus"] = {{"schedule_asked", e->schedule_asked.size()},
               {"schedule_released", e->schedule_released}};
  return JsonReply(200, j);
}

Reply Service::DeleteJob(const Request& r) {
  std::vector<Parked*> claimed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string& id = r.match.job_id;
    if (broken_.count(id) != 0) {
      store_.Write([&] { store_.DeleteJob(id); });
      broken_.erase(id);
      Log(Format("job %s: deleted (it could not be restored)", id.c_str()));
      return JsonReply(200, {{"deleted", id}});
    }
    Find(id);
    store_.Write([&] { store_.DeleteJob(id); });
    Remove(id, "deleted", &claimed);
    Log(Format("job %s: deleted", id.c_str()));
  }
  ResumeAll(claimed);
  return JsonReply(200, {{"deleted", r.match.job_id}});
}

Reply Service::RegisterRank(const Request& r, bool zeus) {
  const coord::RankInfo info = RankInfoFromJson(ParseBody(r.body), /*strict=*/!zeus);
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(r.match.job_id);
  coord::Job& job = e->job;
  const std::string& id = job.config().job_id;
  // A conflict with what is registered is a coord::RankConflictError: 409.
  if (job.RegisterRank(info)) {
    try {
      store_.Write([&] { store_.PutRank(id, info.rank, RankInfoToJson(info).dump()); });
    } catch (const StoreError&) {
      Reload(id);
      throw;
    }
    if (job.all_ranks_registered()) {
      Log(Format("job %s: all %lld ranks registered%s", id.c_str(),
                 static_cast<long long>(job.config().world_size),
                 job.has_profile() ? "" : "; waiting for a profile (PUT /jobs/{id}/profile)"));
    }
    if (job.ready_to_plan()) QueuePlan(id);
  }
  return zeus ? Plain(200, "null") : JsonReply(200, json::object());
}

// A profile upload is parsed and checked on the intake thread, not on the
// HTTP thread: the request is parked (its connection suspended) until its
// answer exists, so a 64 MiB upload stalls no other request.
std::optional<Reply> Service::PutProfile(Request& r, Parked* parked) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(r.match.job_id);
  if (e->job.phase() == coord::JobPhase::kPlanned) {
    throw coord::JobStateError(
        Format("job %s is planned already; its profile cannot change (register a new job to "
               "plan with another profile)",
               e->job.config().job_id.c_str()));
  }
  if (stopping_) return Unavailable();
  Intake item;
  item.id = next_intake_++;
  item.job_id = e->job.config().job_id;
  item.body = std::move(r.body);
  Parked::Wait w;
  w.job_id = item.job_id;
  w.intake = item.id;
  parked->wait = w;
  Park(parked);
  intake_waiters_[item.id] = parked;
  intake_queue_.push_back(std::move(item));
  intake_cv_.notify_one();
  return std::nullopt;
}

void Service::IntakeLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    intake_cv_.wait(lock, [&] { return stopping_ || !intake_queue_.empty(); });
    if (stopping_) return;
    Intake item = std::move(intake_queue_.front());
    intake_queue_.pop_front();
    lock.unlock();
    Reply reply;
    try {
      reply = ApplyProfile(item.job_id, std::move(item.body));
    } catch (...) {
      reply = ErrorFor(std::current_exception(), false);
    }
    lock.lock();
    // The request may be gone (its client hung up, the job was deleted,
    // the server is stopping): then whoever claimed it answered it.
    const auto waiter = intake_waiters_.find(item.id);
    if (waiter == intake_waiters_.end()) continue;
    Parked* p = waiter->second;
    std::vector<Parked*> claimed;
    p->wait.reply = std::move(reply);
    Claim(p, Parked::Outcome::kReady, &claimed);
    lock.unlock();
    ResumeAll(claimed);
    lock.lock();
  }
}

Reply Service::ApplyProfile(const std::string& job_id, std::string body) {
  solver::PlanRequest request;
  EntryPtr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = FindAndTouch(job_id);
    if (e->job.phase() == coord::JobPhase::kPlanned) {
      throw coord::JobStateError(
          Format("job %s is planned already; its profile cannot change (register a new job to "
                 "plan with another profile)",
                 e->job.config().job_id.c_str()));
    }
    request = e->job.PlanRequest();
  }
  // Parsing and the profile's checks (the cheap half of planning) run
  // outside the lock, on the intake thread.
  model::Profile profile = model::ParseProfileCsv(body, "the uploaded profile");
  const double work = PlanWork(solver::PreparePipelinePlan(profile, request));
  const int rows = profile.num_rows();
  const int stages = profile.num_stages();

  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) throw HttpError(503, "the server is stopping; nothing was changed; retry");
  const EntryPtr now = Find(job_id);
  if (now != e) throw HttpError(404, "job " + job_id + " was deleted during the upload");
  const std::string& id = e->job.config().job_id;
  e->job.SetProfile(std::move(profile), std::move(body));  // JobStateError once planned
  ++e->profile_generation;
  e->plan_work = work;
  try {
    store_.Write([&] {
      store_.PutProfile(id, e->job.profile_csv());
      store_.SetFailure(id, "");
    });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  Log(Format("job %s: profile set (%d rows, %d stages)%s", id.c_str(), rows, stages,
             e->job.ready_to_plan()
                 ? ""
                 : Format("; waiting for ranks (%d of %lld registered)", e->job.registered_ranks(),
                          static_cast<long long>(e->job.config().world_size))
                       .c_str()));
  if (e->job.ready_to_plan()) QueuePlan(id);
  return JsonReply(200, {{"rows", rows}});
}

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

void Service::Park(Parked* p) {
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
  if (w.intake != 0) intake_waiters_.erase(w.intake);
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

void Service::MaybeReleaseSchedule(Entry& e, std::vector<Parked*>* claimed) {
  const coord::Job& job = e.job;
  if (!e.schedule_released &&
      static_cast<std::int64_t>(e.schedule_asked.size()) == job.config().world_size) {
    const std::string& id = job.config().job_id;
    try {
      store_.Write([&] { store_.SetScheduleReleased(id); });
    } catch (const StoreError& error) {
      // The barrier stays closed (memory follows the store); the next rank
      // to ask tries again.
      Log(Format("error: job %s: opening the schedule barrier failed: %s", id.c_str(),
                 error.what()));
      return;
    }
    e.schedule_released = true;
    Log(Format("job %s: every rank asked for its schedule%s", id.c_str(),
               job.frontier() != nullptr ? "; answering all" : "; they wait for the plan"));
  }
  WakeReady(e, claimed);
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

void Service::StoreSwitch(Entry& e, const coord::PlanSwitch& s) {
  const std::string& id = e.job.config().job_id;
  try {
    store_.Write([&] { store_.PutSwitch(id, s.version, coord::SwitchToJson(s).dump()); });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  metrics_.CountSwitch();
  Log(Format("job %s: plan version %d from iteration %lld: %s", id.c_str(), s.version,
             static_cast<long long>(s.iteration), s.reason.c_str()));
}

Reply Service::ReportIteration(const Request& r) {
  const coord::IterationReport report = IterationReportFromJson(ParseBody(r.body));
  std::vector<Parked*> claimed;
  int version = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const EntryPtr e = FindAndTouch(r.match.job_id);
    coord::Job& job = e->job;
    FeedReport(*e, report, &claimed);
    version = job.plan_version();
  }
  ResumeAll(claimed);
  return JsonReply(200, {{"plan_version", version}});
}

Reply Service::ZeusInfo() {
  const ZeusDefaults& z = options_.zeus;
  json defaults = nullptr;
  if (z.microbatches > 0) {
    defaults = {{"schedule", std::string(schedule::KindName(z.kind))},
                {"microbatches", z.microbatches},
                {"chunks", z.chunks},
                {"p_block_w", z.p_block_w ? json(*z.p_block_w) : json(nullptr)},
                {"profile", z.profile ? json(z.profile_name) : json(nullptr)},
                {"profile_stages", z.profile ? json(z.profile->num_stages()) : json(nullptr)}};
  }
  std::lock_guard<std::mutex> lock(mu_);
  return JsonReply(200,
                   {{"service", "joulepipe serve"},
                    {"version", std::string(model::Version())},
                    {"scheduler", "joulepipe"},
                    {"compatible_with", "zeus 0.16.0 pipeline frequency optimizer (PFO) server"},
                    {"zeus_defaults", defaults},
                    {"jobs", jobs_.size()},
                    {"docs", "docs/coordination.md"}});
}

Reply Service::ZeusRegisterJob(const Request& r) {
  const ZeusJobInfo info = JobInfoFromJson(ParseBody(r.body));
  const ZeusDefaults& z = options_.zeus;
  if (z.microbatches <= 0) {
    throw HttpError(400,
                    "this server has no schedule for Zeus-registered jobs (ZeusDefaults::"
                    "microbatches is unset): Zeus's JobInfo carries only the parallel degrees. "
                    "Register the job with POST /jobs instead, or start the server with Zeus "
                    "defaults (docs/coordination.md, \"Zeus compatibility\")",
                    "ZeusDefaults::microbatches");
  }
  coord::JobConfig c;
  c.job_id = ZeusStyleJobId(info.dp_degree, info.pp_degree, info.tp_degree, info.metadata,
                            static_cast<std::int64_t>(NowUnix()));
  c.pp_degree = info.pp_degree;
  c.dp_degree = info.dp_degree;
  c.tp_degree = info.tp_degree;
  c.world_size = info.world_size;
  c.spec.kind = z.kind;
  c.spec.stages = info.pp_degree;
  c.spec.microbatches = z.microbatches;
  c.spec.chunks = z.chunks;
  c.p_block_w = z.p_block_w;
  c.metadata = info.metadata;
  const coord::Job probe(c);  // every check
  if (z.profile) {
    // The default profile must fit this job's pipeline.
    solver::PlanRequest request = probe.PlanRequest();
    request.profile_name = z.profile_name;
    solver::PreparePipelinePlan(*z.profile, request);
  }
  std::lock_guard<std::mutex> lock(mu_);
  c.job_id = UniqueId(c.job_id);
  const EntryPtr e = Insert(std::move(c), z.profile ? &*z.profile : nullptr, z.profile_csv);
  return Plain(200, json(e->job.config().job_id).dump());
}

Reply Service::ZeusResult(const Request& r) {
  const ZeusProfilingResult result = ProfilingResultFromJson(ParseBody(r.body));
  std::vector<Parked*> claimed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const EntryPtr e = FindAndTouch(r.match.job_id);
    coord::Job& job = e->job;
    if (job.ranks().count(result.rank) == 0) {
      throw InputError("ProfilingResult::rank",
                       Format("rank %d is not registered with job %s; register it first (POST "
                              "/register_rank/{job_id})",
                              result.rank, job.config().job_id.c_str()));
    }
    std::int64_t& next = e->zeus_iteration[result.rank];
    for (std::size_t k = 0; k < result.iter_time.size(); ++k) {
      coord::IterationReport report;
      report.rank = result.rank;
      report.iteration = next++;
      report.time_s = result.iter_time[k];
      if (!result.iter_energy.empty()) report.energy_j = result.iter_energy[k];
      FeedReport(*e, report, &claimed);
    }
  }
  ResumeAll(claimed);
  return Plain(200, "null");
}

// ---- Background threads --------------------------------------------------------

std::optional<std::string> Service::TakeNextPlan() {
  // Ids of jobs gone or no longer ready leave the queue here.
  plan_queue_.erase(std::remove_if(plan_queue_.begin(), plan_queue_.end(),
                                   [&](const std::string& id) {
                                     const auto it = jobs_.find(id);
                                     return it == jobs_.end() || !it->second->job.ready_to_plan();
                                   }),
                    plan_queue_.end());
  const bool heavy_may_start = heavy_planning_ < std::max(1, options_.planners - 1);
  auto best = plan_queue_.end();
  double best_cost = 0;
  for (auto it = plan_queue_.begin(); it != plan_queue_.end(); ++it) {
    if (planning_.count(*it) != 0) continue;  // solving an older profile; queued again after
    const double work = jobs_.at(*it)->plan_work;
    if (Heavy(work) && !heavy_may_start) continue;
    const double cost = work < 0 ? std::numeric_limits<double>::infinity() : work;
    if (best == plan_queue_.end() || cost < best_cost) {
      best = it;
      best_cost = cost;
    }
  }
  if (best == plan_queue_.end()) return std::nullopt;
  std::string id = *best;
  plan_queue_.erase(best);
  return id;
}

void Service::PlannerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::optional<std::string> next;
    planner_cv_.wait(lock, [&] {
      if (stopping_) return true;
      next = TakeNextPlan();
      return next.has_value();
    });
    if (stopping_) return;
    PlanOne(*next, lock);
    planner_cv_.notify_all();  // a heavy job's slot, or a job re-queued meanwhile
  }
}

// Solves job `id`'s frontier with mu_ released, under its time limit, and
// installs the plan or the failure. Called and returns with mu_ held.
void Service::PlanOne(const std::string& id, std::unique_lock<std::mutex>& lock) {
  const EntryPtr e = jobs_.at(id);
  const std::shared_ptr<const model::Profile> profile = e->job.shared_profile();
  solver::PlanRequest request = e->job.PlanRequest();
  const std::uint64_t generation = e->profile_generation;
  const coord::JobConfig& c = e->job.config();
  const bool heavy = Heavy(e->plan_work);
  Planning& planning = planning_[id];
  planning.started = SteadyClock::now();
  planning.deadline =
      planning.started + std::chrono::duration_cast<SteadyClock::duration>(
                             std::chrono::duration<double>(options_.plan_time_limit_s));
  planning.cancel = std::make_shared<std::atomic<bool>>(false);
  planning.heavy = heavy;
  if (heavy) ++heavy_planning_;
  const std::shared_ptr<std::atomic<bool>> cancel = planning.cancel;
  timer_cv_.notify_one();  // it watches the deadline
  Log(Format("job %s: planning (%s, %d stages, %d microbatches%s; time limit %g s)", id.c_str(),
             std::string(schedule::KindName(c.spec.kind)).c_str(), c.spec.stages,
             c.spec.microbatches, heavy ? "; a heavy job" : "", options_.plan_time_limit_s));
  lock.unlock();

  request.cancel = cancel.get();
  std::string phase;
  request.progress = [&](const char* now, double) {
    if (phase != now) {
      phase = now;
      Log(Format("job %s: planning: %s", id.c_str(), now));
    }
  };
  std::optional<solver::PipelinePlan> plan;
  std::string failure;
  bool cancelled = false;
  const SteadyClock::time_point start = SteadyClock::now();
  try {
    plan = solver::PlanPipeline(*profile, request);
  } catch (const model::Cancelled&) {
    cancelled = true;
  } catch (const InputError& error) {
    failure = ForApi(error.what(), false);
  } catch (const std::bad_alloc&) {
    failure = "out of memory while solving the frontier";
  } catch (const std::exception& error) {
    failure = std::string("internal error while solving: ") + error.what();
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  lock.lock();
  const bool timed_out = planning_.at(id).timed_out;
  planning_.erase(id);
  if (heavy) --heavy_planning_;
  if (cancelled && !timed_out) {
    Log(Format("job %s: planning cancelled; it is planned again at the next start", id.c_str()));
    return;
  }
  if (timed_out) {
    metrics_.CountPlanTimeout();
    failure = Format(
        "planning took longer than its time limit of %g s (ServerOptions::plan_time_limit_s, "
        "joulepipe serve --plan-time-limit) and was cancelled; the job plans %lld instructions "
        "per iteration: plan it with a coarser frontier grid (JobConfig::resolution_s) or fewer "
        "microbatches, or raise the limit",
        options_.plan_time_limit_s, static_cast<long long>(PlanInstructions(c)));
  }
  metrics_.ObserveSolve(seconds, plan.has_value());
  const auto still = jobs_.find(id);
  if (still == jobs_.end() || still->second != e || e->profile_generation != generation) {
    Log(Format("job %s: plan discarded: the job changed while it was solved", id.c_str()));
    return;
  }
  std::vector<Parked*> claimed;
  try {
    if (plan) {
      e->job.SetPlan(*plan, NowUnix());
      store_.Write([&] {
        store_.PutFrontier(id, e->job.FrontierToJson().dump());
        store_.PutSwitch(id, 1, coord::SwitchToJson(e->job.switches().front()).dump());
        store_.SetFailure(id, "");
      });
      const solver::FrontierPoint& q = plan->chosen_point();
      Log(
          Format("job %s: planned in %.2f s: %zu frontier points; every pipeline runs %.4f s, "
                 "%.1f J per iteration (all max clocks: %.4f s, %.1f J)",
                 id.c_str(), seconds, plan->frontier.points.size(), q.time_s, q.energy_j,
                 plan->baseline.time_s, plan->baseline.energy_j));
    } else {
      e->job.SetPlanFailed(failure);
      store_.Write([&] { store_.SetFailure(id, failure); });
      Log(Format("job %s: planning failed: %s", id.c_str(), failure.c_str()));
    }
  } catch (const std::exception& error) {
    Log(
        Format("error: job %s: the plan could not be stored (%s); the job is planned again at "
               "the next start",
               id.c_str(), error.what()));
    Reload(id);
  }
  WakeReady(*e, &claimed);
  MaybeReleaseSchedule(*e, &claimed);
  lock.unlock();
  ResumeAll(claimed);
  lock.lock();
}

void Service::EvictAndFlush(std::vector<Parked*>* claimed) {
  const double now = NowUnix();
  if (options_.evict_after_s > 0) {
    std::vector<std::string> idle;
    for (const auto& [id, e] : jobs_) {
      if (e->waiters.empty() && now - e->last_active_unix_s > options_.evict_after_s) {
        idle.push_back(id);
      }
    }
    for (const std::string& id : idle) {
      const double idle_s = now - jobs_.at(id)->last_active_unix_s;
      try {
        store_.Write([&] { store_.DeleteJob(id); });
      } catch (const StoreError& error) {
        Log(Format("error: job %s could not be evicted: %s", id.c_str(), error.what()));
        continue;
      }
      Remove(id, "evicted", claimed);
      Log(Format("job %s: evicted after %.0f s without a request", id.c_str(), idle_s));
    }
  }
  SaveLastActive();
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
