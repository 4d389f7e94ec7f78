// The task "simulate a job": plan one pipeline's frontier (solver::
// PlanPipeline), then simulate a data-parallel job of D such pipelines
// (simulator.hpp) under two policies and compare them.
//
//   baseline   every pipeline runs every instruction at its highest clock.
//   joulepipe  every pipeline runs the intrinsic plan (by default least
//              energy at the all-max-clock time T; `objective` and
//              `slowdown` choose another operating point, whose time is
//              then the healthy iteration time); while a straggler is known, the
//              straggler keeps it and every other pipeline runs the
//              least-energy frontier plan whose time is <= T' (the
//              straggler's iteration time), switching back when it recovers.
//
// The plan is asked for the two deadlines that matter exactly: T and, with a
// straggler, T' = slowdown * T; the grid between them can stay coarse.
// All figures are GPU energy simulated from the profile (not measured).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/simulator.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/operating_point.hpp"

namespace joulepipe::sim {

struct SimulateRequest {
  schedule::Spec spec;  // one pipeline's schedule
  // GPU power while blocked or idle (W): the caller's value, or unset for
  // the profile's metadata (the rule of schedule::ResolvePBlock). It becomes
  // job.p_block_w; the job's own field is ignored.
  std::optional<double> p_block_w;
  // Pipelines, TP degree, faults, iterations, seed. A straggler with
  // slowdown 1 is no straggler (straggler.pipeline is ignored then).
  JobSpec job;
  // The operating point every pipeline runs while healthy (solver::
  // Objective; default: least GPU energy within (1 + slowdown) T, slowdown
  // 0). Its budgets are the whole job's: energy per iteration and average
  // power of all pipelines x stages x TP GPUs (host power per GPU).
  model::Objective objective;
  double slowdown = 0;  // kWithinDeadline: allowed increase over T, a fraction >= 0
  // How joulepipe learns of a straggler (simulator.hpp, Detection): the
  // oracle, detection_lag iterations late, or the coordinator's detector on
  // the simulated iteration times (window iterations to switch and back).
  Detection detection = Detection::kOracle;
  int detection_lag = 0;  // kOracle: iterations until the policy knows a slowdown, >= 0
  protocol::StragglerOptions detector;  // kMeasured
  double resolution_s = 5e-3;           // frontier grid (s), > 0; T and T' are planned exactly
  int timeline_iterations = 0;          // > 0: record the first N iterations of both policies
  double waveform_dt_s = 0;             // > 0: both policies' job waveforms (RunOptions)
  // Called from the calling thread: phase ("relaxation", "rounding" while
  // planning, then "simulating") and the fraction of it done. Optional.
  std::function<void(const char* phase, double fraction)> progress;
  // When it becomes true the call stops with model::Cancelled. Optional.
  const std::atomic<bool>* cancel = nullptr;
  std::string profile_name = "the profile";  // names the profile in messages
};

// The plausible ranges of a simulated job (docs/limits.md, "Numbers and
// ranges"); the schedule's own (stages, microbatches, chunks), P_block and
// the resolution are solver::CheckPlanRequest's.
inline constexpr int kMaxPipelines = 100'000;             // JobSpec::pipelines (DP degree)
inline constexpr int kMaxGpusPerStage = 1024;             // JobSpec::gpus_per_stage (TP)
inline constexpr std::int64_t kMaxJobGpus = 10'000'000;   // pipelines x stages x TP
inline constexpr double kMaxP2pLatencyS = 1;              // JobSpec::p2p_latency_s
inline constexpr double kMaxAllreduceS = 3600;            // JobSpec::allreduce_s
inline constexpr double kMaxStallS = 3600;                // JobSpec::stall_s
inline constexpr double kMaxClockVariability = 0.2;       // JobSpec::clock_variability
inline constexpr double kMaxStragglerSlowdown = 100;      // Straggler::slowdown
inline constexpr int kMaxIterationIndex = 1'000'000'000;  // from/for/period, lags
// Work guards: per-GPU energy is kept for every iteration, and every
// instruction of every pipeline and iteration is simulated per policy.
inline constexpr double kMaxGpuRecords = 5e7;         // iterations x pipelines x stages
inline constexpr double kMaxInstructionSteps = 2e10;  // x instructions per pipeline

// Checks the numbers of a request (not the profile), so a caller can refuse
// them before reading any file: the schedule and planning fields as
// solver::CheckPlanRequest does, then every number of the job against the
// ranges above. Throws model::InputError naming the field (JobSpec::pipelines,
// Straggler::slowdown, SimulateRequest::resolution_s, ...), its range and
// the fix.
void CheckSimulateRequest(const SimulateRequest& request);

struct SimulateOutcome {
  // The request as simulated: a straggler with slowdown <= 1 has pipeline -1,
  // job.p_block_w is the P_block used.
  SimulateRequest request;
  std::string p_block_source;  // "request" or "profile" (its metadata)
  schedule::Schedule schedule;
  solver::Evaluation max_clock;          // one pipeline, every instruction at its highest clock
  solver::FrontierPoint intrinsic;       // the objective's point (default: least energy within T)
  solver::FrontierPoint straggler_plan;  // what non-stragglers run while one is known
  double straggler_target_s = 0;         // T' = slowdown * intrinsic time
  std::size_t frontier_points = 0;
  solver::Frontier frontier;    // one pipeline's, as solved
  double solve_seconds = 0;     // planning
  double simulate_seconds = 0;  // both policies
  SimulationResult baseline, joulepipe;
  std::vector<std::string> notes;  // for people, e.g. two different P_block values

  // Every GPU of the job; at most kMaxJobGpus once checked.
  std::int64_t gpus() const {
    return std::int64_t{request.job.pipelines} * request.spec.stages * request.job.gpus_per_stage;
  }
  bool has_straggler() const {
    return request.job.straggler.pipeline >= 0 && request.job.straggler.slowdown > 1;
  }
};

// Checks the request and that the profile fits, plans one pipeline, simulates
// both policies. Throws model::InputError on bad input, model::Cancelled when
// the cancel flag is raised.
SimulateOutcome SimulateJob(const model::Profile& profile, const SimulateRequest& request);

}  // namespace joulepipe::sim
