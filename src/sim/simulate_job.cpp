#include "joulepipe/sim/simulate_job.hpp"

#include <chrono>
#include <cmath>
#include <string_view>
#include <utility>

#include "job_checks.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::sim {

namespace {

using model::InputError;

// The plan's request fields that come from this request: its errors and
// notes name them as the caller set them.
constexpr std::pair<std::string_view, std::string_view> kPlanFields[] = {
    {"PlanRequest::p_block_w", "SimulateRequest::p_block_w"},
    {"PlanRequest::resolution_s", "SimulateRequest::resolution_s"},
    {"PlanRequest::slowdown", "SimulateRequest::slowdown"},
};

using model::Require;

std::vector<CandidatePlan> ToCandidates(const solver::Frontier& frontier) {
  std::vector<CandidatePlan> out;
  out.reserve(frontier.points.size() + 1);
  for (const solver::FrontierPoint& p : frontier.points) {
    out.push_back({p.mhz, p.time_s, p.energy_j});
  }
  return out;
}

void StopIfCancelled(const SimulateRequest& r) {
  if (r.cancel != nullptr && r.cancel->load(std::memory_order_relaxed)) {
    throw model::Cancelled("the simulation was cancelled");
  }
}

void Report(const SimulateRequest& r, double fraction) {
  StopIfCancelled(r);
  if (r.progress) r.progress("simulating", fraction);
}

}  // namespace

void CheckSimulateRequest(const SimulateRequest& r) {
  // The schedule, P_block and the grid: the planner's rules, named as this
  // request's fields.
  solver::PlanRequest plan;
  plan.spec = r.spec;
  plan.p_block_w = r.p_block_w;
  plan.resolution_s = r.resolution_s;
  plan.slowdown = r.slowdown;
  plan.objective = r.objective;
  try {
    solver::CheckPlanRequest(plan);
  } catch (const InputError& e) {
    throw model::RenameFields(e, kPlanFields);
  }
  const JobSpec& j = r.job;
  CheckJobNumbers(j, r.spec);
  const Straggler& g = j.straggler;
  if (g.slowdown > 1) {
    Require(g.pipeline >= 0 && g.pipeline < j.pipelines, "Straggler::pipeline",
            "Straggler::pipeline must be 0.." + std::to_string(j.pipelines - 1) + " (got " +
                std::to_string(g.pipeline) + ") for JobSpec::pipelines " +
                std::to_string(j.pipelines));
  }
  CheckIterationIndex("SimulateRequest::detection_lag", r.detection_lag,
                      "iterations until the policy knows of a slowdown; 0 = immediate");
  coord::CheckStragglerOptions(r.detector);
  CheckIterationIndex("SimulateRequest::timeline_iterations", r.timeline_iterations,
                      "iterations recorded in the timeline; 0 records none");
}

SimulateOutcome SimulateJob(const model::Profile& profile, const SimulateRequest& request) {
  CheckSimulateRequest(request);
  SimulateOutcome outcome;
  outcome.request = request;
  JobSpec& job = outcome.request.job;
  if (job.straggler.slowdown <= 1) job.straggler.pipeline = -1;

  solver::PlanRequest plan_request;
  plan_request.spec = request.spec;
  plan_request.p_block_w = request.p_block_w;
  plan_request.slowdown = request.slowdown;  // the intrinsic plan: by default least energy within T
  plan_request.objective = request.objective;
  // A budget is the running job's: every GPU also waits for the all-reduce.
  if (plan_request.objective.outside_wait_s == 0) {
    plan_request.objective.outside_wait_s = request.job.allreduce_s;
  }
  plan_request.objective_scale =
      static_cast<double>(request.job.pipelines) * request.job.gpus_per_stage;
  plan_request.resolution_s = request.resolution_s;
  if (outcome.has_straggler()) plan_request.extra_deadline_factors = {job.straggler.slowdown};
  plan_request.progress = request.progress;
  plan_request.cancel = request.cancel;
  plan_request.profile_name = request.profile_name;
  solver::PipelinePlan plan;
  try {
    plan = solver::PlanPipeline(profile, plan_request);
  } catch (const InputError& e) {
    throw model::RenameFields(e, kPlanFields);
  }
  for (const std::string& note : plan.notes) {
    outcome.notes.push_back(model::RenameFields(note, kPlanFields));
  }
  job.p_block_w = plan.p_block_w;
  outcome.p_block_source = plan.p_block_source;
  outcome.schedule = std::move(plan.schedule);
  outcome.max_clock = plan.baseline;
  outcome.intrinsic = plan.chosen_point();
  outcome.solve_seconds = plan.solve_seconds;
  outcome.frontier_points = plan.frontier.points.size();
  const int intrinsic_index = static_cast<int>(plan.chosen);
  outcome.frontier = std::move(plan.frontier);
  const solver::Frontier& frontier = outcome.frontier;

  // Candidates: every frontier point, then the all-max-clock plan as the
  // baseline.
  std::vector<CandidatePlan> candidates = ToCandidates(frontier);
  const int baseline = static_cast<int>(candidates.size());
  candidates.push_back(
      {frontier.max_clock.mhz, frontier.max_clock.time_s, frontier.max_clock.energy_j});

  Report(request, 0);
  const auto started = std::chrono::steady_clock::now();
  const Simulator simulator(outcome.schedule, profile, job, std::move(candidates), baseline,
                            intrinsic_index);
  RunOptions run;
  run.detection = request.detection;
  run.detection_lag = request.detection_lag;
  run.detector = request.detector;
  run.timeline_iterations = request.timeline_iterations;
  run.waveform_dt_s = request.waveform_dt_s;
  run.max_timeline_events = 500'000;  // each policy: ~75 MB of JSON at most
  outcome.baseline = simulator.Run(Policy::kBaseline, run);
  Report(request, 0.5);
  outcome.joulepipe = simulator.Run(Policy::kJoulepipe, run);
  outcome.simulate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // What the non-straggler pipelines run once the straggler is known.
  outcome.straggler_plan = outcome.intrinsic;
  outcome.straggler_target_s = outcome.intrinsic.time_s;
  const int other = job.straggler.pipeline == 0 ? 1 : 0;
  if (outcome.has_straggler() && request.detection == Detection::kMeasured) {
    // The first plan the detector moved a non-straggler to.
    const SimulationResult& r = outcome.joulepipe;
    for (int i = 0; i < job.iterations && other < job.pipelines; ++i) {
      const int c = r.plan[static_cast<std::size_t>(i) * job.pipelines + other];
      if (c == intrinsic_index) continue;
      const CandidatePlan& k = simulator.candidates()[c];
      outcome.straggler_plan = solver::FrontierPoint();
      outcome.straggler_plan.time_s = k.time_s;
      outcome.straggler_plan.energy_j = k.energy_j;
      outcome.straggler_plan.mhz = k.mhz;
      outcome.straggler_target_s = r.iterations[i].target_s;
      break;
    }
  } else if (outcome.has_straggler()) {
    const int when = job.straggler.from_iteration + request.detection_lag;
    const std::vector<int> chosen = simulator.Choose(
        Policy::kJoulepipe, when, request.detection_lag, &outcome.straggler_target_s);
    if (other < job.pipelines) {
      const CandidatePlan& c = simulator.candidates()[chosen[other]];
      outcome.straggler_plan = solver::FrontierPoint();
      outcome.straggler_plan.time_s = c.time_s;
      outcome.straggler_plan.energy_j = c.energy_j;
      outcome.straggler_plan.mhz = c.mhz;
    }
  }
  Report(request, 1);
  return outcome;
}

}  // namespace joulepipe::sim
