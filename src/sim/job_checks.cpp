#include "job_checks.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/sim/simulate_job.hpp"

namespace joulepipe::sim {

namespace {

using model::InputError;

using model::Format;

using model::Require;

bool Within(double value, double low, double high) {
  return std::isfinite(value) && value >= low && value <= high;
}

// A duration given in `unit` (1e-3 for ms): 0..most seconds.
void RequireDuration(const char* field, double seconds, double most, double unit,
                     const char* unit_name, const char* meaning) {
  Require(Within(seconds, 0, most), field,
          Format("%s must be 0..%.15g %s (got %g %s): %s", field, most / unit, unit_name,
                 seconds / unit, unit_name, meaning));
}

}  // namespace

void CheckIterationIndex(const char* field, int value, const char* meaning) {
  Require(value >= 0 && value <= kMaxIterationIndex, field,
          Format("%s must be 0..%d iterations (got %d): %s", field, kMaxIterationIndex, value,
                 meaning));
}

void CheckJobNumbers(const JobSpec& j, const schedule::Spec& spec) {
  Require(j.pipelines >= 1 && j.pipelines <= kMaxPipelines, "JobSpec::pipelines",
          Format("JobSpec::pipelines must be 1..%d (got %d): the data-parallel pipelines",
                 kMaxPipelines, j.pipelines));
  Require(j.gpus_per_stage >= 1 && j.gpus_per_stage <= kMaxGpusPerStage, "JobSpec::gpus_per_stage",
          Format("JobSpec::gpus_per_stage must be 1..%d (got %d): GPUs per stage "
                 "(tensor-parallel degree), 1 without TP",
                 kMaxGpusPerStage, j.gpus_per_stage));
  const std::int64_t gpus = std::int64_t{j.pipelines} * spec.stages * j.gpus_per_stage;
  Require(gpus <= kMaxJobGpus, "JobSpec::pipelines",
          Format("JobSpec::pipelines %d x Spec::stages %d x JobSpec::gpus_per_stage %d = %lld "
                 "GPUs; a job has at most %lld: simulate fewer pipelines",
                 j.pipelines, spec.stages, j.gpus_per_stage, static_cast<long long>(gpus),
                 static_cast<long long>(kMaxJobGpus)));
  Require(j.iterations >= 1, "JobSpec::iterations",
          Format("JobSpec::iterations must be at least 1 (got %d)", j.iterations));
  const double records = static_cast<double>(j.iterations) * j.pipelines * spec.stages;
  Require(records <= kMaxGpuRecords, "JobSpec::iterations",
          Format("JobSpec::iterations %d x JobSpec::pipelines %d x Spec::stages %d = %.3g "
                 "per-GPU records; at most %.0e are kept; simulate fewer iterations",
                 j.iterations, j.pipelines, spec.stages, records, kMaxGpuRecords));
  const double steps = records * spec.microbatches * spec.chunks * 2;
  Require(steps <= kMaxInstructionSteps, "JobSpec::iterations",
          Format("JobSpec::iterations x JobSpec::pipelines x instructions = %.3g simulated "
                 "instructions per policy (at most %.0e); simulate fewer iterations or pipelines",
                 steps, kMaxInstructionSteps));
  RequireDuration("JobSpec::p2p_latency_s", j.p2p_latency_s, kMaxP2pLatencyS, 1e-6, "us",
                  "the latency added to every dependency between stages; 0 for none");
  RequireDuration("JobSpec::allreduce_s", j.allreduce_s, kMaxAllreduceS, 1e-3, "ms",
                  "the gradient all-reduce after every iteration, at most an hour; 0 for none");
  Require(Within(j.clock_variability, 0, kMaxClockVariability), "JobSpec::clock_variability",
          Format("JobSpec::clock_variability must be 0..%g (got %g): the standard deviation "
                 "of each GPU's time factor, e.g. 0.02 for 2%%",
                 kMaxClockVariability, j.clock_variability));
  Require(Within(j.stall_probability, 0, 1), "JobSpec::stall_probability",
          Format("JobSpec::stall_probability must be 0..1 (got %g): the chance per iteration "
                 "and pipeline of a data-loader stall",
                 j.stall_probability));
  RequireDuration("JobSpec::stall_s", j.stall_s, kMaxStallS, 1e-3, "ms",
                  "the length of one data-loader stall, at most an hour");
  Require(j.checkpoint_every >= 0, "JobSpec::checkpoint_every",
          Format("JobSpec::checkpoint_every must be iterations >= 0 (got %d): a checkpoint "
                 "save after every that many iterations; 0 for none",
                 j.checkpoint_every));
  RequireDuration("JobSpec::checkpoint_s", j.checkpoint_s, kMaxStallS, 1, "s",
                  "the pause of one checkpoint save, at most an hour");
  RequireDuration("JobSpec::pipeline_offset_s", j.pipeline_offset_s, kMaxStallS, 1e-3, "ms",
                  "each pipeline's start after the one before it; 0 for none");
  const Straggler& g = j.straggler;
  Require(Within(g.slowdown, 1, kMaxStragglerSlowdown), "Straggler::slowdown",
          Format("Straggler::slowdown must be a factor 1..%g (got %g): the straggler's "
                 "iteration time over the normal one, e.g. 1.2; 1 = no straggler",
                 kMaxStragglerSlowdown, g.slowdown));
  CheckIterationIndex("Straggler::from_iteration", g.from_iteration,
                      "the first iteration the straggler is slow");
  CheckIterationIndex("Straggler::for_iterations", g.for_iterations,
                      "iterations per episode; 0 = until the end");
  CheckIterationIndex("Straggler::period", g.period,
                      "iterations from one episode to the next; 0 = one episode");
  if (g.period > 0) {
    Require(g.for_iterations >= 1 && g.for_iterations <= g.period, "Straggler::for_iterations",
            Format("Straggler::for_iterations must be 1..Straggler::period (%d) when the "
                   "straggler repeats (got %d)",
                   g.period, g.for_iterations));
  }
}

}  // namespace joulepipe::sim
