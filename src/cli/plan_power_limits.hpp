// `joulepipe plan --lever power-limit`: one power limit per stage instead of
// a clock per instruction (solver/power_limit_plan.hpp), for clusters that
// allow power limits but not locked clocks. The clock plan at the same
// objective is solved too, so the summary says what locked clocks would add.
//
// Outputs (one directory, written atomically):
//   frontier.csv   time_s,energy_j,power_limits_w (limits ';'-separated, 0 =
//                  the default limit), one row per frontier point
//   chosen.json    the chosen plan, with "power_limits_w" (model/plan.hpp)
//   summary.json   the printed figures, machine-readable
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/solver/power_limit_plan.hpp"
#include "output_dir.hpp"

namespace joulepipe::cli {

struct LimitRange {
  double min_w = 0;  // 0 = none known
  double max_w = 0;
  std::string source;  // "--min-power-limit/--max-power-limit", "the profile's GPU (...)", ""
};

// The GPU's accepted range: the flags where given (0 = not given), else the
// catalogue's figures for the GPU the profile's metadata names, else none.
LimitRange ResolveLimitRange(const model::ProfileMetadata& metadata, double min_flag_w,
                             double max_flag_w);

// What the command prints and writes: the task's result
// (solver::PlanPowerLimits, with the clock plan to compare), the range it
// planned within and where that came from.
struct LimitPlanOutcome {
  solver::PowerLimitPlan plan;
  LimitRange range;
  std::string profile_method;
};

std::string LimitFrontierCsv(const LimitPlanOutcome& outcome);
std::string LimitSummaryJson(const LimitPlanOutcome& outcome);
std::string FormatLimitSummary(const LimitPlanOutcome& outcome, const std::string& out_dir);
void WriteLimitOutputs(const LimitPlanOutcome& outcome, StagedDirectory* staged,
                       const std::atomic<bool>* cancel);

}  // namespace joulepipe::cli
