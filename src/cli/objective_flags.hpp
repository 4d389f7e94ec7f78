// The operating-point flags that `plan` and `simulate` share: which point of
// the frontier to run (model::Objective), and how to say it.
//
//   (default)             same iteration time as every clock at maximum
//   --max-slowdown F      least energy within F x that time (F >= 1)
//   --least-energy        least energy at any time
//   --energy-budget J     fastest within J per iteration
//   --power-budget W      fastest within W on average
//   --host-power W        count W per GPU of host power (CPU, DRAM, NIC) for
//                         as long as the iteration lasts, in every goal
// At most one goal flag; `plan`'s older --slowdown FRACTION is
// --max-slowdown 1+FRACTION.
#pragma once

#include <string>

#include "joulepipe/solver/operating_point.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace joulepipe::cli {

struct ObjectiveFlags {
  double max_slowdown = 1;
  bool least_energy = false;
  double energy_budget_j = 0;
  double power_budget_w = 0;
  double host_power_w = 0;
  CLI::Option* max_slowdown_option = nullptr;
  CLI::Option* energy_budget_option = nullptr;
  CLI::Option* power_budget_option = nullptr;
  CLI::Option* slowdown_option = nullptr;  // `plan`'s --slowdown, when it has one
};

// Adds the flags above; `what` names what the budgets cover ("the
// pipeline's", "the whole job's") in their help texts.
void AddObjectiveFlags(CLI::App* command, ObjectiveFlags* flags, const std::string& what);

// The objective, and the slowdown fraction it plans within (0 unless
// --max-slowdown or --slowdown was given; `slowdown` is --slowdown's value).
// Throws InputError when more than one goal flag is given or
// --max-slowdown is below 1.
model::Objective ObjectiveFromFlags(const ObjectiveFlags& flags, double slowdown,
                                    double* slowdown_out);

// For people: "same time as every clock at maximum", "least energy within
// 1.05 x that time", "fastest within 5 MW", ... with the energy scope
// appended: "; counts GPU energy" or "; counts GPU + host energy (host
// 150 W per GPU)".
std::string ObjectiveText(const model::Objective& objective, double slowdown);

}  // namespace joulepipe::cli
