// The JSON of protocol/job.hpp's messages (JobConfig, RankInfo, PlanSwitch,
// JobStatus).
#include <algorithm>
#include <string>
#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/protocol/json.hpp"
#include "joulepipe/protocol/json_members.hpp"

namespace joulepipe::protocol {

namespace {

using model::Format;
using model::InputError;
using nlohmann::json;

}  // namespace

JobConfig JobConfigFromJson(const json& j) {
  Members m(j, "JobConfig", /*strict=*/true);
  JobConfig c;
  c.job_id = m.String("job_id", "");
  c.pp_degree = m.Int("pp_degree");
  c.dp_degree = m.Int("dp_degree");
  c.tp_degree = m.Int("tp_degree");
  if (const json* w = m.Find("world_size")) {
    c.world_size = m.Integer(*w, "world_size");
    model::Require(c.world_size >= 1, "JobConfig::world_size",
                   Format("JobConfig::world_size must be pp_degree x dp_degree x tp_degree, or "
                          "absent to compute it (got %lld)",
                          static_cast<long long>(c.world_size)));
  }
  const std::string kind = m.String("schedule", "");
  if (kind.empty()) {
    throw InputError("JobConfig::schedule",
                     "JobConfig::schedule is missing; it is \"1f1b\", \"gpipe\" or "
                     "\"interleaved\"");
  }
  if (!schedule::ParseKind(kind, &c.spec.kind)) {
    throw InputError("JobConfig::schedule",
                     Format("JobConfig::schedule must be \"1f1b\", \"gpipe\" or \"interleaved\" "
                            "(got \"%s\")",
                            model::ExcerptText(kind).c_str()));
  }
  c.spec.stages = c.pp_degree;
  c.spec.microbatches = m.Int("microbatches");
  c.spec.chunks = m.Int("chunks", 1);
  c.p_block_w = m.OptionalNumber("p_block_w");
  if (std::optional<double> r = m.OptionalNumber("resolution_s")) c.resolution_s = *r;
  if (std::optional<double> s = m.OptionalNumber("slowdown")) c.slowdown = *s;
  c.gpu = m.String("gpu", "");
  c.metadata = m.String("metadata", "");
  if (const json* s = m.Find("straggler")) {
    Members st(*s, "StragglerOptions", /*strict=*/true);
    if (auto v = st.OptionalNumber("threshold")) c.straggler.threshold = *v;
    // Absent, recover_below is the default capped at the threshold, so a
    // threshold below the default recovery (1.02) is valid on its own.
    if (auto v = st.OptionalNumber("recover_below")) {
      c.straggler.recover_below = *v;
    } else {
      c.straggler.recover_below = std::min(c.straggler.recover_below, c.straggler.threshold);
    }
    c.straggler.window = st.Int("window", c.straggler.window);
    if (auto v = st.OptionalNumber("min_change")) c.straggler.min_change = *v;
    st.Done();
  }
  m.Done();
  return c;
}

json JobConfigToJson(const JobConfig& c, Form form) {
  const bool every = form == Form::kComplete;
  const JobConfig defaults;
  json j = {{"pp_degree", c.pp_degree},
            {"dp_degree", c.dp_degree},
            {"tp_degree", c.tp_degree},
            {"schedule", std::string(schedule::KindName(c.spec.kind))},
            {"microbatches", c.spec.microbatches},
            {"chunks", c.spec.chunks}};
  if (every || !c.job_id.empty()) j["job_id"] = c.job_id;
  if (every || c.world_size != 0) j["world_size"] = c.world_size;
  if (c.p_block_w) j["p_block_w"] = *c.p_block_w;
  if (every || c.resolution_s != defaults.resolution_s) j["resolution_s"] = c.resolution_s;
  if (every || c.slowdown != defaults.slowdown) j["slowdown"] = c.slowdown;
  if (every || !c.gpu.empty()) j["gpu"] = c.gpu;
  if (every || !c.metadata.empty()) j["metadata"] = c.metadata;
  if (every || c.straggler != defaults.straggler) {
    j["straggler"] = {{"threshold", c.straggler.threshold},
                      {"recover_below", c.straggler.recover_below},
                      {"window", c.straggler.window},
                      {"min_change", c.straggler.min_change}};
  }
  return j;
}

RankInfo RankInfoFromJson(const json& j, bool strict) {
  Members m(j, "RankInfo", strict);
  RankInfo r;
  r.rank = m.Int("rank");
  r.dp_rank = m.Int("dp_rank");
  r.pp_rank = m.Int("pp_rank");
  r.tp_rank = m.Int("tp_rank");
  r.available_mhz = m.IntList("available_frequencies", kMaxFrequencies);
  m.Done();
  return r;
}

json RankInfoToJson(const RankInfo& r) {
  return {{"rank", r.rank},
          {"dp_rank", r.dp_rank},
          {"pp_rank", r.pp_rank},
          {"tp_rank", r.tp_rank},
          {"available_frequencies", r.available_mhz}};
}

json PlanSwitchToJson(const PlanSwitch& s) {
  return {{"version", s.version},
          {"iteration", s.iteration},
          {"time_unix_s", s.time_unix_s},
          {"reason", s.reason},
          {"slowdowns", s.slowdowns},
          {"target_s", s.target_s},
          {"point_of_pipeline", s.point_of_pipeline},
          {"predicted_saving_j", s.predicted_saving_j}};
}

PlanSwitch PlanSwitchFromJson(const json& j) {
  try {
    PlanSwitch s;
    s.version = j.at("version").get<int>();
    s.iteration = j.at("iteration").get<std::int64_t>();
    s.time_unix_s = j.at("time_unix_s").get<double>();
    s.reason = j.at("reason").get<std::string>();
    s.slowdowns = j.at("slowdowns").get<std::vector<double>>();
    s.target_s = j.at("target_s").get<double>();
    s.point_of_pipeline = j.at("point_of_pipeline").get<std::vector<int>>();
    s.predicted_saving_j = j.at("predicted_saving_j").get<double>();
    return s;
  } catch (const json::exception& e) {
    throw InputError("PlanSwitch",
                     std::string("a stored plan switch is not readable: ") + e.what());
  }
}

json JobStatusToJson(const JobStatus& s) {
  const JobConfig& c = s.config;
  json j = {
      {"job_id", c.job_id},
      {"phase", s.phase},
      {"pp_degree", c.pp_degree},
      {"dp_degree", c.dp_degree},
      {"tp_degree", c.tp_degree},
      {"world_size", c.world_size},
      {"schedule", std::string(schedule::KindName(c.spec.kind))},
      {"microbatches", c.spec.microbatches},
      {"chunks", c.spec.chunks},
      {"gpu", c.gpu},
      {"metadata", c.metadata},
      {"registered_ranks", s.registered_ranks},
      {"has_profile", s.has_profile},
      {"plan_version", s.plan_version},
      {"completed_iterations", s.completed_iterations},
      {"dropped_iterations", s.dropped_iterations},
  };
  if (c.p_block_w) j["p_block_w"] = *c.p_block_w;
  if (!s.failure.empty()) j["failure"] = s.failure;
  if (!s.profile_notes.empty()) j["profile_notes"] = s.profile_notes;
  if (s.frontier) {
    json points = json::array();
    for (const model::Prediction& q : s.frontier->points) {
      points.push_back({{"time_s", q.time_s}, {"energy_j", q.energy_j}});
    }
    j["frontier"] = {{"baseline_time_s", s.frontier->baseline_time_s},
                     {"max_clock_energy_j", s.frontier->max_clock_energy_j},
                     {"p_block_w", s.frontier->p_block_w},
                     {"intrinsic", s.frontier->intrinsic},
                     {"points", std::move(points)}};
    j["point_of_pipeline"] = s.point_of_pipeline;
    j["slowdowns"] = s.slowdowns;
    json history = json::array();
    for (const PlanSwitch& w : s.switches) history.push_back(PlanSwitchToJson(w));
    j["switches"] = std::move(history);
  }
  return j;
}

json ServedJobStatusToJson(const ServedJobStatus& s) {
  json j = JobStatusToJson(s.job);
  j["created_unix_s"] = s.created_unix_s;
  j["last_active_unix_s"] = s.last_active_unix_s;
  j["waiting_requests"] = s.waiting_requests;
  if (s.job.frontier) {
    const std::vector<model::Prediction>& points = s.job.frontier->points;
    json pipelines = json::array();
    for (std::size_t p = 0; p < s.job.point_of_pipeline.size(); ++p) {
      const int point = s.job.point_of_pipeline[p];
      pipelines.push_back({{"pipeline", p},
                           {"point", point},
                           {"time_s", points.at(point).time_s},
                           {"energy_j", points.at(point).energy_j},
                           {"slowdown", p < s.job.slowdowns.size() ? s.job.slowdowns[p] : 1.0}});
    }
    j["pipelines"] = std::move(pipelines);
  }
  const ServedJobStatus::Planning& q = s.planning;
  j["planning"] = {{"state", q.state},
                   {"running_s", q.running_s ? json(*q.running_s) : json(nullptr)},
                   {"time_limit_s", q.time_limit_s},
                   {"instructions", q.instructions},
                   {"work", q.work ? json(*q.work) : json(nullptr)},
                   {"heavy", q.heavy}};
  j["zeus"] = {{"schedule_asked", s.zeus.schedule_asked},
               {"schedule_released", s.zeus.schedule_released}};
  return j;
}

json JobListToJson(const std::vector<JobListing>& jobs) {
  json list = json::array();
  for (const JobListing& e : jobs) {
    list.push_back({{"job_id", e.job_id},
                    {"phase", e.phase},
                    {"registered_ranks", e.registered_ranks},
                    {"world_size", e.world_size},
                    {"plan_version", e.plan_version},
                    {"created_unix_s", e.created_unix_s},
                    {"last_active_unix_s", e.last_active_unix_s}});
  }
  return list;
}

}  // namespace joulepipe::protocol
