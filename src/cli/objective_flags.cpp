#include "objective_flags.hpp"

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::cli {

void AddObjectiveFlags(CLI::App* c, ObjectiveFlags* f, const std::string& what) {
  f->max_slowdown_option =
      c->add_option("--max-slowdown", f->max_slowdown,
                    "Least energy within this factor of the all-max-clock iteration time, >= 1 "
                    "(1.05 = at most 5% slower; default 1: same time)")
          ->type_name("FACTOR");
  c->add_flag("--least-energy", f->least_energy, "Least energy per iteration at any speed");
  f->energy_budget_option =
      c->add_option("--energy-budget", f->energy_budget_j,
                    "Fastest plan using at most this energy per iteration, J (" + what + ")")
          ->type_name("J");
  f->power_budget_option = c->add_option("--power-budget", f->power_budget_w,
                                         "Fastest plan drawing at most this average power, W (" +
                                             what + "; energy per iteration / iteration time)")
                               ->type_name("WATTS");
  c->add_option("--host-power", f->host_power_w,
                "Host power per GPU (CPU, DRAM, NIC), W, counted for as long as an iteration "
                "lasts in every goal: least energy becomes least for the whole node (e.g. "
                "150, or what `measure --cpu` shows); default 0: GPU energy only")
      ->type_name("WATTS");
}

model::Objective ObjectiveFromFlags(const ObjectiveFlags& f, double slowdown,
                                    double* slowdown_out) {
  const bool old_slowdown = f.slowdown_option != nullptr && f.slowdown_option->count() > 0;
  const bool max_slowdown = f.max_slowdown_option->count() > 0;
  if (old_slowdown && max_slowdown) {
    throw model::InputError("--slowdown and --max-slowdown name the same goal; give one");
  }
  model::GoalChoice choice;
  if (old_slowdown) choice.slowdown = slowdown;
  if (max_slowdown) choice.slowdown = f.max_slowdown - 1;
  choice.least_energy = f.least_energy;
  if (f.energy_budget_option->count() > 0) choice.energy_budget_j = f.energy_budget_j;
  if (f.power_budget_option->count() > 0) choice.power_budget_w = f.power_budget_w;
  model::Objective o;
  try {
    o = model::ChooseGoal(choice, slowdown_out);
  } catch (const model::InputError& e) {
    // The flags as given: the slowdown's is whichever the user typed.
    const std::pair<std::string_view, std::string_view> names[] = {
        {"PlanRequest::slowdown", max_slowdown ? "--max-slowdown" : "--slowdown"},
        {"Objective::least_energy", "--least-energy"},
        {"Objective::energy_budget_j", "--energy-budget"},
        {"Objective::power_budget_w", "--power-budget"},
    };
    throw model::RenameFields(e, names);
  }
  o.host_power_w = f.host_power_w;
  if (f.max_slowdown_option->count() > 0) {
    if (!(f.max_slowdown >= 1 && f.max_slowdown <= 1 + solver::kMaxSlowdown)) {
      throw model::InputError(Printf(
          "--max-slowdown must be a factor 1..%g (got %g): 1.05 allows iterations 5%% longer "
          "than with every clock at maximum, 1 keeps the same time",
          1 + solver::kMaxSlowdown, f.max_slowdown));
    }
  }
  return o;
}

std::string ObjectiveText(const model::Objective& o, double slowdown) {
  std::string goal;
  switch (o.goal) {
    case model::Goal::kWithinDeadline:
      goal = slowdown > 0 ? Printf("least energy within %g x the all-max-clock time", 1 + slowdown)
                          : std::string("least energy at the all-max-clock time (same speed)");
      break;
    case model::Goal::kLeastEnergy:
      goal = "least energy at any speed";
      break;
    case model::Goal::kEnergyBudget:
      goal = Printf("fastest within %g J per iteration", o.energy_budget_j);
      break;
    case model::Goal::kPowerBudget:
      goal = Printf("fastest within %g W on average", o.power_budget_w);
      break;
  }
  return goal + "; counts " + model::EnergyScope(o);
}

}  // namespace joulepipe::cli
