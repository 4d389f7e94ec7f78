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

// What a solve costs, in units of about 0.1 to 0.5 us on a 2-core machine:
// the instructions of one iteration x the options each is weighed with
// (the clocks of its (stage, kind) on the cost hull's Pareto list, to the
// power 1.3) x the passes over them (the grid's deadlines rounded, a sample
// of them refined). bench_plan_work measures it against solve times: over
// 32 jobs (2-8 stages, 4-16 microbatches, 8-512 clocks, two grids) seconds
// per unit vary 4.4-fold, against 9,500-fold for instructions x deadlines.
// Checks that `profile`, as a job keeps it
// (PlannableProfile), fits `request` (its stages, instructions and grid):
// throws model::InputError naming the field or the profile otherwise.
double PlanWork(const model::Profile& profile, const solver::PlanRequest& request);
// The clock settings alone: over the instructions of one iteration, the
// options each is planned with (the same checks).
double PlanOptions(const model::Profile& profile, const solver::PlanRequest& request);

// A solve of more work than this is heavy: about a second on a 2-core
// machine (bench_plan_work). `joulepipe serve` keeps a planner free of
// heavy jobs.
inline constexpr double kLightPlanWork = 3e6;

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
