// The JSON of protocol/messages.hpp, both ways, in one place: what the
// coordinator writes is what the rank reads (docs/coordination.md,
// docs/openapi.yaml).
//
// Readers check the whole document before returning and throw
// model::InputError: request bodies (IterationReportFromJson) name the
// member as "IterationReport::<key>" and refuse unknown members; answers
// (RankPlanFromJson) name it by its path in the answer ("instructions[3]
// .frequency") and ignore members they do not know, so a newer coordinator
// may add some.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "joulepipe/protocol/job.hpp"
#include "joulepipe/protocol/messages.hpp"

namespace joulepipe::protocol {

// {"rank","iteration","time_s","energy_j"|null}
nlohmann::json IterationReportToJson(const IterationReport& report);
// Checks the numbers (CheckIterationReport) too: a report the coordinator
// would ignore (before planning) is refused all the same.
IterationReport IterationReportFromJson(const nlohmann::json& j);

// {"job_id","rank","pipeline","stage","version","point","reason",
//  "predicted":{"time_s","energy_j"},"frequencies":[["forward",MHz],...],
//  "instructions":[{"instruction","microbatch","chunk","frequency"},...]}
// `predicted` is written only when set.
nlohmann::json RankPlanToJson(const RankPlan& plan, const std::string& job_id);
// Zeus's FrequencySchedule: {"rank","frequencies":[["forward",MHz],...]}.
nlohmann::json FrequencyScheduleToJson(const RankPlan& plan);
// The answer for `rank`, newer than `after_version`: the rank and the
// version must be those asked for, the instructions a non-empty list and the
// Zeus "frequencies", when present, the same list. Throws model::InputError
// whose message starts with the path ("version is 1 but ...").
RankPlan RankPlanFromJson(const nlohmann::json& answer, int rank, int after_version);

// POST /jobs, and the form a store keeps. JobConfigFromJson reads
// "JobConfig::<key>": pp_degree, dp_degree, tp_degree, schedule
// ("1f1b" | "gpipe" | "interleaved"), microbatches required; job_id
// ("" or absent: the server assigns one), world_size (absent: computed),
// chunks, p_block_w, resolution_s, slowdown, gpu, metadata and straggler
// {threshold, recover_below, window, min_change} optional. It does not run
// coord::CheckJobConfig (the ranges are the policy's). `Form::kComplete`
// writes every member (what a store keeps, read back exactly);
// `Form::kRequest` leaves out what the reader fills in the same way (an
// empty job_id, world_size 0, an unset p_block_w, members at their
// defaults), as a client sends it.
enum class Form { kComplete, kRequest };
JobConfig JobConfigFromJson(const nlohmann::json& j);
nlohmann::json JobConfigToJson(const JobConfig& config, Form form = Form::kComplete);

// POST /jobs/{id}/ranks (and Zeus's POST /register_rank/{id}, the same
// members): {"rank","dp_rank","pp_rank","tp_rank","available_frequencies"}.
// `strict` refuses unknown members. Ranges are coord's to check.
RankInfo RankInfoFromJson(const nlohmann::json& j, bool strict);
nlohmann::json RankInfoToJson(const RankInfo& info);

// {"version","iteration","time_unix_s","reason","slowdowns","target_s",
//  "point_of_pipeline","predicted_saving_j"}; the reader throws InputError
// naming PlanSwitch when a member is missing or of the wrong type.
nlohmann::json PlanSwitchToJson(const PlanSwitch& s);
PlanSwitch PlanSwitchFromJson(const nlohmann::json& j);

// GET /jobs/{id}: the config's members (as JobConfigToJson's kComplete form,
// without straggler and resolution_s), "phase", "registered_ranks",
// "has_profile", "plan_version", "completed_iterations",
// "dropped_iterations", "failure" and "profile_notes" when set and, once
// planned, "frontier"
// {baseline_time_s, max_clock_energy_j, p_block_w, intrinsic,
// points:[{time_s, energy_j}]}, "point_of_pipeline", "slowdowns" and
// "switches" (PlanSwitchToJson each).
nlohmann::json JobStatusToJson(const JobStatus& status);

// JobStatusToJson's members and "created_unix_s", "last_active_unix_s",
// "waiting_requests", "planning" {state, running_s (null unless running),
// time_limit_s, instructions, work (null: unknown), heavy}, "zeus"
// {schedule_asked, schedule_released} and, once planned, "pipelines"
// [{pipeline, point, time_s, energy_j, slowdown}] (each pipeline's
// frontier point).
nlohmann::json ServedJobStatusToJson(const ServedJobStatus& status);
// [{job_id, phase, registered_ranks, world_size, plan_version,
//   created_unix_s, last_active_unix_s}]
nlohmann::json JobListToJson(const std::vector<JobListing>& jobs);

}  // namespace joulepipe::protocol
