#include "codec.hpp"

#include <cmath>
#include <ctime>
#include <limits>
#include <string_view>
#include <utility>

#include "joulepipe/model/field_names.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::serve {

namespace {

using model::Format;
using model::InputError;
using nlohmann::json;

// Library tokens -> the API's JSON members (order matters only in that no
// replacement produces a later token).
constexpr std::pair<std::string_view, std::string_view> kApiNames[] = {
    {"Spec::stages", "JobConfig::pp_degree"},
    {"Spec::microbatches", "JobConfig::microbatches"},
    {"Spec::chunks", "JobConfig::chunks"},
    {"Spec::kind", "JobConfig::schedule"},
    {"PlanRequest::p_block_w", "JobConfig::p_block_w"},
    {"PlanRequest::resolution_s", "JobConfig::resolution_s"},
    {"PlanRequest::slowdown", "JobConfig::slowdown"},
    {"Options::p_block_w", "JobConfig::p_block_w"},
    {"RankInfo::available_mhz", "RankInfo::available_frequencies"},
};

// JobConfig and IterationReport as Zeus's JobInfo and ProfilingResult.
constexpr std::pair<std::string_view, std::string_view> kZeusNames[] = {
    {"JobConfig::pp_degree", "JobInfo::pp_degree"},
    {"JobConfig::dp_degree", "JobInfo::dp_degree"},
    {"JobConfig::tp_degree", "JobInfo::tp_degree"},
    {"JobConfig::world_size", "JobInfo::world_size"},
    {"JobConfig::job_id", "JobInfo::job_id"},
    {"JobConfig::metadata", "JobInfo::job_metadata"},
    {"IterationReport::rank", "ProfilingResult::rank"},
    {"IterationReport::time_s", "ProfilingResult::iter_time"},
    {"IterationReport::energy_j", "ProfilingResult::iter_energy"},
};

}  // namespace

InputError ForApi(const InputError& error) {
  return model::RenameFields(error, kApiNames);
}

std::string ForApi(const std::string& message) {
  return model::RenameFields(message, kApiNames);
}

InputError ForZeus(const InputError& error) {
  return model::RenameFields(ForApi(error), kZeusNames);
}

std::string ForZeus(const std::string& message) {
  return model::RenameFields(ForApi(message), kZeusNames);
}

json ParseBody(std::string_view body) {
  if (body.empty()) throw InputError("the request has no body; it takes a JSON object");
  return model::ParseJsonBounded(body, "the request body");
}

json SolvedPlanToJson(const coord::SolvedPlan& plan) {
  auto point = [](const solver::FrontierPoint& q) {
    return json{{"time_s", q.time_s}, {"energy_j", q.energy_j}, {"mhz", q.mhz}};
  };
  json points = json::array();
  for (const solver::FrontierPoint& q : plan.frontier.points) points.push_back(point(q));
  return {{"version", 1},
          {"intrinsic", plan.intrinsic},
          {"baseline_time_s", plan.baseline_time_s},
          {"p_block_w", plan.p_block_w},
          {"max_clock", point(plan.frontier.max_clock)},
          {"points", std::move(points)}};
}

coord::SolvedPlan SolvedPlanFromJson(const json& j, const std::string& what) {
  auto point = [](const json& p) {
    solver::FrontierPoint q;
    q.time_s = p.at("time_s").get<double>();
    q.energy_j = p.at("energy_j").get<double>();
    q.mhz = p.at("mhz").get<std::vector<std::uint16_t>>();
    return q;
  };
  try {
    coord::SolvedPlan plan;
    for (const json& p : j.at("points")) plan.frontier.points.push_back(point(p));
    plan.frontier.max_clock = point(j.at("max_clock"));
    plan.intrinsic = j.at("intrinsic").get<int>();
    plan.baseline_time_s = j.at("baseline_time_s").get<double>();
    plan.p_block_w = j.at("p_block_w").get<double>();
    return plan;
  } catch (const json::exception& e) {
    throw InputError("Job::RestorePlan", what + " is not readable: " + e.what());
  }
}

std::string ZeusStyleJobId(int dp, int pp, int tp, const std::string& metadata,
                           std::int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm local{};
  localtime_r(&t, &local);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d-%H-%M-%S", &local);
  std::string id = Format("%s+dp%d+pp%d+tp%d+joulepipe", when, dp, pp, tp);
  if (!metadata.empty()) {
    id += '+';
    for (char c : metadata) id += (c > ' ' && c < 127 && c != '/' && c != '%') ? c : '_';
  }
  if (id.size() > protocol::kMaxJobIdLength) id.resize(protocol::kMaxJobIdLength);
  return id;
}

}  // namespace joulepipe::serve
