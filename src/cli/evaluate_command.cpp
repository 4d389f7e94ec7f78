// `joulepipe evaluate`: flags, one schedule::EvaluatePlan call, and printing.
#include "evaluate_command.hpp"

#include <cstdio>

#include <CLI/CLI.hpp>

#include "flag_names.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/profile.hpp"

namespace joulepipe::cli {

namespace {

double RelativeDifference(double value, double reference) {
  return (value - reference) / reference;
}

}  // namespace

std::string FormatEvaluation(const schedule::PlanEvaluation& evaluation, const model::Plan& plan,
                             const schedule::EvaluateRequest& request) {
  const schedule::ReplayResult& r = evaluation.replay;
  std::string s;
  s += "Figures are GPU energy, computed from the profile by replaying the plan (not measured).\n";
  s += Printf("  plan        %s (%s)\n", request.plan_name.c_str(),
              ShapeText(evaluation.spec).c_str());
  s += Printf("  profile     %s\n", request.profile_name.c_str());
  s += Printf("  P_block     %g W %s\n", evaluation.p_block_w,
              PBlockOrigin(evaluation.p_block_source).c_str());
  for (const std::string& note : evaluation.notes) {
    s += Printf("  note        %s\n", WithFlagNames(note).c_str());
  }
  s += Printf("  wait model  %s\n", evaluation.wait_model.c_str());
  s += Printf("  time        %.6f s\n", r.time_s);
  s += Printf("  energy      %.1f J\n", r.energy_j);
  s += Printf("    busy      %.1f J (sum of instruction energies)\n", r.busy_energy_j);
  if (request.waits) {
    s += Printf(
        "    blocking  %.1f J (waits: P_block, less the lowered waits' saving; %.6f s "
        "at the wait clock)\n",
        r.blocking_energy_j, r.lowered_wait_s);
  } else {
    s += Printf("    blocking  %.1f J (P_block x time each GPU waits)\n", r.blocking_energy_j);
  }
  if (plan.predicted && request.waits) {
    s += "  predicted   not compared: the planner records its figures with waits at P_block\n";
  } else if (plan.predicted) {
    const model::Prediction& p = *plan.predicted;
    s += Printf("  predicted   %.6f s, %.1f J (recorded in the plan by the planner)\n", p.time_s,
                p.energy_j);
    s += Printf("  difference  time %+.3g, energy %+.3g (relative, replay vs predicted)\n",
                RelativeDifference(r.time_s, p.time_s), RelativeDifference(r.energy_j, p.energy_j));
  }
  return s;
}

std::string EvaluationJson(const schedule::ReplayResult& replay, bool with_waits) {
  return "{\"time_s\": " + Exact(replay.time_s) + ", \"energy_j\": " + Exact(replay.energy_j) +
         ", \"busy_energy_j\": " + Exact(replay.busy_energy_j) +
         ", \"blocking_energy_j\": " + Exact(replay.blocking_energy_j) +
         (with_waits ? ", \"lowered_wait_s\": " + Exact(replay.lowered_wait_s) : std::string()) +
         "}\n";
}

// ---- The subcommand ------------------------------------------------------------

namespace {

constexpr char kEvaluateFooter[] =
    "\nReplays the plan instruction by instruction on the profile (an evaluator\n"
    "independent of the planner) and prints the iteration time and GPU energy:\n"
    "  energy = sum of instruction energies + P_block x (time each GPU waits).\n"
    "If the plan records \"predicted\" figures, prints the relative difference.\n"
    "\n"
    "Plan JSON (version 1): {\"version\":1, \"schedule\":\"1f1b\", \"num_stages\":S,\n"
    "\"num_microbatches\":M, \"num_chunks\":V, \"stages\":[[{\"instruction\":\"forward\",\n"
    "\"microbatch\":0, \"chunk\":0, \"frequency\":1410}, ...], ...]} with each stage's\n"
    "instructions in execution order; \"predicted\":{\"time_s\",\"energy_j\"} optional.\n"
    "\n"
    "Example:\n"
    "  joulepipe evaluate --profile prof.csv --plan plan-out/chosen.json --p-block 83.64 --json";

}  // namespace

struct EvaluateFlags {
  std::string profile;
  std::string plan;
  double p_block_w = 0;  // only read when --p-block was given
  bool json = false;
  std::string wait_model;
  CLI::Option* p_block_option = nullptr;  // tells whether --p-block was given
};

EvaluateSubcommand::EvaluateSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand("evaluate",
                                     "Replay a plan file on a profile: iteration time and energy")),
      flags_(std::make_unique<EvaluateFlags>()) {
  EvaluateFlags* f = flags_.get();
  CLI::App* c = command();
  c->add_option("--profile", f->profile, "Stage profile CSV the plan is for")
      ->required()
      ->type_name("P.csv");
  c->add_option("--plan", f->plan, "Plan JSON (e.g. chosen.json from `plan`)")
      ->required()
      ->type_name("plan.json");
  f->p_block_option = c->add_option("--p-block", f->p_block_w,
                                    "GPU power while blocked or idle, watts; default: the "
                                    "profile's p_block_w")
                          ->type_name("WATTS");
  c->add_option("--wait-model", f->wait_model,
                "Price waits with a calibrate-wait output (the plan's waits longer than twice "
                "the switch latency plus a margin at the wait clock); default: at P_block")
      ->type_name("W.json");
  c->add_flag("--json", f->json,
              "Print one JSON object {time_s, energy_j, busy_energy_j, blocking_energy_j}");
  c->footer(kEvaluateFooter);
}

EvaluateSubcommand::~EvaluateSubcommand() = default;

int EvaluateSubcommand::Run() const {
  const EvaluateFlags& f = *flags_;
  schedule::EvaluateRequest request;
  request.p_block_w = IfGiven(f.p_block_option, f.p_block_w);
  request.profile_name = f.profile;
  request.plan_name = f.plan;
  // The flag before the files; the profile's value is checked where it is used.
  if (request.p_block_w) model::CheckPBlock(*request.p_block_w, "EvaluateRequest::p_block_w");
  // The rows as `plan` planned them (the one rule), so a plan is replayed on
  // the figures it was made from.
  const model::RowRuleResult rows = ReadPlannableProfile(f.profile);
  const model::Plan plan = model::ReadPlanFile(f.plan);
  if (!f.wait_model.empty()) request.waits = model::ReadWaitModelFile(f.wait_model);
  schedule::PlanEvaluation evaluation = schedule::EvaluatePlan(rows.profile, plan, request);
  evaluation.notes.insert(evaluation.notes.begin(), rows.notes.begin(), rows.notes.end());
  if (f.json) {
    for (const std::string& note : evaluation.notes) {
      std::fprintf(stderr, "joulepipe: note: %s\n", WithFlagNames(note).c_str());
    }
  }
  const std::string text = f.json ? EvaluationJson(evaluation.replay, request.waits.has_value())
                                  : FormatEvaluation(evaluation, plan, request);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace joulepipe::cli
