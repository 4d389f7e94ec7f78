// The native routes: each parses its request (outside every lock), asks
// the jobs and words the answer (docs/openapi.yaml).
#include <limits>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "joulepipe/model/version.hpp"
#include "service.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using nlohmann::json;

std::optional<Reply> Service::Healthz(Request&, Parked*) {
  const Jobs::Counts counts = jobs_.counts();
  const double uptime = std::chrono::duration<double>(SteadyClock::now() - started_).count();
  return JsonReply(200, {{"ok", true},
                         {"service", "joulepipe serve"},
                         {"version", std::string(model::Version())},
                         {"jobs", counts.jobs},
                         {"waiting_requests", waiters_.waiting()},
                         {"planning_queue", counts.plan_queue},
                         {"planning", counts.planning},
                         {"persistent", jobs_.persistent()},
                         {"uptime_s", uptime}});
}

std::optional<Reply> Service::MetricsText(Request&, Parked*) {
  Gauges g;
  jobs_.FillGauges(&g);
  g.waiting_requests = waiters_.waiting();
  g.held_plan_waits = waiters_.held_plan_waits();
  g.plan_time_limit_s = options_.plan_time_limit_s;
  g.max_waiting = options_.max_waiting;
  g.open_connections = open_connections();
  Reply r;
  r.body = metrics_.Text(g);
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

std::optional<Reply> Service::ListJobs(Request&, Parked*) {
  return JsonReply(200, {{"jobs", jobs_.List()}});
}

std::optional<Reply> Service::CreateJob(Request& r, Parked*) {
  const std::string id = jobs_.Create(protocol::JobConfigFromJson(ParseBody(r.body)));
  return JsonReply(200, {{"job_id", id}});
}

std::optional<Reply> Service::GetJob(Request& r, Parked*) {
  return JsonReply(200, jobs_.Status(r.match.job_id));
}

std::optional<Reply> Service::DeleteJob(Request& r, Parked*) {
  jobs_.Delete(r.match.job_id);
  return JsonReply(200, {{"deleted", r.match.job_id}});
}

std::optional<Reply> Service::RegisterRank(Request& r, Parked*) {
  jobs_.RegisterRank(r.match.job_id,
                     protocol::RankInfoFromJson(ParseBody(r.body), /*strict=*/true));
  return JsonReply(200, json::object());
}

std::optional<Reply> Service::PutProfile(Request& r, Parked* parked) {
  return jobs_.QueueProfile(r.match.job_id, std::move(r.body), parked);
}

std::optional<Reply> Service::GetPlan(Request& r, Parked* parked) {
  PlanAsk ask;
  ask.what = Parked::Wait::For::kPlan;
  ask.rank_field = "PlanQuery::rank";
  ask.register_hint = "POST /jobs/{id}/ranks";
  ask.rank =
      static_cast<int>(QueryInt(r, "rank", ask.rank_field, std::nullopt, 0,
                                std::numeric_limits<int>::max(), "ask GET /jobs/{id}/plan?rank=R"));
  ask.after = static_cast<int>(
      QueryInt(r, "after", "PlanQuery::after", 0, 0, std::numeric_limits<int>::max(), ""));
  ask.wait_s = QueryNumber(r, "wait_s", "PlanQuery::wait_s", protocol::kDefaultPlanWaitS, 0,
                           protocol::kMaxPlanWaitS);
  return jobs_.AskPlan(r.match.job_id, ask, parked);
}

std::optional<Reply> Service::ReportIteration(Request& r, Parked*) {
  const int version =
      jobs_.Report(r.match.job_id, protocol::IterationReportFromJson(ParseBody(r.body)));
  return JsonReply(200, {{"plan_version", version}});
}

}  // namespace joulepipe::serve
