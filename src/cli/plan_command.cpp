// `joulepipe plan`: flags, one solver::PlanPipeline call (in its two
// halves), the files and the summary.
#include "plan_command.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "flag_names.hpp"
#include "format.hpp"
#include "frontier_chart.hpp"
#include "inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/report/line_chart.hpp"
#include "objective_flags.hpp"
#include "plan_power_limits.hpp"
#include "signals.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

// Index of the nearest point to `target` (by time) not yet selected, or
// points.size() if every point is selected. `points` ascend in time.
std::size_t NearestUnselected(const std::vector<solver::FrontierPoint>& points,
                              const std::vector<bool>& selected, double target) {
  const std::size_t n = points.size();
  const auto it =
      std::lower_bound(points.begin(), points.end(), target,
                       [](const solver::FrontierPoint& p, double t) { return p.time_s < t; });
  std::size_t right = static_cast<std::size_t>(it - points.begin());
  while (right < n && selected[right]) ++right;
  std::size_t left = static_cast<std::size_t>(it - points.begin());
  while (left > 0 && selected[left - 1]) --left;
  const bool has_left = left > 0;
  if (!has_left) return right;  // may be n: nothing left of target either
  if (right == n) return left - 1;
  return target - points[left - 1].time_s <= points[right].time_s - target ? left - 1 : right;
}

}  // namespace

void CheckMaxPlans(int max_plans) {
  if (max_plans < 0 || max_plans == 1 || max_plans == 2) {
    throw InputError("--max-plans must be 0 (write every frontier plan) or at least 3 (got " +
                     std::to_string(max_plans) +
                     "): the fastest, the chosen and the least-energy plans are always written");
  }
}

PlanOutcome ToPlanOutcome(solver::PipelinePlan plan, int max_plans) {
  PlanOutcome outcome;
  outcome.plan = std::move(plan);
  outcome.max_plans = max_plans;
  outcome.written = SelectPoints(outcome.plan.frontier.points, outcome.plan.chosen, max_plans);
  return outcome;
}

std::vector<std::size_t> SelectPoints(const std::vector<solver::FrontierPoint>& points,
                                      std::size_t keep, int max_points) {
  const std::size_t n = points.size();
  std::vector<std::size_t> out;
  if (n == 0) return out;
  if (max_points <= 0 || static_cast<std::size_t>(max_points) >= n) {
    for (std::size_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> selected(n, false);
  selected[0] = selected[n - 1] = selected[std::min(keep, n - 1)] = true;
  std::size_t count = static_cast<std::size_t>(std::count(selected.begin(), selected.end(), true));
  // Fill the remaining slots with the points nearest to evenly spaced times
  // strictly between the fastest and the slowest. n > max_points >= count
  // guarantees an unselected point exists for every slot.
  const std::size_t extra = static_cast<std::size_t>(max_points) > count
                                ? static_cast<std::size_t>(max_points) - count
                                : 0;
  const double t0 = points.front().time_s, t1 = points.back().time_s;
  for (std::size_t j = 1; j <= extra; ++j) {
    const double target = t0 + (t1 - t0) * static_cast<double>(j) / static_cast<double>(extra + 1);
    const std::size_t pick = NearestUnselected(points, selected, target);
    if (pick >= n) break;
    selected[pick] = true;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (selected[i]) out.push_back(i);
  }
  return out;
}

std::string PlanFileName(std::size_t j) {
  return Printf("plans/plan_%05zu.json", j);
}

std::string FrontierCsv(const PlanOutcome& outcome) {
  const solver::PipelinePlan& plan = outcome.plan;
  std::string out = "time_s,energy_j,plan_file\n";
  for (std::size_t j = 0; j < outcome.written.size(); ++j) {
    const solver::FrontierPoint& p = plan.frontier.points[outcome.written[j]];
    out += Exact(p.time_s) + "," + Exact(p.energy_j) + "," + PlanFileName(j) + "\n";
  }
  return out;
}

std::string WaitModelText(const PlanOutcome& outcome) {
  return outcome.plan.waits
             ? outcome.plan.waits->waits.Describe()
             : model::FlatWaitModel(0).Describe() +
                   "; waits priced at P_block (joulepipe calibrate-wait measures it)";
}

std::string SummaryJson(const PlanOutcome& outcome) {
  using nlohmann::ordered_json;
  const solver::PipelinePlan& plan = outcome.plan;
  const solver::PlanRequest& r = plan.request;
  const solver::FrontierPoint& chosen = plan.chosen_point();
  const double t0 = plan.baseline.time_s, e0 = plan.baseline.energy_j;
  const auto chosen_slot =
      std::lower_bound(outcome.written.begin(), outcome.written.end(), plan.chosen) -
      outcome.written.begin();

  ordered_json inputs;
  inputs["profile"] = r.profile_name;
  if (!outcome.profile_method.empty()) inputs["profile_method"] = outcome.profile_method;
  inputs["schedule"] = std::string(schedule::KindName(r.spec.kind));
  inputs["stages"] = r.spec.stages;
  inputs["microbatches"] = r.spec.microbatches;
  inputs["chunks"] = r.spec.chunks;
  inputs["instructions"] = plan.schedule.num_nodes();
  inputs["p_block_w"] = plan.p_block_w;
  // "profile" (its metadata) or "--p-block".
  inputs["p_block_from"] = plan.p_block_source == "profile" ? "profile" : "--p-block";
  inputs["slowdown"] = r.slowdown;
  inputs["goal"] = std::string(model::GoalName(r.objective.goal));
  inputs["energy_budget_j"] = r.objective.energy_budget_j;
  inputs["power_budget_w"] = r.objective.power_budget_w;
  inputs["host_power_w"] = r.objective.host_power_w;
  inputs["resolution_s"] = r.resolution_s;
  inputs["max_plans"] = outcome.max_plans;
  inputs["wait_model"] = WaitModelText(outcome);

  ordered_json notes = ordered_json::array();
  for (const std::string& note : plan.notes) notes.push_back(WithFlagNames(note));

  ordered_json root;
  root["version"] = 1;
  root["figures"] = kFiguresSource;
  root["inputs"] = inputs;
  root["notes"] = notes;
  root["baseline"] = {{"time_s", t0}, {"energy_j", e0}};
  root["deadline_s"] = plan.deadline_s;
  const int gpus = r.spec.stages;
  const double counted = model::CountedEnergyJ(chosen.time_s, chosen.energy_j, r.objective, gpus);
  const double counted0 = model::CountedEnergyJ(t0, e0, r.objective, gpus);
  root["chosen"] = {{"time_s", chosen.time_s},
                    {"energy_j", chosen.energy_j},
                    {"saving_pct", SavingPercent(chosen.energy_j, e0)},
                    {"slowdown_pct", SlowdownPercent(chosen.time_s, t0)},
                    {"goal", ObjectiveText(r.objective, r.slowdown)},
                    {"energy_scope", model::EnergyScope(r.objective)},
                    {"counted_energy_j", counted},
                    {"counted_saving_pct", SavingPercent(counted, counted0)},
                    {"average_power_w", counted / chosen.time_s},
                    {"plan_file", PlanFileName(static_cast<std::size_t>(chosen_slot))}};
  if (outcome.plan.waits) {
    const solver::WaitPricing& w = *outcome.plan.waits;
    const double e = w.energy_j[plan.chosen];
    root["chosen"]["energy_with_lowered_waits_j"] = e;
    root["chosen"]["saving_with_lowered_waits_pct"] = SavingPercent(e, e0);
    root["chosen"]["wait_s"] = w.wait_s;
    root["chosen"]["lowered_wait_s"] = w.lowered_wait_s;
    root["chosen"]["lowered_waits"] = w.lowered_waits;
    root["chosen"]["wait_clock_mhz"] = w.waits.wait_mhz();
    root["baseline"]["energy_with_lowered_waits_j"] = w.baseline_energy_j;
    root["baseline"]["saving_with_lowered_waits_pct"] = SavingPercent(w.baseline_energy_j, e0);
  }
  root["bound_at_baseline"] = {{"time_s", t0},
                               {"energy_j", plan.bound_energy_j},
                               {"saving_pct", SavingPercent(plan.bound_energy_j, e0)}};
  const solver::Frontier& frontier = plan.frontier;
  root["frontier"] = {{"points", frontier.points.size()},
                      {"plans_written", outcome.written.size()},
                      {"fastest_time_s", frontier.points.front().time_s},
                      {"slowest_time_s", frontier.points.back().time_s},
                      {"least_energy_j", frontier.points.back().energy_j},
                      {"relaxation_steps", frontier.stats.relaxation_steps},
                      {"deadlines", frontier.stats.deadlines},
                      {"refined_deadlines", frontier.stats.refined},
                      {"relaxation_seconds", frontier.stats.relaxation_seconds},
                      {"rounding_seconds", frontier.stats.rounding_seconds}};
  root["solve_seconds"] = plan.solve_seconds;
  return root.dump(2) + "\n";
}

std::string FrontierSvg(const PlanOutcome& outcome) {
  const solver::PipelinePlan& plan = outcome.plan;
  const solver::PlanRequest& r = plan.request;
  const solver::FrontierPoint& chosen = plan.chosen_point();
  const std::string label =
      Printf("chosen: %.1f%% less energy", SavingPercent(chosen.energy_j, plan.baseline.energy_j));
  return report::RenderSvg(
      FrontierChart(plan.frontier, plan.baseline, {{label, chosen.time_s, chosen.energy_j}}, 1.0,
                    "Iteration time-energy frontier, " + ShapeText(r.spec),
                    r.profile_name + Printf(", P_block %g W; ", plan.p_block_w) + kFiguresSource));
}

void WritePlanOutputs(const PlanOutcome& outcome, StagedDirectory* staged,
                      const std::atomic<bool>* cancel) {
  auto stop_if_cancelled = [cancel] {
    if (cancel != nullptr && cancel->load()) throw model::Cancelled("writing the plans");
  };
  const solver::PipelinePlan& plan = outcome.plan;
  for (std::size_t j = 0; j < outcome.written.size(); ++j) {
    stop_if_cancelled();
    const solver::FrontierPoint& point = plan.frontier.points[outcome.written[j]];
    staged->WriteFile(
        PlanFileName(j),
        model::PlanToJson(outcome.plan.waits
                              ? solver::PlanWithWaits(*outcome.profile, plan,
                                                      outcome.plan.waits->waits, outcome.written[j])
                              : solver::ToPlan(plan.schedule, point)));
  }
  stop_if_cancelled();
  const model::Plan chosen = outcome.plan.waits
                                 ? outcome.plan.waits->chosen_plan
                                 : solver::ToPlan(plan.schedule, plan.chosen_point());
  staged->WriteFile("chosen.json", model::PlanToJson(chosen));
  staged->WriteFile("chosen.py", model::PlanToPointSolution(chosen) + "\n");
  staged->WriteFile("frontier.csv", FrontierCsv(outcome));
  staged->WriteFile("summary.json", SummaryJson(outcome));
  staged->WriteFile("frontier.svg", FrontierSvg(outcome));
  staged->Commit(cancel);
}

std::string FormatPlanSummary(const PlanOutcome& outcome, const std::string& out_dir) {
  const solver::PipelinePlan& plan = outcome.plan;
  const solver::PlanRequest& r = plan.request;
  const solver::Frontier& frontier = plan.frontier;
  const solver::FrontierPoint& chosen = plan.chosen_point();
  const double t0 = plan.baseline.time_s, e0 = plan.baseline.energy_j;
  std::string s;
  s += Printf("Figures are %s.\n", kFiguresSource);
  s += "inputs\n";
  s += Printf("  profile     %s\n", r.profile_name.c_str());
  if (!outcome.profile_method.empty()) {
    s += Printf("  method      %s\n", outcome.profile_method.c_str());
  }
  s += Printf("  schedule    %s (%d instructions)\n", ShapeText(r.spec).c_str(),
              plan.schedule.num_nodes());
  s += Printf("  P_block     %g W %s (GPU power while blocked or idle)\n", plan.p_block_w,
              PBlockOrigin(plan.p_block_source).c_str());
  s += Printf("  wait model  %s\n", WaitModelText(outcome).c_str());
  if (r.objective.goal == model::Goal::kWithinDeadline) {
    s += Printf("  slowdown    %g%% allowed: deadline %.6f s\n", 100 * r.slowdown, plan.deadline_s);
  }
  if (model::CountsHost(r.objective)) {
    s += Printf("  host power  %g W per GPU (CPU, DRAM, NIC), counted with the GPUs' energy\n",
                r.objective.host_power_w);
  }
  for (const std::string& note : plan.notes) {
    s += Printf("  note        %s\n", WithFlagNames(note).c_str());
  }
  s += "baseline (every instruction at its highest clock)\n";
  s += Printf("  time        %.6f s\n", t0);
  s += Printf("  energy      %.1f J\n", e0);
  s += Printf("chosen plan (%s)\n", ObjectiveText(r.objective, r.slowdown).c_str());
  s += Printf("  time        %.6f s (%s)\n", chosen.time_s,
              model::SlowdownText(chosen.time_s, t0).c_str());
  s += Printf("  energy      %.1f J GPU (saving %.2f%%)\n", chosen.energy_j,
              SavingPercent(chosen.energy_j, e0));
  if (model::CountsHost(r.objective)) {
    const int gpus = r.spec.stages;
    const double counted = model::CountedEnergyJ(chosen.time_s, chosen.energy_j, r.objective, gpus);
    const double counted0 = model::CountedEnergyJ(t0, e0, r.objective, gpus);
    s += Printf("  node energy %.1f J GPU + host (saving %.2f%%; baseline %.1f J)\n", counted,
                SavingPercent(counted, counted0), counted0);
  }
  if (r.objective.goal == model::Goal::kPowerBudget) {
    s += Printf("  power       %.1f W on average (budget %g W)\n",
                model::CountedEnergyJ(chosen.time_s, chosen.energy_j, r.objective, r.spec.stages) /
                    chosen.time_s,
                r.objective.power_budget_w);
  }
  if (outcome.plan.waits) {
    const solver::WaitPricing& w = *outcome.plan.waits;
    s += Printf("  with waits  %.1f J GPU (saving %.2f%%): %d waits at %d MHz, %.6f s of %.6f s\n",
                w.energy_j[plan.chosen], SavingPercent(w.energy_j[plan.chosen], e0),
                w.lowered_waits, w.waits.wait_mhz(), w.lowered_wait_s, w.wait_s);
    s += Printf(
        "              (lowered waits alone, every instruction at its highest clock: "
        "%.2f%%)\n",
        SavingPercent(w.baseline_energy_j, e0));
  }
  // A bound holds at a time: no plan that fast saves more than the linear
  // relaxation. The baseline time's, then the chosen plan's when it is
  // slower (its saving is at most that one).
  s += Printf(
      "  bound       %.2f%% saving at the baseline time (no plan as fast can beat the "
      "linear relaxation)\n",
      SavingPercent(plan.bound_energy_j, e0));
  if (chosen.time_s > t0 * (1 + 1e-9)) {
    s += Printf("  bound       %.2f%% saving at the chosen plan's time\n",
                SavingPercent(frontier.BoundAt(chosen.time_s), e0));
  }
  s += "frontier\n";
  if (out_dir.empty()) {
    s += Printf("  points      %zu computed (no files written; pass --out DIR)\n",
                frontier.points.size());
  } else {
    s += Printf("  points      %zu computed, %zu plans written\n", frontier.points.size(),
                outcome.written.size());
  }
  s += Printf("  range       %.6f s .. %.6f s, %.1f J .. %.1f J\n", frontier.points.front().time_s,
              frontier.points.back().time_s, frontier.points.front().energy_j,
              frontier.points.back().energy_j);
  s += Printf("  solve time  %.3f s\n", plan.solve_seconds);
  if (!out_dir.empty()) {
    const char* slash = out_dir.back() == '/' ? "" : "/";
    s += Printf(
        "output        %s%s (frontier.csv, frontier.svg, chosen.json, chosen.py,\n"
        "              summary.json, plans/)\n",
        out_dir.c_str(), slash);
  }
  return s;
}

// ---- The subcommand ------------------------------------------------------------

namespace {

constexpr char kPlanFooter[] =
    "\nReads the profile, lays out one iteration of the schedule, computes the whole\n"
    "iteration time-energy frontier (least energy for every iteration time) and\n"
    "chooses the plan to run. By default that is the least-energy plan whose time\n"
    "is <= the time with every instruction at its highest clock (same speed);\n"
    "--max-slowdown F allows F x that time, --least-energy takes the least energy\n"
    "at any speed, --energy-budget J / --power-budget W the fastest plan within\n"
    "the budget (of the pipeline's GPUs, one per stage). --host-power W adds W per\n"
    "GPU for as long as the iteration lasts, so a slower plan must save more GPU\n"
    "energy than the host spends meanwhile (least energy for the whole node).\n"
    "\n"
    "Profile CSV: columns stage,instruction,frequency,time,energy (any order, extra\n"
    "columns ignored); stage ids 0..S-1 (interleaved: S, or S*V one per virtual\n"
    "stage with id chunk*S+stage); instruction forward|backward; frequency in MHz;\n"
    "time (s) and energy (J) per instruction. A profile written by joulepipe\n"
    "records P_block in a '# p_block_w: W' line before the header; --p-block\n"
    "overrides it and is needed for profiles without one (Perseus/Zeus CSVs).\n"
    "\n"
    "Writes DIR atomically (nothing is left behind on error or on Ctrl-C, SIGTERM\n"
    "or SIGHUP; an earlier joulepipe output at DIR is replaced, any other existing\n"
    "directory is refused):\n"
    "  frontier.csv      time_s,energy_j,plan_file (written plans, ascending time)\n"
    "  plans/plan_NNNNN.json  frontier plans (at most --max-plans; always the\n"
    "                    fastest, the chosen and the least-energy plan)\n"
    "  chosen.json       the chosen plan: {\"version\":1, \"schedule\":..., \"stages\":\n"
    "                    [[{\"instruction\":\"forward\",\"microbatch\":0,\"chunk\":0,\n"
    "                    \"frequency\":1410}, ...], ...], \"predicted\":{...}}\n"
    "  chosen.py         the same as a Perseus/Zeus PointSolution literal\n"
    "  summary.json      the printed figures, machine-readable\n"
    "\n"
    "--wait-model W.json (written by joulepipe calibrate-wait on the GPU): clocks\n"
    "while waiting. Each wait after an instruction that is longer than twice the\n"
    "clock-switch latency plus a margin is spent at the calibrated wait clock; the\n"
    "plans carry \"wait_frequency\" and \"wait_restore_s\" for the runtime, and the\n"
    "chosen plan is the objective's on the re-priced frontier. Without it waits\n"
    "cost P_block whatever the clock (uncalibrated: the predicted saving is 0).\n"
    "\n"
    "--lever power-limit plans one power limit per stage instead (clusters that\n"
    "allow power limits but not locked clocks): each instruction is taken to run\n"
    "at the highest profiled clock whose mean power is within its GPU's limit.\n"
    "It writes frontier.csv (time_s,energy_j,power_limits_w), chosen.json (with\n"
    "\"power_limits_w\", one per stage, 0 = default) and summary.json, and prints\n"
    "what per-instruction clocks would save at the same objective.\n"
    "\n"
    "Example:\n"
    "  joulepipe plan --profile data/profiles/gpt3-175b+a100_sxm_bf16.csv \\\n"
    "      --schedule 1f1b --stages 8 --microbatches 48 --p-block 83.64 --out plan-out";

}  // namespace

struct PlanFlags {
  bool force = false;  // --force: may replace another command's output
  std::string profile;
  std::string schedule;
  int stages = 0;
  int microbatches = 0;
  int chunks = 2;        // only read for --schedule interleaved
  double p_block_w = 0;  // only read when --p-block was given
  double slowdown = 0;
  ObjectiveFlags objective;
  double resolution_ms = 1.0;
  int max_plans = 256;
  std::string lever = "clocks";
  double min_power_limit_w = 0;
  double max_power_limit_w = 0;
  std::string wait_model;
  std::string out;
  CLI::Option* chunks_option = nullptr;   // tells whether --chunks was given
  CLI::Option* p_block_option = nullptr;  // tells whether --p-block was given
};

PlanSubcommand::PlanSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand("plan", "Compute the time-energy frontier and choose a plan")),
      flags_(std::make_unique<PlanFlags>()) {
  PlanFlags* f = flags_.get();
  CLI::App* c = command();
  c->add_option("--profile", f->profile, "Stage profile CSV (see below)")
      ->required()
      ->type_name("P.csv");
  c->add_option("--schedule", f->schedule, "Pipeline schedule")
      ->required()
      ->type_name("{gpipe,1f1b,interleaved}");
  c->add_option("--stages", f->stages, "Pipeline stages S (GPUs per pipeline), >= 1")
      ->required()
      ->type_name("S");
  c->add_option("--microbatches", f->microbatches, "Microbatches per iteration M, >= 1")
      ->required()
      ->type_name("M");
  f->chunks_option =
      c->add_option("--chunks", f->chunks, "Model chunks per stage V (interleaved only; default 2)")
          ->type_name("V");
  f->p_block_option = c->add_option("--p-block", f->p_block_w,
                                    "GPU power while blocked or idle, watts (e.g. 83.64 for "
                                    "A100-SXM); default: the profile's p_block_w")
                          ->type_name("WATTS");
  f->objective.slowdown_option =
      c->add_option("--slowdown", f->slowdown,
                    "Allowed iteration-time increase as a fraction (0.05 = 5%; the same as "
                    "--max-slowdown 1.05)")
          ->type_name("FRACTION");
  AddObjectiveFlags(c, &f->objective, "the pipeline's GPUs, one per stage");
  c->add_option("--resolution-ms", f->resolution_ms,
                "Spacing of the frontier's deadline grid, milliseconds")
      ->capture_default_str()
      ->type_name("MS");
  c->add_option("--max-plans", f->max_plans,
                "Plan files to write at most (0 = every frontier point, else >= 3)")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--lever", f->lever,
                "What the plan sets: clocks (one SM clock per instruction) or power-limit (one "
                "power limit per stage, for clusters that do not allow locked clocks)")
      ->capture_default_str()
      ->type_name("{clocks,power-limit}");
  c->add_option("--min-power-limit", f->min_power_limit_w,
                "--lever power-limit: the lowest limit the GPUs accept, W (default: the "
                "catalogue's figure for the profile's GPU)")
      ->type_name("WATTS");
  c->add_option("--max-power-limit", f->max_power_limit_w,
                "--lever power-limit: the highest limit the GPUs accept, W (default: as above)")
      ->type_name("WATTS");
  c->add_option("--wait-model", f->wait_model,
                "Clocks while waiting: a calibrate-wait output; long waits are priced at the "
                "calibrated wait clock, the plan chosen on those prices and its waits written "
                "into the plans (default: uncalibrated, waits at P_block)")
      ->type_name("W.json");
  c->add_option("--out", f->out, "Output directory (written atomically)")
      ->required()
      ->type_name("DIR");
  c->add_flag("--force", f->force,
              "Replace --out even if another joulepipe command (demo, tune) wrote it");
  c->footer(kPlanFooter);
}

PlanSubcommand::~PlanSubcommand() = default;

// Order matters for what a failure leaves behind: every input error is found
// by PreparePipelinePlan before anything is created. A probe StagedDirectory
// then refuses an --out joulepipe may not replace before the (possibly long)
// solve (and removes stale staging directories of killed runs), and removes
// its own staging directory at once, so that an interrupted solve leaves
// nothing beside --out. The real one exists only while writing. SIGINT,
// SIGTERM and SIGHUP raise the cancel flag (signals.hpp) that the solve, the
// writing and the commit check: the stack unwinds, the staging directory goes,
// an earlier output at --out stays as it was.
int PlanSubcommand::Run() const {
  const PlanFlags& f = *flags_;
  const CancellableScope cancellable;
  solver::PlanRequest request;
  request.cancel = InterruptFlag();
  request.profile_name = f.profile;
  request.spec = ScheduleFromFlags(f.schedule, f.stages, f.microbatches, f.chunks,
                                   f.chunks_option->count() > 0);
  request.p_block_w = IfGiven(f.p_block_option, f.p_block_w);
  request.objective = ObjectiveFromFlags(f.objective, f.slowdown, &request.slowdown);
  request.resolution_s = f.resolution_ms * 1e-3;
  CheckMaxPlans(f.max_plans);
  solver::CheckPlanRequest(request);  // flags before files: a flag error needs no file
  if (f.lever != "clocks" && f.lever != "power-limit") {
    throw model::InputError("--lever must be clocks or power-limit, got \"" + f.lever + "\"");
  }
  for (const auto& [flag, watts] :
       {std::pair<const char*, double>{"--min-power-limit", f.min_power_limit_w},
        {"--max-power-limit", f.max_power_limit_w}}) {
    if (!model::IsPowerLimitW(watts)) {
      throw model::InputError(std::string(flag) + " must be 1..5000 W, got " + Printf("%g", watts));
    }
  }
  if (f.lever == "power-limit") {
    solver::PowerLimitRequest limits;  // its goal, before any file (the limits come later)
    limits.plan = request;
    solver::CheckPowerLimitRequest(limits);
  }
  const model::RowRuleResult rows = ReadPlannableProfile(f.profile);
  const model::Profile& profile = rows.profile;
  const std::vector<std::string>& profile_notes = rows.notes;
  if (!f.wait_model.empty()) {
    if (f.lever == "power-limit") {
      throw model::InputError(
          "--wait-model applies to --lever clocks only (a power limit sets no clock to wait "
          "at); leave it out or plan clocks");
    }
    request.waits = model::ReadWaitModelFile(f.wait_model);
  }
  if (f.lever == "power-limit") {
    LimitPlanOutcome outcome;
    outcome.range = ResolveLimitRange(profile.metadata, f.min_power_limit_w, f.max_power_limit_w);
    outcome.profile_method = profile.metadata.method;
    solver::PowerLimitRequest limits;
    limits.plan = request;
    limits.plan.progress = ProgressLines(stderr, "clock plan: ");
    limits.min_limit_w = outcome.range.min_w;
    limits.max_limit_w = outcome.range.max_w;
    outcome.plan =
        solver::PlanPowerLimits(profile, limits, [&](const solver::PowerLimitPlan& prepared) {
          if (!f.out.empty()) StagedDirectory probe(f.out, "plan", f.force);  // as below
          std::fprintf(stderr,
                       "joulepipe: planning power limits for %d stages, then the clock plan of %d "
                       "instructions (%s) to compare...\n",
                       request.spec.stages, prepared.clocks.schedule.num_nodes(),
                       ShapeText(request.spec).c_str());
          std::fflush(stderr);
        });
    if (!f.out.empty()) {
      StagedDirectory staged(f.out, "plan", f.force);
      WriteLimitOutputs(outcome, &staged, InterruptFlag());
    }
    std::fputs(FormatLimitSummary(outcome, f.out).c_str(), stdout);
    return kExitOk;
  }
  // solver::PlanPipeline, in its two halves.
  solver::PipelinePlan plan = solver::PreparePipelinePlan(profile, request);
  plan.notes.insert(plan.notes.end(), profile_notes.begin(), profile_notes.end());
  if (!f.out.empty()) {
    // Throws now if --out may not be replaced; removes its (empty) staging
    // directory at the end of this block.
    StagedDirectory probe(f.out, "plan", f.force);
  }
  if (f.min_power_limit_w > 0 || f.max_power_limit_w > 0) {
    throw model::InputError(
        "--min-power-limit and --max-power-limit apply to --lever power-limit only; add "
        "--lever power-limit or leave them out");
  }
  std::fprintf(stderr, "joulepipe: planning %d instructions (%s) on a %g ms grid...\n",
               plan.schedule.num_nodes(), ShapeText(request.spec).c_str(), f.resolution_ms);
  std::fflush(stderr);
  plan.request.progress = ProgressLines(stderr, "");
  solver::SolvePipelinePlan(profile, &plan);
  PlanOutcome outcome = ToPlanOutcome(std::move(plan), f.max_plans);
  outcome.profile_method = profile.metadata.method;
  outcome.profile = &profile;
  if (!f.out.empty()) {
    StagedDirectory staged(f.out, "plan", f.force);
    WritePlanOutputs(outcome, &staged, InterruptFlag());
  }
  const std::string text = FormatPlanSummary(outcome, f.out);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace joulepipe::cli
