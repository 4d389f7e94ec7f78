// The `joulepipe` command line: argument parsing (CLI11), help texts that
// teach the formats, dispatch to the subcommands, and the one place that
// turns exceptions into messages and exit codes.
#include "app.hpp"

#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "flag_names.hpp"
#include "demo_command.hpp"
#include "embedded.hpp"
#include "evaluate_command.hpp"
#include "format.hpp"
#include "gpus_command.hpp"
#include "inputs.hpp"
#include "measure_command.hpp"
#include "output_dir.hpp"
#include "plan_command.hpp"
#include "power_command.hpp"
#include "profile_command.hpp"
#include "simulate_command.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"
#include "joulepipe/sim/simulate_job.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

// ---- Help texts --------------------------------------------------------------

constexpr char kAppDescription[] =
    "joulepipe cuts the GPU energy of pipeline-parallel training without slowing it:\n"
    "it measures energy, plans one SM clock per forward/backward (instructions off\n"
    "the critical path run slower instead of waiting) and simulates whole jobs.\n"
    "Every figure says whether it was measured (NVML, RAPL), computed from a\n"
    "measured profile, or simulated.";

constexpr char kAppFooter[] =
    "\nStart with `joulepipe demo` (no input, no GPU), then:\n"
    "  joulepipe measure --json -- python train.py     # a baseline: energy of a run\n"
    "  joulepipe profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 \\\n"
    "                    --out prof.csv                # or a measured profile\n"
    "  joulepipe plan --profile prof.csv --schedule 1f1b --stages 8 --microbatches 48 \\\n"
    "                 --p-block 83.64 --out plan-out\n"
    "  joulepipe evaluate --profile prof.csv --plan plan-out/chosen.json --p-block 83.64\n"
    "  joulepipe simulate --profile prof.csv --p-block 83.64 --pipelines 16 --stages 8 \\\n"
    "                     --microbatches 48 --straggler-slowdown 1.2\n"
    "\n"
    "Profile CSV (Perseus/Zeus format): a header with at least the columns\n"
    "  stage,instruction,frequency,time,energy\n"
    "and one row per (stage, instruction, frequency): stage 0..S-1, instruction\n"
    "forward|backward, frequency = SM clock in MHz, time (s) and energy (J) of one\n"
    "instruction at that clock. Extra columns (rank, dp_rank, ...) are ignored.\n"
    "\n"
    "Without a GPU, gpus/measure/power run against the simulated driver:\n"
    "  export JOULEPIPE_NVML_LIBRARY=build/sim-nvml/libnvidia-ml.so.1\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input, usage or environment (no NVML, ...), 1 internal\n"
    "error; `measure` passes its command's exit code through.\n"
    "Run `joulepipe <command> --help` for a command; docs/cli.md has the details.";

constexpr char kPlanFooter[] =
    "\nReads the profile, lays out one iteration of the schedule, computes the whole\n"
    "iteration time-energy frontier (least energy for every iteration time) and\n"
    "chooses the least-energy plan whose time is <= (1 + slowdown) x the time with\n"
    "every instruction at its highest clock.\n"
    "\n"
    "Profile CSV: columns stage,instruction,frequency,time,energy (any order, extra\n"
    "columns ignored); stage ids 0..S-1 (interleaved: S, or S*V one per virtual\n"
    "stage with id chunk*S+stage); instruction forward|backward; frequency in MHz;\n"
    "time (s) and energy (J) per instruction. A profile written by joulepipe\n"
    "records P_block in a '# p_block_w: W' line before the header; --p-block\n"
    "overrides it and is needed for profiles without one (Perseus/Zeus CSVs).\n"
    "\n"
    "Writes DIR atomically (nothing is left behind on error; an earlier joulepipe\n"
    "output at DIR is replaced, any other existing directory is refused):\n"
    "  frontier.csv      time_s,energy_j,plan_file (written plans, ascending time)\n"
    "  plans/plan_NNNNN.json  frontier plans (at most --max-plans; always the\n"
    "                    fastest, the chosen and the least-energy plan)\n"
    "  chosen.json       the chosen plan: {\"version\":1, \"schedule\":..., \"stages\":\n"
    "                    [[{\"instruction\":\"forward\",\"microbatch\":0,\"chunk\":0,\n"
    "                    \"frequency\":1410}, ...], ...], \"predicted\":{...}}\n"
    "  chosen.py         the same as a Perseus/Zeus PointSolution literal\n"
    "  summary.json      the printed figures, machine-readable\n"
    "\n"
    "Example:\n"
    "  joulepipe plan --profile data/profiles/gpt3-175b+a100_sxm_bf16.csv \\\n"
    "      --schedule 1f1b --stages 8 --microbatches 48 --p-block 83.64 --out plan-out";

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

constexpr char kDemoFooter[] =
    "\nSimulates a realistic large job with and without joulepipe, from the stage\n"
    "profile measured by Perseus (SOSP'24 artifact, built into this binary): GPT-3\n"
    "175B on 1,024 A100-SXM GPUs = 16 data-parallel pipelines x 8 stages x tensor-\n"
    "parallel 8, 1F1B with 96 microbatches, P_block 83.64 W. 20 iterations: 10\n"
    "healthy, then one pipeline runs 1.2x slower (a straggler). Prints iteration\n"
    "time, energy per iteration and saving for both phases and a projection for a\n"
    "full 300B-token run; writes the frontier as an SVG. Takes a few seconds.\n"
    "\n"
    "Files (in DIR, written atomically; an earlier demo output is replaced):\n"
    "  frontier.svg          the frontier, the baseline and the two plans used\n"
    "  simulation.json       what `joulepipe simulate --json` prints\n"
    "  intrinsic_plan.json   the plan all pipelines run while healthy\n"
    "  straggler_plan.json   what the others run while one pipeline straggles\n"
    "\n"
    "Example:\n"
    "  joulepipe demo --out demo-out";

// ---- Flags --------------------------------------------------------------------

struct PlanFlags {
  std::string profile;
  std::string schedule;
  int stages = 0;
  int microbatches = 0;
  int chunks = 2;  // only read for --schedule interleaved
  double p_block_w = 0;  // only read when --p-block was given
  double slowdown = 0;
  double resolution_ms = 1.0;
  int max_plans = 256;
  std::string out;
  CLI::Option* chunks_option = nullptr;   // tells whether --chunks was given
  CLI::Option* p_block_option = nullptr;  // tells whether --p-block was given
};

struct EvaluateFlags {
  std::string profile;
  std::string plan;
  double p_block_w = 0;  // only read when --p-block was given
  bool json = false;
  CLI::Option* p_block_option = nullptr;
};

// The value of an optional flag, if it was given.
std::optional<double> IfGiven(const CLI::Option* option, double value) {
  if (option->count() == 0) return std::nullopt;
  return value;
}

struct DemoFlags {
  std::string out = kDemoOutDir;
  bool no_files = false;
};

void AddPlanFlags(CLI::App* command, PlanFlags* f) {
  command->add_option("--profile", f->profile, "Stage profile CSV (see below)")
      ->required()
      ->type_name("P.csv");
  command->add_option("--schedule", f->schedule, "Pipeline schedule")
      ->required()
      ->type_name("{gpipe,1f1b,interleaved}");
  command->add_option("--stages", f->stages, "Pipeline stages S (GPUs per pipeline), >= 1")
      ->required()
      ->type_name("S");
  command->add_option("--microbatches", f->microbatches, "Microbatches per iteration M, >= 1")
      ->required()
      ->type_name("M");
  f->chunks_option = command
                         ->add_option("--chunks", f->chunks,
                                      "Model chunks per stage V (interleaved only; default 2)")
                         ->type_name("V");
  f->p_block_option = command
                          ->add_option("--p-block", f->p_block_w,
                                       "GPU power while blocked or idle, watts (e.g. 83.64 for "
                                       "A100-SXM); default: the profile's p_block_w")
                          ->type_name("WATTS");
  command
      ->add_option("--slowdown", f->slowdown,
                   "Allowed iteration-time increase as a fraction (0.05 = 5%)")
      ->capture_default_str()
      ->type_name("FRACTION");
  command
      ->add_option("--resolution-ms", f->resolution_ms,
                   "Spacing of the frontier's deadline grid, milliseconds")
      ->capture_default_str()
      ->type_name("MS");
  command
      ->add_option("--max-plans", f->max_plans,
                   "Plan files to write at most (0 = every frontier point, else >= 3)")
      ->capture_default_str()
      ->type_name("N");
  command->add_option("--out", f->out, "Output directory (written atomically)")
      ->required()
      ->type_name("DIR");
}

void AddEvaluateFlags(CLI::App* command, EvaluateFlags* f) {
  command->add_option("--profile", f->profile, "Stage profile CSV the plan is for")
      ->required()
      ->type_name("P.csv");
  command->add_option("--plan", f->plan, "Plan JSON (e.g. chosen.json from `plan`)")
      ->required()
      ->type_name("plan.json");
  f->p_block_option = command
                          ->add_option("--p-block", f->p_block_w,
                                       "GPU power while blocked or idle, watts; default: the "
                                       "profile's p_block_w")
                          ->type_name("WATTS");
  command->add_flag("--json", f->json,
                    "Print one JSON object {time_s, energy_j, busy_energy_j, blocking_energy_j}");
}

// ---- Commands -------------------------------------------------------------------

solver::PlanRequest ToPlanRequest(const PlanFlags& f) {
  solver::PlanRequest request;
  request.profile_name = f.profile;
  request.spec = ScheduleFromFlags(f.schedule, f.stages, f.microbatches, f.chunks,
                                   f.chunks_option->count() > 0);
  request.p_block_w = IfGiven(f.p_block_option, f.p_block_w);
  request.slowdown = f.slowdown;
  request.resolution_s = f.resolution_ms * 1e-3;
  return request;
}

// Checks, plans, writes `out` (if given) and prints the summary.
//
// Order matters for what a failure leaves behind: every input error is found
// by PreparePipelinePlan before anything is created. A probe StagedDirectory
// then refuses an --out joulepipe may not replace before the (possibly long)
// solve, and removes its staging directory at once, so that an interrupted
// solve leaves nothing beside --out. The real one exists only while writing.
int RunPlan(const PlanFlags& f) {
  solver::PlanRequest request = ToPlanRequest(f);
  CheckMaxPlans(f.max_plans);
  solver::CheckPlanRequest(request);  // flags before files: a flag error needs no file
  const model::Profile profile = model::ReadProfileCsv(f.profile);
  // solver::PlanPipeline, in its two halves.
  solver::PipelinePlan plan = solver::PreparePipelinePlan(profile, request);
  if (!f.out.empty()) {
    // Throws now if --out may not be replaced; removes its (empty) staging
    // directory at the end of this block.
    StagedDirectory probe(f.out);
  }
  std::fprintf(stderr, "joulepipe: planning %d instructions (%s) on a %g ms grid...\n",
               plan.schedule.num_nodes(), ShapeText(request.spec).c_str(), f.resolution_ms);
  std::fflush(stderr);
  plan.request.progress = ProgressLines(stderr, "");
  solver::SolvePipelinePlan(profile, &plan);
  const PlanOutcome outcome = ToPlanOutcome(std::move(plan), f.max_plans);
  if (!f.out.empty()) {
    StagedDirectory staged(f.out);
    WritePlanOutputs(outcome, &staged);
  }
  const std::string text = FormatPlanSummary(outcome, f.out);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

// Same order as RunPlan: a --out that may not be replaced fails before the
// work, and nothing is left behind if the work fails.
int RunDemo(const DemoFlags& f) {
  sim::SimulateRequest request = DemoRequest();
  const model::Profile profile = LoadEmbeddedDemoProfile();
  const std::string out = f.no_files ? std::string() : f.out;
  if (!out.empty()) StagedDirectory probe(out);
  request.progress = ProgressLines(stderr, "demo: ");
  const sim::SimulateOutcome outcome = sim::SimulateJob(profile, request);
  if (!out.empty()) {
    StagedDirectory staged(out);
    WriteDemoOutputs(outcome, &staged);
  }
  const std::string text = FormatDemoReport(outcome, out);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

int RunEvaluate(const EvaluateFlags& f) {
  schedule::EvaluateRequest request;
  request.p_block_w = IfGiven(f.p_block_option, f.p_block_w);
  request.profile_name = f.profile;
  request.plan_name = f.plan;
  // The flag before the files; the profile's value is checked where it is used.
  if (request.p_block_w) model::CheckPBlock(*request.p_block_w, "EvaluateRequest::p_block_w");
  const model::Profile profile = model::ReadProfileCsv(f.profile);
  const model::Plan plan = model::ReadPlanFile(f.plan);
  const schedule::PlanEvaluation evaluation = schedule::EvaluatePlan(profile, plan, request);
  if (f.json) {
    for (const std::string& note : evaluation.notes) {
      std::fprintf(stderr, "joulepipe: note: %s\n", WithFlagNames(note).c_str());
    }
  }
  const std::string text =
      f.json ? EvaluationJson(evaluation.replay) : FormatEvaluation(evaluation, plan, request);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

int Fail(int code, const char* kind, const char* message) {
  std::fflush(stdout);
  std::fprintf(stderr, "joulepipe: %s: %s\n", kind, message);
  return code;
}

}  // namespace

int RunApp(int argc, char** argv) {
  CLI::App app{kAppDescription, "joulepipe"};
  app.footer(kAppFooter);
  app.set_version_flag("--version", std::string(kVersion),
                       "Print the version (" + std::string(kVersion) + ") and exit");
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);

  DemoFlags demo_flags;
  CLI::App* demo = app.add_subcommand(
      "demo", "Simulate GPT-3 175B on 1,024 A100-SXM with and without joulepipe (no GPU)");
  demo->add_option("--out", demo_flags.out,
                   "Write frontier.svg, simulation.json and the plans to DIR")
      ->type_name("DIR")
      ->capture_default_str();
  demo->add_flag("--no-files", demo_flags.no_files, "Only print; write no files");
  demo->footer(kDemoFooter);

  PlanFlags plan_flags;
  CLI::App* plan = app.add_subcommand("plan", "Compute the time-energy frontier and choose a plan");
  AddPlanFlags(plan, &plan_flags);
  plan->footer(kPlanFooter);

  EvaluateFlags evaluate_flags;
  CLI::App* evaluate =
      app.add_subcommand("evaluate", "Replay a plan file on a profile: iteration time and energy");
  AddEvaluateFlags(evaluate, &evaluate_flags);
  evaluate->footer(kEvaluateFooter);

  // `simulate` (simulate_command.hpp) registers its own flags and help.
  SimulateSubcommand simulate(&app);

  // `profile` (profile_command.hpp) registers its own flags and help.
  ProfileSubcommand profile(&app);

  // `gpus` (gpus_command.hpp) registers its own flags and help.
  GpusSubcommand gpus(&app);

  // `measure` and `power` (measure_command.hpp, power_command.hpp) register
  // their own flags and help.
  MeasureSubcommand measure(&app);
  PowerSubcommand power(&app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  try {
    if (demo->parsed()) return RunDemo(demo_flags);
    if (plan->parsed()) return RunPlan(plan_flags);
    if (evaluate->parsed()) return RunEvaluate(evaluate_flags);
    if (simulate.parsed()) return simulate.Run();
    if (profile.parsed()) return profile.Run();
    if (gpus.parsed()) return gpus.Run();
    if (measure.parsed()) return measure.Run();
    if (power.parsed()) return power.Run();
    return Fail(kExitInternal, "internal error", "no subcommand selected");
  } catch (const InputError& e) {
    // Library messages name fields ("Spec::stages"); users know flags.
    return Fail(kExitUsage, "error", WithFlagNames(e.what()).c_str());
  } catch (const std::bad_alloc&) {
    return Fail(kExitInternal, "error", "out of memory; try a coarser --resolution-ms");
  } catch (const std::exception& e) {
    return Fail(kExitInternal, "internal error", e.what());
  }
}

}  // namespace joulepipe::cli
