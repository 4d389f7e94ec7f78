#include "joulepipe/protocol/zeus.hpp"

#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/protocol/json_members.hpp"
#include "joulepipe/protocol/messages.hpp"

namespace joulepipe::protocol {

namespace {

using model::Format;
using model::InputError;
using nlohmann::json;

}  // namespace

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
  model::RequireConsistent(
      z.world_size == product, "JobInfo::world_size",
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
    throw model::InconsistentInputError(
        "ProfilingResult::iter_energy",
        Format("ProfilingResult::iter_energy has %zu entries but iter_time has %zu; "
               "give one energy per iteration time, or none",
               r.iter_energy.size(), r.iter_time.size()));
  }
  // An iteration report's rules on each entry (the field names the entry,
  // formatted only for a refusal: lists are long).
  for (std::size_t k = 0; k < r.iter_time.size(); ++k) {
    if (IterationTimeOk(r.iter_time[k])) continue;
    CheckIterationTime(r.iter_time[k], "ProfilingResult::iter_time",
                       Format("ProfilingResult::iter_time[%zu]", k));
  }
  for (std::size_t k = 0; k < r.iter_energy.size(); ++k) {
    if (IterationEnergyOk(r.iter_energy[k])) continue;
    CheckIterationEnergy(r.iter_energy[k], "ProfilingResult::iter_energy",
                         Format("ProfilingResult::iter_energy[%zu]", k));
  }
  m.Done();
  return r;
}

}  // namespace joulepipe::protocol
