// Zeus 0.16.0's messages (zeus/optimizer/pipeline_frequency/common.py), as
// `joulepipe serve`'s Zeus-compatible routes read them: a JobInfo
// (POST /register_job) and a ProfilingResult (POST /result/{job_id}). Its
// RankInfo is protocol::RankInfo (RankInfoFromJson, not strict); its
// FrequencySchedule, protocol::FrequencyScheduleToJson.
//
// Like Zeus's pydantic models, the readers ignore members they do not know
// and name the fields as Zeus does ("JobInfo::job_metadata",
// "ProfilingResult::iter_time[3]") in their model::InputError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace joulepipe::protocol {

struct ZeusJobInfo {
  int pp_degree = 0, dp_degree = 0, tp_degree = 0;
  std::int64_t world_size = 0;
  std::string metadata;
};
// Checks job_id == "" (the server assigns the id), each degree >= 1 and
// world_size == pp x dp x tp.
ZeusJobInfo JobInfoFromJson(const nlohmann::json& j);

// Per-iteration times (and energies, when given one per time); Zeus's
// breakdowns are accepted and ignored. Each entry obeys an iteration
// report's rules (CheckIterationTime, CheckIterationEnergy).
struct ZeusProfilingResult {
  int rank = 0;
  std::vector<double> iter_time;
  std::vector<double> iter_energy;  // empty or iter_time.size() entries
};
ZeusProfilingResult ProfilingResultFromJson(const nlohmann::json& j);

}  // namespace joulepipe::protocol
