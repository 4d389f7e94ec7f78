// Jobs, the registry: lookup, insertion with its store write,
// replay from the store and reload after a failed write, removal and
// eviction, and the work of the routes that list, create, show and delete
// jobs and register ranks.
#include <algorithm>
#include <chrono>
#include <utility>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "jobs.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

namespace {

// The work of a job's own profile; -1 if it cannot be planned.
double EstimatePlanWork(const coord::Job& job) {
  try {
    return coord::PlanWork(*job.profile(), job.PlanRequest());
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

// ---- The registry ------------------------------------------------------------

Jobs::EntryPtr Jobs::Find(const std::string& id) const {
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

Jobs::EntryPtr Jobs::FindAndTouch(const std::string& id) {
  EntryPtr e = Find(id);
  e->last_active_unix_s = NowUnix();
  return e;
}

Jobs::EntryPtr Jobs::Insert(protocol::JobConfig config, const model::Profile* profile) {
  if (jobs_.size() >= static_cast<std::size_t>(options_.max_jobs)) {
    // Every job costs memory (its profile above all) until it is deleted or
    // evicted: the table is bounded (issue 41, 9).
    throw HttpError(503,
                    Format("the server holds %zu jobs, its limit (ServerOptions::max_jobs); "
                           "delete finished ones (DELETE /jobs/{id}) or ask its operator to "
                           "raise the limit",
                           jobs_.size()),
                    "ServerOptions::max_jobs");
  }
  const double now = NowUnix();
  auto e = std::make_shared<Entry>(std::move(config));
  e->seq = next_seq_;
  e->created_unix_s = e->last_active_unix_s = e->stored_last_active_unix_s = now;
  if (profile != nullptr) {
    e->job.SetProfile(*profile);
    e->plan_work = EstimatePlanWork(e->job);
  }
  const std::string& id = e->job.config().job_id;
  store_.Write([&] {
    store_.InsertJob(id, e->seq, protocol::JobConfigToJson(e->job.config()).dump(), now);
    if (profile != nullptr) store_.PutProfile(id, e->job.profile_csv());
  });
  ++next_seq_;
  jobs_[id] = e;
  const protocol::JobConfig& c = e->job.config();
  log_(Format("job %s: registered (pp %d x dp %d x tp %d = %lld ranks; %s, %d microbatches%s)",
              id.c_str(), c.pp_degree, c.dp_degree, c.tp_degree,
              static_cast<long long>(c.world_size),
              std::string(schedule::KindName(c.spec.kind)).c_str(), c.spec.microbatches,
              profile != nullptr ? "; default profile attached" : ""));
  return e;
}

Jobs::EntryPtr Jobs::Replay(const StoredJob& stored) const {
  const std::string what = "the stored config of job " + stored.id;
  protocol::JobConfig config =
      protocol::JobConfigFromJson(model::ParseJsonBounded(stored.config_json, what));
  if (config.job_id != stored.id) {
    throw InputError("JobConfig::job_id", what + " names another job (" + config.job_id + ")");
  }
  auto e = std::make_shared<Entry>(std::move(config));
  for (const auto& [rank, info] : stored.ranks) {
    e->job.RegisterRank(protocol::RankInfoFromJson(
        model::ParseJsonBounded(info, Format("stored rank %d of job %s", rank, stored.id.c_str())),
        true));
  }
  if (stored.profile_csv) {
    e->job.SetProfile(
        model::ParseProfileCsv(*stored.profile_csv, "the stored profile of job " + stored.id));
    if (!stored.frontier_json && stored.failure.empty()) e->plan_work = EstimatePlanWork(e->job);
  }
  if (stored.frontier_json) {
    std::vector<protocol::PlanSwitch> switches;
    for (const std::string& s : stored.switches_json) {
      switches.push_back(protocol::PlanSwitchFromJson(
          model::ParseJsonBounded(s, "a stored plan switch of job " + stored.id)));
    }
    const std::string what = "the stored frontier of job " + stored.id;
    e->job.RestorePlan(
        SolvedPlanFromJson(model::ParseJsonBounded(*stored.frontier_json, what), what), switches);
  } else if (!stored.failure.empty()) {
    e->job.SetPlanFailed(stored.failure);
  }
  e->seq = stored.seq;
  e->created_unix_s = stored.created_unix_s;
  e->last_active_unix_s = e->stored_last_active_unix_s = stored.last_active_unix_s;
  e->schedule_released = stored.schedule_released;
  return e;
}

void Jobs::Reload(const std::string& id) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  try {
    std::optional<StoredJob> stored = store_.Load(id);
    if (!stored) {
      log_(
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
    log_(
        Format("error: job %s could not be reloaded after a failed write (%s); its state in "
               "memory may be ahead of the database until restart",
               id.c_str(), e.what()));
  }
}

void Jobs::Remove(const std::string& id, const std::string& reason, Wakeups* wakeups) {
  const auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  waiters_->JobGone(id, reason, wakeups);
  jobs_.erase(it);
  scheduler_.Forget(id);
}

std::string Jobs::UniqueId(const std::string& base) const {
  auto taken = [&](const std::string& id) {
    return jobs_.count(id) != 0 || broken_.count(id) != 0;
  };
  if (!taken(base)) return base;
  for (int k = 2;; ++k) {
    const std::string suffix = Format("+%d", k);
    std::string id = base.substr(0, protocol::kMaxJobIdLength - suffix.size()) + suffix;
    if (!taken(id)) return id;
  }
}

void Jobs::EvictAndFlush(Wakeups* wakeups) {
  const double now = NowUnix();
  if (options_.evict_after_s > 0) {
    std::vector<std::string> idle;
    for (const auto& [id, e] : jobs_) {
      if (now - e->last_active_unix_s > options_.evict_after_s && waiters_->waiting_on(id) == 0) {
        idle.push_back(id);
      }
    }
    for (const std::string& id : idle) {
      const double idle_s = now - jobs_.at(id)->last_active_unix_s;
      try {
        store_.Write([&] { store_.DeleteJob(id); });
      } catch (const StoreError& error) {
        log_(Format("error: job %s could not be evicted: %s", id.c_str(), error.what()));
        continue;
      }
      Remove(id, "evicted", wakeups);
      log_(Format("job %s: evicted after %.0f s without a request", id.c_str(), idle_s));
    }
  }
  SaveLastActive();
}

// ---- The routes' work --------------------------------------------------------

json Jobs::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<EntryPtr> entries;
  for (const auto& [id, e] : jobs_) entries.push_back(e);
  std::sort(entries.begin(), entries.end(),
            [](const EntryPtr& a, const EntryPtr& b) { return a->seq < b->seq; });
  std::vector<protocol::JobListing> list;
  list.reserve(entries.size());
  for (const EntryPtr& e : entries) {
    const coord::Job& job = e->job;
    list.push_back({job.config().job_id, coord::JobPhaseName(job.phase()), job.registered_ranks(),
                    job.config().world_size, job.plan_version(), e->created_unix_s,
                    e->last_active_unix_s});
  }
  return protocol::JobListToJson(list);
}

std::string Jobs::Create(protocol::JobConfig config) {
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
      it->second->last_active_unix_s = NowUnix();
      if (it->second->job.config() == config) return config.job_id;
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
  return Insert(std::move(config), nullptr)->job.config().job_id;
}

std::string Jobs::CreateUnique(protocol::JobConfig config, const model::Profile* profile) {
  std::lock_guard<std::mutex> lock(mu_);
  config.job_id = UniqueId(config.job_id);
  return Insert(std::move(config), profile)->job.config().job_id;
}

json Jobs::Status(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(id);
  const coord::Job& job = e->job;
  protocol::ServedJobStatus s;
  s.job = job.Status();
  s.created_unix_s = e->created_unix_s;
  s.last_active_unix_s = e->last_active_unix_s;
  s.waiting_requests = waiters_->waiting_on(job.config().job_id);
  const Scheduler::State planning = scheduler_.StateOf(job.config().job_id);
  switch (planning.is) {
    case Scheduler::State::Is::kRunning:
      s.planning.state = "running";
      s.planning.running_s = planning.running_s;
      break;
    case Scheduler::State::Is::kQueued:
      s.planning.state = "queued";
      break;
    case Scheduler::State::Is::kIdle:
      s.planning.state = "idle";
      break;
  }
  s.planning.time_limit_s = options_.plan_time_limit_s;
  s.planning.instructions = PlanInstructions(job.config());
  if (e->plan_work >= 0) s.planning.work = e->plan_work;
  s.planning.heavy = e->heavy();
  s.zeus.schedule_asked = static_cast<std::int64_t>(e->schedule_asked.size());
  s.zeus.schedule_released = e->schedule_released;
  return protocol::ServedJobStatusToJson(s);
}

void Jobs::Delete(const std::string& id) {
  Wakeups wake;
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_.count(id) != 0) {
    store_.Write([&] { store_.DeleteJob(id); });
    broken_.erase(id);
    log_(Format("job %s: deleted (it could not be restored)", id.c_str()));
    return;
  }
  Find(id);
  store_.Write([&] { store_.DeleteJob(id); });
  Remove(id, "deleted", &wake);
  log_(Format("job %s: deleted", id.c_str()));
}

void Jobs::RegisterRank(const std::string& job_id, const protocol::RankInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  const EntryPtr e = FindAndTouch(job_id);
  coord::Job& job = e->job;
  const std::string& id = job.config().job_id;
  // A conflict with what is registered is a coord::RankConflictError: 409.
  if (!job.RegisterRank(info)) return;
  try {
    store_.Write([&] { store_.PutRank(id, info.rank, protocol::RankInfoToJson(info).dump()); });
  } catch (const StoreError&) {
    Reload(id);
    throw;
  }
  if (job.all_ranks_registered()) {
    log_(Format("job %s: all %lld ranks registered%s", id.c_str(),
                static_cast<long long>(job.config().world_size),
                job.has_profile() ? "" : "; waiting for a profile (PUT /jobs/{id}/profile)"));
  }
  if (job.ready_to_plan()) QueuePlan(*e);
}

}  // namespace joulepipe::serve
