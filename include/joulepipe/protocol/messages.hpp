// The messages between a training job's ranks and its coordinator — the
// rank side of the conversation — each defined once, with the limits the
// protocol puts on them. Both ends use these types: the coordination policy
// (coord::Job, which `joulepipe serve` and the embedded coordinator drive)
// and each rank's client (runtime::CoordinatorClient, CoordinatedPlan).
// Their JSON, both ways, is protocol/json.hpp; the job's messages are
// protocol/job.hpp. A part below coord, runtime and serve: it knows model's
// and schedule's value types and nothing else.
//
// Errors: the Check* functions throw model::InputError naming the field as
// "IterationReport::<member>" with the range and what to send instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/plan.hpp"

namespace joulepipe::protocol {

// A rank's long poll for its plan waits 0..kMaxPlanWaitS seconds,
// kDefaultPlanWaitS when the request does not say.
inline constexpr double kMaxPlanWaitS = 300;
inline constexpr double kDefaultPlanWaitS = 30;

// An iteration report's ranges (docs/limits.md).
inline constexpr std::int64_t kMaxIteration = 1'000'000'000'000;  // IterationReport::iteration
inline constexpr double kMaxIterationTimeS = 86'400;              // IterationReport::time_s
inline constexpr double kMaxIterationEnergyJ = 1e12;              // IterationReport::energy_j

// One rank's iteration: POST /jobs/{id}/iterations, and what coord::Job
// gathers per iteration.
struct IterationReport {
  int rank = -1;
  std::int64_t iteration = 0;  // >= 0, counted by the rank from 0
  // From the iteration's start until this rank's pipeline work ended (before
  // the gradient all-reduce), (0, kMaxIterationTimeS].
  double time_s = 0;
  // This rank's GPU energy in the iteration, [0, kMaxIterationEnergyJ];
  // nullopt: not measured (sent as null).
  std::optional<double> energy_j;
};

// The rules on a report's numbers, each once (the service's readers, the
// Zeus route, coord::Job and the rank's client call these): iteration
// 0..kMaxIteration, time_s in (0, kMaxIterationTimeS], energy_j in
// [0, kMaxIterationEnergyJ] when present. They throw model::InputError
// naming `field` (or IterationReport::...); the message names `name` (e.g.
// a list entry, "ProfilingResult::iter_time[3]") when given. Whether the
// iteration is near the job's current one is coord's (it needs the job).
void CheckIterationReport(const IterationReport& report);
bool IterationTimeOk(double time_s);      // the rule CheckIterationTime enforces
bool IterationEnergyOk(double energy_j);  // the rule CheckIterationEnergy enforces
void CheckIterationTime(double time_s, const std::string& field, const std::string& name = "");
void CheckIterationEnergy(double energy_j, const std::string& field, const std::string& name = "");

// What one rank runs: its stage's instructions of one iteration, in order
// (GET /jobs/{id}/plan; coord::Job::PlanFor).
struct RankPlan {
  int rank = 0;
  int pipeline = 0;    // the rank's dp_rank
  int stage = 0;       // the rank's pp_rank
  int version = 0;     // >= 1, rises with each new plan of the job
  int point = 0;       // the frontier point the plan is
  std::string reason;  // "initial plan", "straggler pipeline 3 at 1.20x: ...", "recovered"
  // The pipeline's iteration under this plan; always set by the coordinator,
  // optional on the wire.
  std::optional<model::Prediction> predicted;
  // model::Plan::stages[stage]'s shape, what runtime::Agent::SetPlan takes;
  // instruction.stage is `stage`.
  std::vector<model::PlannedInstruction> instructions;
  // The same order as Zeus's FrequencySchedule shape, (kind, MHz): filled
  // from `instructions` by whoever makes the plan (ZeusFrequencies).
  std::vector<std::pair<model::Kind, int>> frequencies;
};

// `instructions` as (kind, MHz) pairs.
std::vector<std::pair<model::Kind, int>> ZeusFrequencies(
    const std::vector<model::PlannedInstruction>& instructions);

}  // namespace joulepipe::protocol
