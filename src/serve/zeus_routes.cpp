// Zeus 0.16.0's PFO routes over the same jobs: /info, /register_job,
// /register_rank, the schedule barrier and /result. What differs from the
// native API is said here and in the Zeus table (router.cpp), not in flags.
#include <limits>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/version.hpp"
#include "router.hpp"
#include "service.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

std::optional<Reply> Service::ZeusInfo(Request&, Parked*) {
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
  return JsonReply(200,
                   {{"service", "joulepipe serve"},
                    {"version", std::string(model::Version())},
                    {"scheduler", "joulepipe"},
                    {"compatible_with", "zeus 0.16.0 pipeline frequency optimizer (PFO) server"},
                    {"zeus_defaults", defaults},
                    {"jobs", jobs_.counts().jobs},
                    {"docs", "docs/coordination.md"}});
}

std::optional<Reply> Service::ZeusRegisterJob(Request& r, Parked*) {
  const protocol::ZeusJobInfo info = protocol::JobInfoFromJson(ParseBody(r.body));
  const ZeusDefaults& z = options_.zeus;
  if (z.microbatches <= 0) {
    throw HttpError(409,
                    "this server has no schedule for Zeus-registered jobs (ZeusDefaults::"
                    "microbatches is unset): Zeus's JobInfo carries only the parallel degrees. "
                    "Register the job with POST /jobs instead, or start the server with Zeus "
                    "defaults (docs/coordination.md, \"Zeus compatibility\")",
                    "ZeusDefaults::microbatches");
  }
  protocol::JobConfig c;
  c.job_id = ZeusStyleJobId(
      info.dp_degree, info.pp_degree, info.tp_degree, info.metadata,
      static_cast<std::int64_t>(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()));
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
  // This and the default profile's fit are the server's configuration, not
  // the request's form: 409, as is the server without Zeus defaults.
  if (c.world_size > can_wait) {
    throw HttpError(409,
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
    try {
      coord::PlanWork(*z.profile, request);
    } catch (const InputError& e) {
      throw HttpError(409, e.what(), e.field());
    }
  }
  const std::string id = jobs_.CreateUnique(std::move(c), z.profile ? &*z.profile : nullptr);
  return Plain(200, json(id).dump());
}

std::optional<Reply> Service::ZeusRegisterRank(Request& r, Parked*) {
  // Zeus's RankInfo has members of its own: ignored, as its pydantic model does.
  jobs_.RegisterRank(r.match.job_id,
                     protocol::RankInfoFromJson(ParseBody(r.body), /*strict=*/false));
  return Plain(200, "null");
}

std::optional<Reply> Service::ZeusSchedule(Request& r, Parked* parked) {
  PlanAsk ask;
  ask.what = Parked::Wait::For::kSchedule;
  ask.rank_field = "ScheduleQuery::rank";
  ask.register_hint = "POST /register_rank/{job_id}";
  ask.rank = static_cast<int>(QueryInt(r, "rank", ask.rank_field, std::nullopt, 0,
                                       std::numeric_limits<int>::max(),
                                       "ask GET /schedule/{job_id}?rank=R"));
  return jobs_.AskPlan(r.match.job_id, ask, parked);
}

// A result's reports, numbered by the server after the rank's last.
void Service::ApplyZeusResult(const std::string& job_id, const std::string& body) {
  const protocol::ZeusProfilingResult result = protocol::ProfilingResultFromJson(ParseBody(body));
  std::vector<protocol::IterationReport> reports(result.iter_time.size());
  for (std::size_t k = 0; k < reports.size(); ++k) {
    reports[k].time_s = result.iter_time[k];
    if (!result.iter_energy.empty()) reports[k].energy_j = result.iter_energy[k];
  }
  jobs_.ReportNumbered(job_id, result.rank, reports, "ProfilingResult::rank",
                       "POST /register_rank/{job_id}");
}

std::optional<Reply> Service::ZeusResult(Request& r, Parked* parked) {
  // A small result is read at once; a larger one (up to 1 MiB) on the
  // intake thread, its request parked meanwhile, so that no burst of them
  // holds the HTTP thread.
  if (r.body.size() <= kMaxSmallJsonBody) {
    ApplyZeusResult(r.match.job_id, r.body);
    return Plain(200, "null");
  }
  const std::string job_id = r.match.job_id;
  return jobs_.QueueBody(job_id, std::move(r.body), parked,
                         [this, job_id](const std::string& body) {
                           try {
                             ApplyZeusResult(job_id, body);
                             return Plain(200, "null");
                           } catch (...) {
                             return ErrorFor(std::current_exception(), ZeusApi(),
                                             [this](const std::string& line) { Log(line); });
                           }
                         });
}

}  // namespace joulepipe::serve
