// The `plan` command without its argument parsing: solve the frontier of one
// pipeline, choose a plan, write the outputs, describe the result.
//
// Outputs (one directory, written atomically through StagedDirectory):
//   frontier.csv        time_s,energy_j,plan_file; one row per written plan,
//                       ascending time, numbers with 17 significant digits
//   plans/plan_NNNNN.json  the written frontier plans (plan JSON, version 1)
//   chosen.json         the chosen plan
//   chosen.py           the chosen plan as a Perseus/Zeus PointSolution literal
//   summary.json        the figures the summary prints, machine-readable
//   frontier.svg        the frontier, its bound, the baseline and the chosen plan
// All energies are GPU energy computed from the profile, not measurements.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "joulepipe/cli/output_dir.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::cli {

// Said next to every energy figure the command prints or writes.
inline constexpr char kFiguresSource[] = "GPU energy, computed from the profile (not measured)";

struct PlanRequest {
  std::string profile_name;  // the profile's path (or name), for summaries
  schedule::Spec spec;
  double p_block_w = 0;        // GPU power while blocked or idle (W)
  double slowdown = 0;         // allowed iteration-time increase, as a fraction
  double resolution_s = 1e-3;  // spacing of the frontier's deadline grid
  int max_plans = 256;         // plan files to write at most; 0 = all
};

// Checks the numbers of a request (not the profile). Throws model::InputError
// naming the flag.
void CheckPlanRequest(const PlanRequest& request);

struct PlanOutcome {
  PlanRequest request;
  schedule::Schedule schedule;
  solver::Evaluation baseline;  // every instruction at its highest clock
  double deadline_s = 0;        // (1 + slowdown) * baseline.time_s
  solver::Frontier frontier;
  // Invariants: chosen < frontier.points.size(); written is ascending, holds
  // 0, the last index and chosen, and indexes frontier.points.
  std::size_t chosen = 0;
  std::vector<std::size_t> written;
  double bound_energy_j = 0;  // relaxation bound at the baseline time
  double solve_seconds = 0;   // wall time of SolveFrontier

  const solver::FrontierPoint& chosen_point() const { return frontier.points[chosen]; }
};

// The cheap first half: checks the request and that the profile fits it,
// builds the schedule and evaluates the all-max-clock baseline, which fixes
// the deadline. Every input error is found here, so a caller can check
// everything before it creates any output. Throws model::InputError.
PlanOutcome PreparePlan(const PlanRequest& request, const model::Profile& profile);

// The expensive second half, on a prepared outcome (same profile): solves the
// frontier and chooses the least-energy plan within the deadline. Writes one
// progress line to `progress` unless it is null.
void SolvePlan(const model::Profile& profile, std::FILE* progress, PlanOutcome* outcome);

// Picks at most `max_points` indices of `points` (ascending time) spread
// evenly in time, always including the first, the last and `keep`; all of
// them when max_points is 0 or not smaller than points.size(). The three
// required points are kept even if max_points < 3. Returns ascending indices.
std::vector<std::size_t> SelectPoints(const std::vector<solver::FrontierPoint>& points,
                                      std::size_t keep, int max_points);

// "plans/plan_00042.json": the file of the j-th written plan.
std::string PlanFileName(std::size_t j);

// The contents of frontier.csv and summary.json.
std::string FrontierCsv(const PlanOutcome& outcome);
std::string SummaryJson(const PlanOutcome& outcome);
std::string FrontierSvg(const PlanOutcome& outcome);

// Writes every output into `staged` and commits it. Create the staged
// directory before solving, so that an --out that cannot be replaced fails
// before the work; on any error nothing is left behind (and an earlier output
// at that path is untouched).
void WritePlanOutputs(const PlanOutcome& outcome, StagedDirectory* staged);

// The human summary printed by `plan` and `demo`. `out_dir` may be empty.
std::string FormatPlanSummary(const PlanOutcome& outcome, const std::string& out_dir);

}  // namespace joulepipe::cli
