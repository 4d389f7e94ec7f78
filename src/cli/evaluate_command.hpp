// `joulepipe evaluate`: what it adds to schedule::EvaluatePlan: its flags,
// the report for people and the JSON line.
#pragma once

#include <memory>
#include <string>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// Human-readable report of an evaluation of `plan` (named in `request`).
std::string FormatEvaluation(const schedule::PlanEvaluation& evaluation, const model::Plan& plan,
                             const schedule::EvaluateRequest& request);

// {"time_s":..,"energy_j":..,"busy_energy_j":..,"blocking_energy_j":..} with
// 17 significant digits, and a trailing newline.
// with_waits: also "lowered_wait_s" (evaluate --wait-model).
std::string EvaluationJson(const schedule::ReplayResult& replay, bool with_waits = false);

// The subcommand: registers `evaluate`, its flags and help on `app`. Run()
// checks --p-block, reads the profile and the plan, calls
// schedule::EvaluatePlan and prints the report (or, with --json, the JSON
// line on stdout and the notes on stderr).
struct EvaluateFlags;
class EvaluateSubcommand : public Subcommand {
 public:
  explicit EvaluateSubcommand(CLI::App* app);
  ~EvaluateSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<EvaluateFlags> flags_;
};

}  // namespace joulepipe::cli
