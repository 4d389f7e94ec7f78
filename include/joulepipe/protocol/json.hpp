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

}  // namespace joulepipe::protocol
