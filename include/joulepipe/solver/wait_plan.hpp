// Clocks while waiting in the planner (issue 15 item 3): the frontier's
// points re-priced with a wait model (model/wait_model.hpp) and the
// objective's choice made again on those prices.
//
// The frontier is solved with the flat P_block accounting (the solver's
// exact cost model); each point is then replayed (schedule::Replay) with the
// wait model, whose lowered waits make long-bubble plans cheaper. The choice
// is the request's objective (ChooseOperatingPoint) over the same points at
// their re-priced energies, so a plan with more, longer waits can win when
// lowering the clock while waiting pays. This is a re-ranking, not a
// wait-aware solve: a plan off the flat frontier is never considered. With an
// uncalibrated model every price and the choice equal the flat ones.
#pragma once

#include <cstddef>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::solver {

struct WaitPricing {
  model::WaitModel waits;        // as used: p_block_w is the plan's P_block
  std::vector<double> energy_j;  // [frontier point]: GPU energy with lowered waits
  double baseline_energy_j = 0;  // every instruction at its highest clock, lowered waits
  std::size_t chosen = 0;        // the objective's point at these energies
  double wait_s = 0;             // all waits of the chosen plan, all stages
  double lowered_wait_s = 0;     // of which at the wait clock
  int lowered_waits = 0;         // waits the chosen plan lowers
  model::Plan chosen_plan;       // the chosen point's plan, its waits annotated
};

// `plan` must be solved (SolvePipelinePlan) from `profile`. Throws
// model::InputError when no point meets the objective (as
// ChooseOperatingPoint), or model::Cancelled when the request's cancel flag
// is raised.
WaitPricing PriceWaits(const model::Profile& profile, const PipelinePlan& plan,
                       model::WaitModel waits);

// The plan of frontier point `index` with its waits annotated (AnnotateWaits).
model::Plan PlanWithWaits(const model::Profile& profile, const PipelinePlan& plan,
                          const model::WaitModel& waits, std::size_t index);

}  // namespace joulepipe::solver
