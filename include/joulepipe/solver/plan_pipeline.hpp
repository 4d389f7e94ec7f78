// The task "plan a pipeline": one call from a profile and a request to the
// pipeline's iteration time-energy frontier and the plan to run. Every front
// end (the CLI's plan, sim::SimulateJob, the Python package, the runtime
// tests) plans through it; none re-sequences its steps.
//
// The chosen plan is the frontier point the request's objective picks
// (operating_point.hpp); by default the least-energy point whose EXACT time
// is within the deadline (1 + slowdown) * T, T being the all-max-clock time.
// The solver plans for that deadline exactly (Options::extra_deadlines_s), so
// the choice does not depend on where the grid happens to fall.
//
// Errors are model::InputError naming the request's fields
// ("PlanRequest::slowdown", "Spec::stages", ...) or the profile; a cancelled
// solve throws model::Cancelled. All energies are GPU energy computed from
// the profile, not measurements.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/operating_point.hpp"

namespace joulepipe::solver {

struct PlanRequest {
  schedule::Spec spec;
  // GPU power while blocked or idle (W). Unset: the profile's metadata
  // p_block_w; a profile without one (e.g. a Perseus/Zeus CSV) is an error.
  std::optional<double> p_block_w;
  double slowdown = 0;  // allowed iteration-time increase over T, a fraction >= 0
  // Which frontier point to choose (default: least GPU energy within the
  // deadline); host power and budgets are per GPU / of the pipeline's
  // Spec::stages GPUs.
  model::Objective objective;
  // The objective's budgets bound the frontier's figures times this (> 0):
  // 1 for the pipeline itself, pipelines x TP for a job's budget.
  double objective_scale = 1;
  double resolution_s = 1e-3;  // spacing of the frontier's deadline grid (s), > 0
  // Multiples of T to plan exactly as well, e.g. a straggler's T'/T. Each > 0.
  std::vector<double> extra_deadline_factors;
  // Clocks while waiting (a calibrate-wait output): the solved frontier is
  // re-priced with its long waits lowered and the objective chooses on
  // those prices (wait_plan.hpp); PipelinePlan::waits holds the result.
  // Unset: every wait at P_block, as the solver prices it.
  std::optional<model::WaitModel> waits;
  // Called from the solving thread: phase ("relaxation", "rounding") and the
  // fraction of it done. Optional; keep it cheap.
  std::function<void(const char* phase, double fraction)> progress;
  // When it becomes true the solve stops with model::Cancelled. Optional.
  const std::atomic<bool>* cancel = nullptr;
  // Names the profile in messages (its path, or a name).
  std::string profile_name = "the profile";
};

// The frontier re-priced with a wait model (wait_plan.hpp's PriceWaits).
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

struct PipelinePlan {
  PlanRequest request;
  schedule::Schedule schedule;
  Evaluation baseline;  // every instruction at its highest clock
  // Iteration time with every instruction at its least-energy clock among
  // those no other clock of its (stage, kind) beats on both time and
  // effective energy (cost_hull.hpp): the slowest plan the frontier can hold.
  double slowest_s = 0;
  double deadline_s = 0;  // (1 + slowdown) * baseline.time_s
  Frontier frontier;      // empty until solved
  // The point request.objective chose. Invariant once solved:
  // chosen < frontier.points.size().
  std::size_t chosen = 0;
  double bound_energy_j = 0;       // relaxation bound at the baseline time
  double solve_seconds = 0;        // wall time of the frontier solve
  double p_block_w = 0;            // the P_block planned with (W)
  std::string p_block_source;      // "request" or "profile" (its metadata)
  std::vector<std::string> notes;  // for people, e.g. two different P_block values
  // Set when request.waits is: the frontier's prices with lowered waits;
  // `chosen` is then waits->chosen.
  std::optional<WaitPricing> waits;

  const FrontierPoint& chosen_point() const { return frontier.points[chosen]; }
};

// The plausible ranges CheckPlanRequest enforces (docs/limits.md, "Numbers
// and ranges"), beyond the schedule's own rules.
inline constexpr int kMaxStages = 1024;            // Spec::stages (pipeline-parallel degree)
inline constexpr int kMaxMicrobatches = 100'000;   // Spec::microbatches
inline constexpr int kMaxChunks = 1024;            // Spec::chunks
inline constexpr double kMaxSlowdown = 99;         // PlanRequest::slowdown: 100 x T at most
inline constexpr double kMaxResolutionS = 3600;    // PlanRequest::resolution_s: an hour
inline constexpr double kMaxDeadlineFactor = 100;  // each extra_deadline_factors entry

// Checks what needs no profile: the spec's counts (stages 1..kMaxStages,
// microbatches 1..kMaxMicrobatches, chunks up to kMaxChunks), P_block if
// given, slowdown 0..kMaxSlowdown, the objective (CheckObjective), resolution up to
// kMaxResolutionS, extra deadline factors in (0, kMaxDeadlineFactor]. Lets a caller refuse bad
// numbers before it reads any file. Throws model::InputError naming the
// field and the range.
void CheckPlanRequest(const PlanRequest& request);

// The cheap first half: checks the request, resolves P_block, builds the
// schedule, checks that the profile fits it and that its rows are plausible
// (model::CheckProfileRows), evaluates the all-max-clock baseline, which fixes the
// deadline, and checks that the deadline grid between the fastest and the
// slowest useful plan (dominated clocks dropped, as the solver drops them)
// is not too fine. Every input error is found here, so a caller can check
// everything before it creates any output. Throws model::InputError.
PipelinePlan PreparePipelinePlan(const model::Profile& profile, const PlanRequest& request);

// The expensive second half, on a prepared plan (the same profile): solves the
// frontier and chooses the objective's point (on the prices with lowered
// waits when the request names a wait model; a note when that model was
// calibrated on another GPU than the profile's). Throws model::Cancelled if the
// request's cancel flag is raised, model::InputError when no point meets the
// objective's budget (the message says the least the frontier reaches).
void SolvePipelinePlan(const model::Profile& profile, PipelinePlan* plan);

// Both halves.
PipelinePlan PlanPipeline(const model::Profile& profile, const PlanRequest& request);

// A frontier grid from fastest_s to slowest_s at resolution_s may have at most
// this many deadlines (more take minutes and gigabytes; the plans that matter
// are planned exactly anyway). Throws InputError naming
// PlanRequest::resolution_s, the time span and the finest spacing that fits,
// in ms; `why` (e.g. which instruction spans the most) is appended when given.
inline constexpr double kMaxGridDeadlines = 100'000;
void CheckGridSize(double fastest_s, double slowest_s, double resolution_s,
                   const std::string& why = "");

}  // namespace joulepipe::solver
