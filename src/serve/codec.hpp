// What `joulepipe serve` adds to the protocol's JSON (docs/coordination.md,
// docs/openapi.yaml): errors named as the API names fields, the request
// body's parse, the stored frontier and Zeus-style job ids. Private to the
// serve part.
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
#include "joulepipe/protocol/zeus.hpp"

namespace joulepipe::serve {

// coord's and the solver's field tokens as the HTTP API names them (its JSON
// keys): "Spec::microbatches" -> "JobConfig::microbatches",
// "RankInfo::available_mhz" -> "RankInfo::available_frequencies", ...
model::InputError ForApi(const model::InputError& error);
std::string ForApi(const std::string& message);
// ForApi, then JobConfig's members as Zeus's JobInfo names them and
// IterationReport's as ProfilingResult's.
model::InputError ForZeus(const model::InputError& error);
std::string ForZeus(const std::string& message);

// The request body as JSON; InputError naming the line and column of a
// syntax error ("the request body: not valid JSON at line 1, column 9: ...").
nlohmann::json ParseBody(std::string_view body);

// The protocol's messages, read and written by protocol/json.hpp and
// protocol/zeus.hpp, named here for serve's routes: POST /jobs and the form
// the store keeps (JobConfig), POST /jobs/{id}/ranks and Zeus's
// /register_rank (RankInfo), POST /jobs/{id}/iterations, GET
// /jobs/{id}/plan, GET /jobs/{id}, Zeus's /register_job, /result and
// /schedule.

// A job's solved frontier as the store keeps it (coord::Job::Solved,
// RestorePlan): {"version":1,"intrinsic","baseline_time_s","p_block_w",
// "max_clock":{time_s,energy_j,mhz},"points":[{time_s,energy_j,mhz},...]}.
// The reader throws InputError naming `what` when the document is not
// readable; whether it fits the job is coord's to check.
nlohmann::json SolvedPlanToJson(const coord::SolvedPlan& plan);
coord::SolvedPlan SolvedPlanFromJson(const nlohmann::json& j, const std::string& what);

// Zeus-style job ids: "YYYY-MM-DD-HH-MM-SS+dp<D>+pp<P>+tp<T>+joulepipe[+<metadata>]"
// in local time, as zeus's JobInfo.set_job_id writes them; characters a job
// id may not hold (space, '/', control and non-ASCII bytes) in the metadata
// become '_', and the id is cut to protocol::kMaxJobIdLength.
std::string ZeusStyleJobId(int dp, int pp, int tp, const std::string& metadata,
                           std::int64_t unix_s);

}  // namespace joulepipe::serve
