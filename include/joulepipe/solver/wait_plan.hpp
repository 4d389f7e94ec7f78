// Clocks while waiting in the planner: the frontier's points re-priced with
// a wait model (model/wait_model.hpp) and the objective's choice made again
// on those prices. The plan task does this itself when its request names a
// wait model (PlanRequest::waits, PipelinePlan::waits); front ends call
// PlanPipeline, not PriceWaits.
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
