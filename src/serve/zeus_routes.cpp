// Zeus 0.16.0's PFO routes over the same jobs: /info, /register_job,
// the schedule barrier and /result.
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
  // Every rank of a Zeus job waits on GET /schedule at once, holding a
  // connection until the last one asks (Zeus's client cannot come back
  // later): a job with more ranks than that can never start (issue 41, 7).
  const int can_wait = ZeusWaitLimit(options_.max_connections);
  if (c.world_size > can_wait) {
    throw HttpError(400,
                    Format("JobInfo::world_size %lld: every rank of a Zeus job waits on GET "
                           "/schedule at once, each holding a connection, and this server keeps "
                           "%d for waiting ranks (ServerOptions::max_connections %d): the job "
                           "could never start; raise max_connections above %lld, or register "
                           "the job with POST /jobs (its ranks wait without a connection)",
                           static_cast<long long>(c.world_size), can_wait, options_.max_connections,
                           static_cast<long long>(c.world_size + c.world_size / 15 + 1)),
                    "JobInfo::world_size");
  }
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
      FeedReport(*e, report, &claimed, coord::Job::Numbering::kByServer);
    }
  }
  ResumeAll(claimed);
  return Plain(200, "null");
}

}  // namespace joulepipe::serve
