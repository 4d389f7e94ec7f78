// The JSON of `joulepipe serve`'s routes (docs/coordination.md,
// docs/openapi.yaml): request bodies read into coord's types and coord's
// types written as answers. Private to the serve part.
//
// Every reader checks the whole body before returning (so a route changes
// nothing on bad input) and throws model::InputError whose field() and
// message name the member as "<Struct>::<json key>" ("JobConfig::dp_degree",
// "RankInfo::available_frequencies", "JobInfo::world_size"), never a
// command-line flag. Null members count as absent (Python clients send
// None). Native bodies (JobConfig, RankInfo, IterationReport) refuse
// unknown members, naming them; Zeus bodies (JobInfo, ProfilingResult)
// ignore them, as Zeus's pydantic models do.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/coord/job.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/protocol/json.hpp"

namespace joulepipe::serve {

// coord's and the solver's field tokens as the HTTP API names them (its JSON
// keys): "Spec::microbatches" -> "JobConfig::microbatches",
// "RankInfo::available_mhz" -> "RankInfo::available_frequencies", ...
// With `zeus`, also JobConfig's members as Zeus's JobInfo names them and
// IterationReport's as ProfilingResult's.
model::InputError ForApi(const model::InputError& error, bool zeus);
std::string ForApi(const std::string& message, bool zeus);

// The request body as JSON; InputError naming the line and column of a
// syntax error ("the request body: not valid JSON at line 1, column 9: ...").
nlohmann::json ParseBody(std::string_view body);

// POST /jobs, and the form the store keeps (JobConfigToJson writes every
// member, JobConfigFromJson reads it back exactly). job_id may be absent or
// "" (the server assigns one). Does not run coord::CheckJobConfig.
coord::JobConfig JobConfigFromJson(const nlohmann::json& j);
nlohmann::json JobConfigToJson(const coord::JobConfig& config);

// POST /jobs/{id}/ranks and Zeus's POST /register_rank/{id} (the same
// members; `strict` refuses unknown ones). Ranges are coord's to check.
coord::RankInfo RankInfoFromJson(const nlohmann::json& j, bool strict);
nlohmann::json RankInfoToJson(const coord::RankInfo& info);

// POST /jobs/{id}/iterations, GET /jobs/{id}/plan and Zeus's GET /schedule:
// the protocol's messages, read and written by protocol/json.hpp.
using protocol::FrequencyScheduleToJson;
using protocol::IterationReportFromJson;
using protocol::RankPlanToJson;

// Zeus 0.16.0's JobInfo (zeus/optimizer/pipeline_frequency/common.py).
struct ZeusJobInfo {
  int pp_degree = 0, dp_degree = 0, tp_degree = 0;
  std::int64_t world_size = 0;
  std::string metadata;
};
// Checks job_id == "" and world_size == pp x dp x tp, naming JobInfo::...
ZeusJobInfo JobInfoFromJson(const nlohmann::json& j);

// Zeus's ProfilingResult: per-iteration times (and energies, when given one
// per time) become IterationReports. Breakdowns are accepted and ignored.
struct ZeusProfilingResult {
  int rank = 0;
  std::vector<double> iter_time;
  std::vector<double> iter_energy;  // empty or iter_time.size() entries
};
ZeusProfilingResult ProfilingResultFromJson(const nlohmann::json& j);

// Zeus-style job ids: "YYYY-MM-DD-HH-MM-SS+dp<D>+pp<P>+tp<T>+joulepipe[+<metadata>]"
// in local time, as zeus's JobInfo.set_job_id writes them; characters a job
// id may not hold (space, '/', control and non-ASCII bytes) in the metadata
// become '_', and the id is cut to coord::kMaxJobIdLength.
std::string ZeusStyleJobId(int dp, int pp, int tp, const std::string& metadata,
                           std::int64_t unix_s);

}  // namespace joulepipe::serve
