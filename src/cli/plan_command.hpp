// `joulepipe plan`: what it adds to solver::PlanPipeline: its flags, which
// plans to write, the output files, and the summary for people.
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

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/solver/wait_plan.hpp"
#include "output_dir.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// Said next to every energy figure the command prints or writes.
inline constexpr char kFiguresSource[] = "GPU energy, computed from the profile (not measured)";

// --max-plans: 0 (all) or at least 3. Throws InputError naming the flag.
void CheckMaxPlans(int max_plans);

struct PlanOutcome {
  solver::PipelinePlan plan;  // solved
  int max_plans = 256;        // plan files to write at most; 0 = all
  // Ascending indices into plan.frontier.points: holds 0, the last index and
  // plan.chosen.
  std::vector<std::size_t> written;
  // The profile's metadata "method" line (how a simulated profile was made
  // and how well its framework profile is validated); "" when it has none.
  std::string profile_method;
  // With plan.waits (--wait-model): the profile planned from.
  const model::Profile* profile = nullptr;
};

// The solved plan with the points to write chosen by SelectPoints.
PlanOutcome ToPlanOutcome(solver::PipelinePlan plan, int max_plans);

// Picks at most `max_points` indices of `points` (ascending time) spread
// evenly in time, always including the first, the last and `keep`; all of
// them when max_points is 0 or not smaller than points.size(). The three
// required points are kept even if max_points < 3. Returns ascending indices.
std::vector<std::size_t> SelectPoints(const std::vector<solver::FrontierPoint>& points,
                                      std::size_t keep, int max_points);

// "plans/plan_00042.json": the file of the j-th written plan.
std::string PlanFileName(std::size_t j);

// The contents of frontier.csv, summary.json and frontier.svg.
std::string FrontierCsv(const PlanOutcome& outcome);
std::string SummaryJson(const PlanOutcome& outcome);
std::string FrontierSvg(const PlanOutcome& outcome);

// Writes every output into `staged` and commits it. Create the staged
// directory before solving, so that an --out that cannot be replaced fails
// before the work; on any error nothing is left behind (and an earlier output
// at that path is untouched). Throws model::Cancelled, committing nothing,
// if `cancel` is raised before the commit's swap (checked between files).
void WritePlanOutputs(const PlanOutcome& outcome, StagedDirectory* staged,
                      const std::atomic<bool>* cancel = nullptr);

// The human summary printed by `plan`. `out_dir` may be empty.
std::string FormatPlanSummary(const PlanOutcome& outcome, const std::string& out_dir);

// The subcommand: registers `plan`, its flags and help on `app`. Run() checks
// the flags, reads the profile, plans (solver::PreparePipelinePlan, then
// solver::SolvePipelinePlan), writes --out and prints the summary. It runs in
// a CancellableScope (signals.hpp): a signal stops the solve or the writing,
// and nothing is left beside --out.
struct PlanFlags;
class PlanSubcommand : public Subcommand {
 public:
  explicit PlanSubcommand(CLI::App* app);
  ~PlanSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<PlanFlags> flags_;
};

}  // namespace joulepipe::cli
