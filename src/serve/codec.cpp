#include "codec.hpp"

#include <cmath>
#include <ctime>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "joulepipe/model/field_names.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/protocol/json_members.hpp"

namespace joulepipe::serve {

namespace {

using model::Format;
using model::InputError;
using nlohmann::json;
using protocol::Members;

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

InputError ForApi(const InputError& error, bool zeus) {
  InputError out = model::RenameFields(error, kApiNames);
  return zeus ? model::RenameFields(out, kZeusNames) : out;
}

std::string ForApi(const std::string& message, bool zeus) {
  std::string out = model::RenameFields(message, kApiNames);
  return zeus ? model::RenameFields(out, kZeusNames) : out;
}

json ParseBody(std::string_view body) {
  if (body.empty()) throw InputError("the request has no body; it takes a JSON object");
  return model::ParseJsonBounded(body, "the request body");
}

coord::JobConfig JobConfigFromJson(const json& j) {
  Members m(j, "JobConfig", /*strict=*/true);
  coord::JobConfig c;
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
    if (auto v = st.OptionalNumber("recover_below")) c.straggler.recover_below = *v;
    c.straggler.window = st.Int("window", c.straggler.window);
    if (auto v = st.OptionalNumber("min_change")) c.straggler.min_change = *v;
    st.Done();
  }
  m.Done();
  return c;
}

json JobConfigToJson(const coord::JobConfig& c) {
  json j = {{"job_id", c.job_id},
            {"pp_degree", c.pp_degree},
            {"dp_degree", c.dp_degree},
            {"tp_degree", c.tp_degree},
            {"world_size", c.world_size},
            {"schedule", std::string(schedule::KindName(c.spec.kind))},
            {"microbatches", c.spec.microbatches},
            {"chunks", c.spec.chunks},
            {"resolution_s", c.resolution_s},
            {"slowdown", c.slowdown},
            {"gpu", c.gpu},
            {"metadata", c.metadata},
            {"straggler",
             {{"threshold", c.straggler.threshold},
              {"recover_below", c.straggler.recover_below},
              {"window", c.straggler.window},
              {"min_change", c.straggler.min_change}}}};
  if (c.p_block_w) j["p_block_w"] = *c.p_block_w;
  return j;
}

coord::RankInfo RankInfoFromJson(const json& j, bool strict) {
  Members m(j, "RankInfo", strict);
  coord::RankInfo r;
  r.rank = m.Int("rank");
  r.dp_rank = m.Int("dp_rank");
  r.pp_rank = m.Int("pp_rank");
  r.tp_rank = m.Int("tp_rank");
  r.available_mhz = m.IntList("available_frequencies", coord::kMaxFrequencies);
  m.Done();
  return r;
}

json RankInfoToJson(const coord::RankInfo& r) {
  return {{"rank", r.rank},
          {"dp_rank", r.dp_rank},
          {"pp_rank", r.pp_rank},
          {"tp_rank", r.tp_rank},
          {"available_frequencies", r.available_mhz}};
}

ZeusJobInfo JobInfoFromJson(const json& j) {
  Members m(j, "JobInfo", /*strict=*/false);
  const std::string id = m.String("job_id", "");
  model::Require(id.empty(), "JobInfo::job_id",
                 Format("JobInfo::job_id must be empty: the server assigns the id (got \"%s\")",
                        model::ExcerptText(id).c_str()));
  ZeusJobInfo z;
  z.pp_degree = m.Int("pp_degree");
  z.dp_degree = m.Int("dp_degree");
  z.tp_degree = m.Int("tp_degree");
  for (const auto& [value, key] :
       {std::pair{z.pp_degree, "pp_degree"}, std::pair{z.dp_degree, "dp_degree"},
        std::pair{z.tp_degree, "tp_degree"}}) {
    model::Require(value >= 1, m.Field(key).c_str(),
                   Format("%s must be at least 1 (got %d)", m.Field(key).c_str(), value));
  }
  z.world_size = m.Integer(m.Require("world_size"), "world_size");
  const std::int64_t product = std::int64_t{z.pp_degree} * z.dp_degree * z.tp_degree;
  model::Require(z.world_size == product, "JobInfo::world_size",
                 Format("JobInfo::world_size must be pp_degree x dp_degree x tp_degree = %d x %d "
                        "x %d = %lld (got %lld)",
                        z.pp_degree, z.dp_degree, z.tp_degree, static_cast<long long>(product),
                        static_cast<long long>(z.world_size)));
  z.metadata = m.String("job_metadata", "");
  m.Done();
  return z;
}

ZeusProfilingResult ProfilingResultFromJson(const json& j) {
  Members m(j, "ProfilingResult", /*strict=*/false);
  ZeusProfilingResult r;
  r.rank = m.Int("rank");
  model::Require(r.rank >= 0, "ProfilingResult::rank",
                 Format("ProfilingResult::rank must be >= 0 (got %d)", r.rank));
  // A profiling window is a few to a few hundred iterations.
  constexpr std::size_t kMaxEntries = 100'000;
  r.iter_time = m.NumberList("iter_time", kMaxEntries);
  r.iter_energy = m.NumberList("iter_energy", kMaxEntries);
  if (!r.iter_energy.empty() && r.iter_energy.size() != r.iter_time.size()) {
    throw InputError("ProfilingResult::iter_energy",
                     Format("ProfilingResult::iter_energy has %zu entries but iter_time has %zu; "
                            "give one energy per iteration time, or none",
                            r.iter_energy.size(), r.iter_time.size()));
  }
  // coord's rules on each entry (the field names the entry).
  // (The entry's name is formatted only for a refusal: lists are long.)
  for (std::size_t k = 0; k < r.iter_time.size(); ++k) {
    if (coord::IterationTimeOk(r.iter_time[k])) continue;
    coord::CheckIterationTime(r.iter_time[k], "ProfilingResult::iter_time",
                              Format("ProfilingResult::iter_time[%zu]", k));
  }
  for (std::size_t k = 0; k < r.iter_energy.size(); ++k) {
    if (coord::IterationEnergyOk(r.iter_energy[k])) continue;
    coord::CheckIterationEnergy(r.iter_energy[k], "ProfilingResult::iter_energy",
                                Format("ProfilingResult::iter_energy[%zu]", k));
  }
  m.Done();
  return r;
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
    for (char c : metadata) id += (c > ' ' && c < 127 && c != '/') ? c : '_';
  }
  if (id.size() > coord::kMaxJobIdLength) id.resize(coord::kMaxJobIdLength);
  return id;
}

}  // namespace joulepipe::serve
