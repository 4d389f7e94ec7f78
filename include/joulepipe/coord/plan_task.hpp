// A job's solve, as a coordinator runs it: checked and sized when its
// profile arrives, then solved on a planner thread from a snapshot, without
// the caller's lock (coord::Job is not thread-safe; a PlanTask shares the
// job's profile, so nothing is copied and the job may change meanwhile).
// A coordinator plans only through here and Job::SetPlan: the solver's
// steps (prepare, solve) are coord's business, not the front end's.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "joulepipe/coord/job.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::coord {

// What a solve costs, roughly: the pipeline's instructions per iteration x
// the deadlines of the frontier grid (each deadline is a pass over the
// instructions). Checks that `profile`, as a job keeps it
// (PlannableProfile), fits `request` (its stages, instructions and grid):
// throws model::InputError naming the field or the profile otherwise.
double PlanWork(const model::Profile& profile, const solver::PlanRequest& request);

// One solve of one job: its profile (shared with the job) and its request.
struct PlanTask {
  std::shared_ptr<const model::Profile> profile;
  solver::PlanRequest request;

  // Solves the frontier (solver::PlanPipeline), for Job::SetPlan. Throws
  // model::Cancelled once *cancel rises, model::InputError when the profile
  // cannot be planned; `progress` hears each phase's name.
  solver::PipelinePlan Run(const std::atomic<bool>* cancel,
                           std::function<void(const char* phase, double fraction)> progress) const;
};

// The solve a job that is ready to plan (Job::ready_to_plan) needs now.
PlanTask PlanTaskOf(const Job& job);

}  // namespace joulepipe::coord
