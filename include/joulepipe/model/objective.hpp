// Operating points: which point of an iteration time-energy frontier to run
// for a goal. The one rule: the planner (solver), the coordinator and the
// report all choose through it.
//
//   kWithinDeadline  least energy whose time is <= the deadline (1 + slowdown)
//                    x T, T the all-max-clock time: slowdown 0 is "same time
//                    as today" (the default), 0.05 "at most 5 % slower".
//   kLeastEnergy     least energy at any time.
//   kEnergyBudget    fastest whose energy per iteration is <= the budget.
//   kPowerBudget     fastest whose average power (energy / time) is <= the
//                    budget.
//
// The energy a goal counts is the frontier's GPU energy plus, when
// host_power_w > 0, the host's: host_power_w x GPUs x iteration time (CPU,
// DRAM, NIC per GPU, which draw power for as long as the iteration lasts).
// So with a host power a slower plan must save more GPU energy than the
// host spends in the extra time: "least energy" is least for the whole node.
// Budgets bound the frontier's figures times `scale`: 1 for one pipeline's
// plan, pipelines x TP for a whole job of such pipelines.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <vector>

#include "joulepipe/model/plan.hpp"

namespace joulepipe::model {

enum class Goal { kWithinDeadline, kLeastEnergy, kEnergyBudget, kPowerBudget };

// "within-deadline" | "least-energy" | "energy-budget" | "power-budget".
std::string_view GoalName(Goal goal);

struct Objective {
  Goal goal = Goal::kWithinDeadline;
  double energy_budget_j = 0;  // kEnergyBudget: J per iteration, > 0
  double power_budget_w = 0;   // kPowerBudget: W, > 0
  double host_power_w = 0;     // W per GPU counted with the GPUs' energy, >= 0 (0: GPU only)
  // Time every GPU waits per iteration outside the pipeline's schedule (the
  // DP gradient all-reduce), s >= 0, and the power it waits at per GPU
  // (P_block; PlanPipeline fills in the plan's when 0). The budgets and
  // the counted energy include it, so a budget is met by the job that runs
  // rather than by the pipeline alone.
  double outside_wait_s = 0;
  double outside_wait_w = 0;
};

// The plausible range of the host's power per GPU (docs/limits.md).
inline constexpr double kMaxHostPowerW = 10'000;

// Checks the budgets (finite, > 0, only for their goal) and host_power_w
// (0..kMaxHostPowerW). Throws model::InputError naming Objective::<field>.
void CheckObjective(const Objective& objective);

// The goals a front end was given, each optional. Each picks a different
// point of the frontier, so at most one may be set: the one rule, which
// every front end calls (the CLI's flags, the Python keywords).
struct GoalChoice {
  std::optional<double> slowdown;  // PlanRequest::slowdown: least energy within (1 + s) T
  bool least_energy = false;
  std::optional<double> energy_budget_j;
  std::optional<double> power_budget_w;
};

// The objective for `choice` (host_power_w 0) and the request's slowdown
// (0 unless given). Throws model::InputError "choose one goal; got
// PlanRequest::slowdown, Objective::energy_budget_j (each picks a different
// point of the frontier)", naming the fields given; a front end renames them
// (model::RenameFields) as its users know them.
Objective ChooseGoal(const GoalChoice& choice, double* slowdown);

// Whether the figures an objective counts are GPU-only or GPU + host.
inline bool CountsHost(const Objective& objective) {
  return objective.host_power_w > 0;
}

// "GPU energy" or "GPU + host energy (host 150 W per GPU)": for every output.
std::string EnergyScope(const Objective& objective);

// The energy an objective counts for a point: GPU energy + host_power_w x
// gpus x time_s (gpus: those the GPU energy covers). `time_s` and
// `gpu_energy_j` are the pipeline's; the outside wait is added to both.
double CountedEnergyJ(double time_s, double gpu_energy_j, const Objective& objective, int gpus);

// The iteration time an objective counts: the pipeline's + outside_wait_s.
inline double CountedTimeS(double time_s, const Objective& objective) {
  return time_s + objective.outside_wait_s;
}

// The index of the point (of a frontier, in ascending time) the objective
// chooses. `deadline_s` is used by kWithinDeadline only; `gpus` are the
// GPUs the points' energy covers (a pipeline's stages), `scale` multiplies
// their figures for the budgets (above). Throws model::InputError naming
// Objective::energy_budget_j / ::power_budget_w (with the least the points
// reach and what to do) when no point meets a budget, or
// PlanRequest::slowdown when no point is within the deadline.
std::size_t ChooseOperatingPoint(const std::vector<Prediction>& points, const Objective& objective,
                                 double deadline_s, int gpus, double scale = 1);

}  // namespace joulepipe::model
