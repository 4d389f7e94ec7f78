#include "joulepipe/model/objective.hpp"

#include <cmath>
#include <limits>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::model {

namespace {

using model::Format;
using model::InputError;

void CheckBudget(const char* field, double value, bool used, const char* unit, const char* what) {
  if (!used) {
    if (value == 0) return;
    throw InputError(field, Format("%s is set (%g %s) but the goal is not its own; choose one "
                                   "goal",
                                   field, value, unit));
  }
  if (std::isfinite(value) && value > 0) return;
  throw InputError(field, Format("%s must be > 0 %s (got %g): %s", field, unit, value, what));
}

}  // namespace

std::string_view GoalName(Goal goal) {
  switch (goal) {
    case Goal::kWithinDeadline:
      return "within-deadline";
    case Goal::kLeastEnergy:
      return "least-energy";
    case Goal::kEnergyBudget:
      return "energy-budget";
    case Goal::kPowerBudget:
      return "power-budget";
  }
  return "?";
}

Objective ChooseGoal(const GoalChoice& choice, double* slowdown) {
  std::string given;
  int goals = 0;
  auto count = [&](bool on, const char* field) {
    if (!on) return;
    ++goals;
    given += given.empty() ? field : std::string(", ") + field;
  };
  count(choice.slowdown.has_value(), "PlanRequest::slowdown");
  count(choice.least_energy, "Objective::least_energy");
  count(choice.energy_budget_j.has_value(), "Objective::energy_budget_j");
  count(choice.power_budget_w.has_value(), "Objective::power_budget_w");
  if (goals > 1) {
    throw model::InputError("Objective::goal", "choose one goal; got " + given +
                                                   " (each picks a different point of the "
                                                   "frontier)");
  }
  Objective o;
  *slowdown = choice.slowdown.value_or(0);
  if (choice.least_energy) o.goal = Goal::kLeastEnergy;
  if (choice.energy_budget_j) {
    o.goal = Goal::kEnergyBudget;
    o.energy_budget_j = *choice.energy_budget_j;
  }
  if (choice.power_budget_w) {
    o.goal = Goal::kPowerBudget;
    o.power_budget_w = *choice.power_budget_w;
  }
  return o;
}

void CheckObjective(const Objective& o) {
  CheckBudget("Objective::energy_budget_j", o.energy_budget_j, o.goal == Goal::kEnergyBudget, "J",
              "the energy per iteration the plan may use at most");
  CheckBudget("Objective::power_budget_w", o.power_budget_w, o.goal == Goal::kPowerBudget, "W",
              "the average power (energy per iteration / iteration time) the plan may draw");
  if (!std::isfinite(o.outside_wait_s) || o.outside_wait_s < 0 || o.outside_wait_s > 3600 ||
      !std::isfinite(o.outside_wait_w) || o.outside_wait_w < 0 ||
      o.outside_wait_w > kMaxHostPowerW) {
    throw InputError("Objective::outside_wait_s",
                     Format("Objective::outside_wait_s must be 0..3600 s and outside_wait_w "
                            "0..%g W (got %g s, %g W): the time every GPU waits per iteration "
                            "outside the pipeline (the DP all-reduce) and its power",
                            kMaxHostPowerW, o.outside_wait_s, o.outside_wait_w));
  }
  if (!std::isfinite(o.host_power_w) || o.host_power_w < 0 || o.host_power_w > kMaxHostPowerW) {
    throw InputError("Objective::host_power_w",
                     Format("Objective::host_power_w must be 0..%g W per GPU (got %g): the "
                            "CPU, DRAM and NIC power that one GPU's share of a node draws "
                            "while the job runs (e.g. 150); 0 counts GPU energy only",
                            kMaxHostPowerW, o.host_power_w));
  }
}

std::string EnergyScope(const Objective& o) {
  if (!CountsHost(o)) return "GPU energy";
  return Format("GPU + host energy (host %g W per GPU)", o.host_power_w);
}

double CountedEnergyJ(double time_s, double gpu_energy_j, const Objective& o, int gpus) {
  return gpu_energy_j + o.outside_wait_s * o.outside_wait_w * gpus +
         o.host_power_w * gpus * CountedTimeS(time_s, o);
}

std::size_t ChooseOperatingPoint(const std::vector<Prediction>& points, const Objective& o,
                                 double deadline_s, int gpus, double scale) {
  CheckObjective(o);
  if (points.empty()) throw std::logic_error("ChooseOperatingPoint: an empty frontier");
  auto counted = [&](const Prediction& p) {
    return scale * CountedEnergyJ(p.time_s, p.energy_j, o, gpus);
  };
  const std::size_t none = points.size();
  std::size_t best = none;
  double least = std::numeric_limits<double>::infinity();  // for the budgets' messages
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Prediction& p = points[i];
    const double e = counted(p);
    switch (o.goal) {
      case Goal::kWithinDeadline:
        if (p.time_s <= deadline_s && (best == none || e < counted(points[best]))) best = i;
        break;
      case Goal::kLeastEnergy:
        if (best == none || e < counted(points[best])) best = i;
        break;
      // Points ascend in time: the first that meets the budget is the fastest.
      case Goal::kEnergyBudget:
        least = std::min(least, e);
        if (best == none && e <= o.energy_budget_j) best = i;
        break;
      case Goal::kPowerBudget:
        least = std::min(least, e / CountedTimeS(p.time_s, o));
        if (best == none && e <= o.power_budget_w * CountedTimeS(p.time_s, o)) best = i;
        break;
    }
  }
  if (best != none) return best;
  const std::string scope = EnergyScope(o);
  switch (o.goal) {
    case Goal::kWithinDeadline:
      throw InputError("PlanRequest::slowdown",
                       Format("no plan finishes within the deadline %.6g s; allow more "
                              "PlanRequest::slowdown",
                              deadline_s));
    case Goal::kLeastEnergy:
      break;
    case Goal::kEnergyBudget:
      throw InputError("Objective::energy_budget_j",
                       Format("no plan uses at most Objective::energy_budget_j = %.6g J per "
                              "iteration (%s); the least any plan uses is %.6g J: raise the "
                              "budget to at least that",
                              o.energy_budget_j, scope.c_str(), least));
    case Goal::kPowerBudget:
      throw InputError("Objective::power_budget_w",
                       Format("no plan draws at most Objective::power_budget_w = %.6g W on "
                              "average (%s); the least any plan draws is %.6g W: raise the "
                              "budget to at least that, or use fewer GPUs",
                              o.power_budget_w, scope.c_str(), least));
  }
  throw std::logic_error("ChooseOperatingPoint: no point for the least-energy goal");
}

}  // namespace joulepipe::model
