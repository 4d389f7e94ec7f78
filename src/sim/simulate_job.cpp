#include "joulepipe/sim/simulate_job.hpp"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string_view>
#include <utility>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::sim {

namespace {

using model::InputError;

// Per-GPU energy is kept for every iteration (SimulationResult::gpu_energy_j).
constexpr double kMaxGpuRecords = 5e7;
// Work guard: instructions simulated per policy.
constexpr double kMaxInstructionSteps = 2e10;

// The plan's request fields that come from this request: its errors and
// notes name them as the caller set them.
constexpr std::pair<std::string_view, std::string_view> kPlanFields[] = {
    {"PlanRequest::p_block_w", "SimulateRequest::p_block_w"},
    {"PlanRequest::resolution_s", "SimulateRequest::resolution_s"},
};

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

// Throws InputError(field, message) unless `ok`.
void Require(bool ok, const char* field, const std::string& message) {
  if (!ok) throw InputError(field, message);
}

bool FiniteAtLeast(double value, double low) {
  return std::isfinite(value) && value >= low;
}

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
  schedule::CheckStagesAndMicrobatches(r.spec);
  const JobSpec& j = r.job;
  if (r.p_block_w) model::CheckPBlock(*r.p_block_w, "SimulateRequest::p_block_w");
  Require(j.pipelines >= 1, "JobSpec::pipelines",
          "JobSpec::pipelines must be at least 1 (got " + std::to_string(j.pipelines) +
              "): the number of data-parallel pipelines");
  Require(j.gpus_per_stage >= 1, "JobSpec::gpus_per_stage",
          "JobSpec::gpus_per_stage must be at least 1 (got " + std::to_string(j.gpus_per_stage) +
              "): GPUs per stage (tensor-parallel degree), 1 without TP");
  Require(j.iterations >= 1, "JobSpec::iterations",
          "JobSpec::iterations must be at least 1 (got " + std::to_string(j.iterations) + ")");
  const Straggler& g = j.straggler;
  Require(std::isfinite(g.slowdown) && g.slowdown >= 1, "Straggler::slowdown",
          Format("Straggler::slowdown must be a finite factor >= 1 (got %g): the straggler's "
                 "iteration time over the normal one, e.g. 1.2; 1 = no straggler",
                 g.slowdown));
  if (g.slowdown > 1) {
    Require(g.pipeline >= 0 && g.pipeline < j.pipelines, "Straggler::pipeline",
            "Straggler::pipeline must be 0.." + std::to_string(j.pipelines - 1) + " (got " +
                std::to_string(g.pipeline) + ") for JobSpec::pipelines " +
                std::to_string(j.pipelines));
  }
  Require(g.from_iteration >= 0, "Straggler::from_iteration",
          "Straggler::from_iteration must be >= 0 (got " + std::to_string(g.from_iteration) + ")");
  Require(g.for_iterations >= 0, "Straggler::for_iterations",
          "Straggler::for_iterations must be >= 0 (got " + std::to_string(g.for_iterations) +
              "); 0 = until the end");
  Require(g.period >= 0, "Straggler::period",
          "Straggler::period must be >= 0 (got " + std::to_string(g.period) + "); 0 = one episode");
  if (g.period > 0) {
    Require(g.for_iterations >= 1 && g.for_iterations <= g.period, "Straggler::for_iterations",
            "Straggler::for_iterations must be 1..Straggler::period (" + std::to_string(g.period) +
                ") when the straggler repeats (got " + std::to_string(g.for_iterations) + ")");
  }
  Require(r.detection_lag >= 0, "SimulateRequest::detection_lag",
          "SimulateRequest::detection_lag must be >= 0 iterations (got " +
              std::to_string(r.detection_lag) + ")");
  Require(
      std::isfinite(j.clock_variability) && j.clock_variability >= 0 && j.clock_variability <= 0.2,
      "JobSpec::clock_variability",
      Format("JobSpec::clock_variability must be in [0, 0.2] (got %g): the standard deviation "
             "of each GPU's time factor, e.g. 0.02 for 2%%",
             j.clock_variability));
  Require(
      std::isfinite(j.stall_probability) && j.stall_probability >= 0 && j.stall_probability <= 1,
      "JobSpec::stall_probability",
      Format("JobSpec::stall_probability must be in [0, 1] (got %g): the chance per iteration "
             "and pipeline of a data-loader stall",
             j.stall_probability));
  Require(FiniteAtLeast(j.stall_s, 0), "JobSpec::stall_s",
          Format("JobSpec::stall_s must be finite and >= 0 (got %g ms)", j.stall_s * 1e3));
  Require(FiniteAtLeast(j.p2p_latency_s, 0), "JobSpec::p2p_latency_s",
          Format("JobSpec::p2p_latency_s must be finite and >= 0 (got %g us)",
                 j.p2p_latency_s * 1e6));
  Require(FiniteAtLeast(j.allreduce_s, 0), "JobSpec::allreduce_s",
          Format("JobSpec::allreduce_s must be finite and >= 0 (got %g ms)", j.allreduce_s * 1e3));
  Require(std::isfinite(r.resolution_s) && r.resolution_s > 0, "SimulateRequest::resolution_s",
          Format("SimulateRequest::resolution_s must be a finite time > 0 (got %g ms); e.g. 5 ms",
                 r.resolution_s * 1e3));
  Require(r.timeline_iterations >= 0, "SimulateRequest::timeline_iterations",
          "SimulateRequest::timeline_iterations must be >= 0 (got " +
              std::to_string(r.timeline_iterations) + "); 0 records no timeline");
  const double records = static_cast<double>(j.iterations) * j.pipelines * r.spec.stages;
  Require(records <= kMaxGpuRecords, "JobSpec::iterations",
          Format("JobSpec::iterations %d x JobSpec::pipelines %d x Spec::stages %d = %.3g "
                 "per-GPU records; at most %.0e are kept; simulate fewer iterations",
                 j.iterations, j.pipelines, r.spec.stages, records, kMaxGpuRecords));
  const double steps = records * r.spec.microbatches * r.spec.chunks * 2;
  Require(steps <= kMaxInstructionSteps, "JobSpec::iterations",
          Format("JobSpec::iterations x JobSpec::pipelines x instructions = %.3g simulated "
                 "instructions per policy (at most %.0e); simulate fewer iterations or pipelines",
                 steps, kMaxInstructionSteps));
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
  plan_request.slowdown = 0;  // the intrinsic plan: least energy within T
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
  run.detection_lag = request.detection_lag;
  run.timeline_iterations = request.timeline_iterations;
  run.max_timeline_events = 500'000;  // each policy: ~75 MB of JSON at most
  outcome.baseline = simulator.Run(Policy::kBaseline, run);
  Report(request, 0.5);
  outcome.joulepipe = simulator.Run(Policy::kJoulepipe, run);
  outcome.simulate_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // What the non-straggler pipelines run once the straggler is known.
  outcome.straggler_plan = outcome.intrinsic;
  outcome.straggler_target_s = outcome.intrinsic.time_s;
  if (outcome.has_straggler()) {
    const int when = job.straggler.from_iteration + request.detection_lag;
    const std::vector<int> chosen = simulator.Choose(Policy::kJoulepipe, when,
                                                     request.detection_lag,
                                                     &outcome.straggler_target_s);
    const int other = job.straggler.pipeline == 0 ? 1 : 0;
    if (other < job.pipelines) {
      const CandidatePlan& c = simulator.candidates()[chosen[other]];
      outcome.straggler_plan = {c.time_s, c.energy_j, c.mhz};
    }
  }
  Report(request, 1);
  return outcome;
}

}  // namespace joulepipe::sim
