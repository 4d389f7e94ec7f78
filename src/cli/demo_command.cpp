// `joulepipe demo`: fixed inputs, one sim::SimulateJob call, a table and a
// chart.
#include "demo_command.hpp"

#include <cmath>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "embedded.hpp"
#include "format.hpp"
#include "frontier_chart.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/report/line_chart.hpp"
#include "joulepipe/report/plan_report.hpp"
#include "joulepipe/sim/waveform.hpp"
#include "report_command.hpp"
#include "simulate_command.hpp"

namespace joulepipe::cli {

namespace {

constexpr int kHealthyIterations = 10;
constexpr double kDemoWaveformDtS = 0.01;  // 10 ms bins: the grid figures
constexpr int kStragglerIterations = 10;
constexpr double kStragglerSlowdown = 1.2;

// Mean time and energy per iteration over the iterations of one phase.
struct Phase {
  double time_s = 0;
  double energy_j = 0;
};

Phase Mean(const sim::SimulationResult& r, bool straggling) {
  Phase p;
  int n = 0;
  for (const sim::IterationResult& it : r.iterations) {
    if (it.straggler_active != straggling) continue;
    p.time_s += it.time_s;
    p.energy_j += it.energy_j;
    ++n;
  }
  if (n > 0) {
    p.time_s /= n;
    p.energy_j /= n;
  }
  return p;
}

std::string Row(const char* phase, const char* policy, const Phase& p, const Phase* baseline) {
  std::string saving = baseline ? Printf("%6.1f%%", SavingPercent(p.energy_j, baseline->energy_j))
                                : std::string("      ");
  return Printf("  %-15s %-10s %10.3f s %12.2f MJ   %s\n", phase, policy, p.time_s,
                p.energy_j / 1e6, saving.c_str());
}

double Mwh(double joules_per_iteration, double iterations) {
  return joules_per_iteration * iterations / 3.6e9;
}

std::string WithCommas(long long value) {
  std::string digits = std::to_string(value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

sim::SimulateRequest DemoRequest() {
  sim::SimulateRequest r;
  r.profile_name = std::string(kEmbeddedDemoProfileName);
  r.spec.kind = schedule::Kind::k1F1B;
  r.spec.stages = 8;
  r.spec.microbatches = 96;
  r.spec.chunks = 1;
  r.job.pipelines = 16;
  r.job.gpus_per_stage = 8;  // tensor-parallel 8: 16 x 8 x 8 = 1,024 GPUs
  r.p_block_w = 83.64;       // A100-SXM power while blocked (Perseus)
  r.job.iterations = kHealthyIterations + kStragglerIterations;
  r.job.straggler.pipeline = 0;
  r.job.straggler.slowdown = kStragglerSlowdown;
  r.job.straggler.from_iteration = kHealthyIterations;
  r.job.straggler.for_iterations = 0;
  r.detection_lag = 0;
  r.resolution_s = 5e-3;
  r.waveform_dt_s = kDemoWaveformDtS;
  return r;
}

// The grid's view of a run: its GPU power's swing within 1 s and ramp.
std::string GridFigures(const sim::SimulationResult& run) {
  const sim::GridMetrics m = sim::MeasureGrid(run.waveform, sim::GridOptions{});
  return Printf("swing %.2f MW within 1 s, ramp %.1f MW/s, peak %.2f MW", m.swing_w / 1e6,
                m.ramp_w_per_s / 1e6, m.peak_w / 1e6);
}

std::string FormatDemoReport(const sim::SimulateOutcome& o, const std::string& out_dir) {
  const sim::SimulateRequest& r = o.request;
  const Phase base_ok = Mean(o.baseline, false), jp_ok = Mean(o.joulepipe, false);
  const Phase base_slow = Mean(o.baseline, true), jp_slow = Mean(o.joulepipe, true);
  const double iterations = std::ceil(kDemoRunTokens / kDemoTokensPerIteration);

  std::string s;
  s += "joulepipe demo: what joulepipe saves on a large training job (simulated, no GPU)\n\n";
  s += Printf(
      "Job: GPT-3 175B on %s A100-SXM GPUs: %d data-parallel pipelines x %d stages x\n"
      "tensor-parallel %d, %s with %d microbatches per iteration (global batch 1,536\n"
      "sequences of 2,048 tokens). The time and energy of every stage's forward and\n"
      "backward at every SM clock are the measured profile from the Perseus SOSP'24\n"
      "artifact, built into this binary; P_block %g W (A100-SXM power while waiting).\n\n",
      WithCommas(o.gpus()).c_str(), r.job.pipelines, r.spec.stages, r.job.gpus_per_stage,
      std::string(schedule::KindName(r.spec.kind)).c_str(), r.spec.microbatches, *r.p_block_w);
  s += Printf(
      "joulepipe computed one pipeline's iteration time-energy frontier (%zu plans,\n"
      "%.1f s) and simulated %d iterations of the whole job: %d healthy, then\n"
      "pipeline %d turns straggler and runs %.1fx slower (say, a throttled GPU).\n\n",
      o.frontier_points, o.solve_seconds, r.job.iterations, kHealthyIterations,
      r.job.straggler.pipeline, r.job.straggler.slowdown);

  s += Printf("  %-15s %-10s %12s %15s   %s\n", "phase", "policy", "iter. time", "energy/iter.",
              "saving");
  s += Row("healthy", "baseline", base_ok, nullptr);
  s += Row("", "joulepipe", jp_ok, &base_ok);
  const std::string slow = Printf("straggler %.1fx", r.job.straggler.slowdown);
  s += Row(slow.c_str(), "baseline", base_slow, nullptr);
  s += Row("", "joulepipe", jp_slow, &base_slow);
  s += "\n";

  s += Printf(
      "Projected full run of the measured slice (300B tokens = %s iterations; not a\n"
      "real GPT-3 175B run's MWh, see below):\n",
      WithCommas(static_cast<long long>(iterations)).c_str());
  s += Printf("  all healthy        baseline %7.1f MWh, joulepipe %7.1f MWh: %6.1f MWh saved\n",
              Mwh(base_ok.energy_j, iterations), Mwh(jp_ok.energy_j, iterations),
              Mwh(base_ok.energy_j - jp_ok.energy_j, iterations));
  s += Printf("  straggler all run  baseline %7.1f MWh, joulepipe %7.1f MWh: %6.1f MWh saved\n\n",
              Mwh(base_slow.energy_j, iterations), Mwh(jp_slow.energy_j, iterations),
              Mwh(base_slow.energy_j - jp_slow.energy_j, iterations));

  s += Printf(
      "What the grid sees (the job's GPU power in %.0f ms bins, all %d iterations; the\n"
      "slice's, without the all-reduce):\n",
      kDemoWaveformDtS * 1e3, r.job.iterations);
  s += "  baseline   " + GridFigures(o.baseline) + "\n";
  s += "  joulepipe  " + GridFigures(o.joulepipe) + "\n\n";

  s += "How:\n";
  s += "  healthy    forwards and backwards off the critical path run at lower SM clocks\n";
  s += "             and fill the pipeline's bubbles instead of waiting (intrinsic bloat);\n";
  s += "             the iteration takes exactly as long as with every clock at maximum.\n";
  s += Printf(
      "  straggler  the other %d pipelines would finish early and wait at the gradient\n"
      "             sync; they switch to the least-energy plan that finishes within the\n"
      "             straggler's time T' (extrinsic bloat) and back when it recovers; the\n"
      "             straggler keeps its plan. The iteration is no longer than baseline.\n\n",
      r.job.pipelines - 1);
  s += "Figures: GPU energy, simulated from the measured profile (not measured here);\n";
  s += "CPU and DRAM not included. The profile is of a reduced stage slice and is used\n";
  s += "as measured (Perseus's own emulation scales it; joulepipe does not), and the\n";
  s += "simulation leaves out the data-parallel all-reduce: the times, energies and MWh\n";
  s += "above are the slice's, not a real run's. The whole job, all-reduce included, by\n";
  s += "the workload model (longer iterations, more MWh, a smaller saving: the all-reduce\n";
  s += "waits at P_block at any clock):\n";
  s += "  joulepipe site --model gpt3-175b --gpu a100-sxm --gpus 1024 --tokens 300e9\n";
  if (!out_dir.empty()) {
    const char* slash = out_dir.back() == '/' ? "" : "/";
    s += Printf("\nWrote %s%s: report.html (open it in a browser), frontier.svg,\n",
                out_dir.c_str(), slash);
    s += "simulation.json, intrinsic_plan.json, straggler_plan.json.\n";
  }
  s += "\nNext:\n";
  s += "  joulepipe profile --simulate --model llama3-70b --gpu h100-sxm --tp 8 --pp 8 \\\n";
  s += "      --microbatch-size 1 --seq 8192 --out P.csv       # a profile for any model/GPU\n";
  s += "  joulepipe simulate --profile P.csv --pipelines 16 --stages 8 \\\n";
  s += "      --microbatches 96 --straggler-slowdown 1.3      # your own what-if\n";
  s += "  joulepipe plan --profile P.csv --schedule 1f1b --stages 8 --microbatches 96 \\\n";
  s += "      --out plan-out                                   # plans to deploy\n";
  s += "  (P.csv records P_block; add --p-block W for a Perseus/Zeus profile, which does not)\n";
  return s;
}

// `sim_json` is SimulationJson(o), made once for the file and the report.
std::string DemoReportHtml(const sim::SimulateOutcome& o, const model::Profile& profile,
                           const std::string& sim_json) {
  report::PlanReportInputs in;
  in.frontier_dir = "the demo's frontier";
  in.summary = {{"inputs",
                 {{"p_block_w", o.request.job.p_block_w},
                  {"p_block_from", "A100-SXM's power while blocked, Perseus"}}},
                {"baseline", {{"time_s", o.max_clock.time_s}, {"energy_j", o.max_clock.energy_j}}},
                {"frontier", {{"points", o.frontier.points.size()}}}};
  for (const solver::FrontierPoint& p : o.frontier.points)
    in.frontier.push_back({p.time_s, p.energy_j});
  in.plan = solver::ToPlan(o.schedule, o.intrinsic);
  in.plan_name = "the intrinsic plan";
  in.profile_name = std::string(kEmbeddedDemoProfileName);
  in.profile = profile;
  in.sim = nlohmann::json::parse(sim_json);
  in.sim_name = "the demo's simulation";
  return report::RenderPlanReport(in);
}

void WriteDemoOutputs(const sim::SimulateOutcome& o, const model::Profile& profile,
                      StagedDirectory* staged) {
  const double scale = static_cast<double>(o.request.job.pipelines) * o.request.job.gpus_per_stage;
  const std::vector<LabelledPoint> labelled = {
      {Printf("intrinsic plan: %.1f%% less energy, same time",
              SavingPercent(o.intrinsic.energy_j, o.max_clock.energy_j)),
       o.intrinsic.time_s, o.intrinsic.energy_j},
      {Printf("straggler plan (T' = %.1fT)", o.request.job.straggler.slowdown),
       o.straggler_plan.time_s, o.straggler_plan.energy_j}};
  report::LineChart chart = FrontierChart(
      o.frontier, o.max_clock, labelled, scale,
      "GPT-3 175B on " + WithCommas(o.gpus()) + " A100-SXM: iteration time-energy frontier",
      "Perseus SOSP'24 measured stage profile, 1f1b 8 stages x 96 microbatches, TP 8, 16 "
      "pipelines; GPU energy, simulated");
  chart.vertical_lines.push_back({"T' (straggler)", o.straggler_target_s, "#9467bd"});
  staged->WriteFile("frontier.svg", report::RenderSvg(chart));
  const std::string sim_json = SimulationJson(o);
  staged->WriteFile("simulation.json", sim_json);
  staged->WriteFile("intrinsic_plan.json",
                    model::PlanToJson(solver::ToPlan(o.schedule, o.intrinsic)));
  staged->WriteFile("straggler_plan.json",
                    model::PlanToJson(solver::ToPlan(o.schedule, o.straggler_plan)));
  staged->WriteFile("report.html", DemoReportHtml(o, profile, sim_json));
  staged->Commit();
}

// ---- The subcommand ------------------------------------------------------------

namespace {

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
    "  report.html           the report (`joulepipe report`): frontier, timelines,\n"
    "                        energy per stage, savings; self-contained\n"
    "  frontier.svg          the frontier, the baseline and the two plans used\n"
    "  simulation.json       what `joulepipe simulate --json` prints\n"
    "  intrinsic_plan.json   the plan all pipelines run while healthy\n"
    "  straggler_plan.json   what the others run while one pipeline straggles\n"
    "\n"
    "Example:\n"
    "  joulepipe demo --out demo-out";

}  // namespace

struct DemoFlags {
  std::string out = kDemoOutDir;
  bool no_files = false;
  bool force = false;  // may replace another command's output
};

DemoSubcommand::DemoSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "demo", "Simulate GPT-3 175B on 1,024 A100-SXM with and without joulepipe (no GPU)")),
      flags_(std::make_unique<DemoFlags>()) {
  DemoFlags* f = flags_.get();
  CLI::App* c = command();
  c->add_option("--out", f->out, "Write frontier.svg, simulation.json and the plans to DIR")
      ->type_name("DIR")
      ->capture_default_str();
  c->add_flag("--no-files", f->no_files, "Only print; write no files");
  c->add_flag("--force", f->force,
              "Replace --out even if another joulepipe command (plan, tune) wrote it");
  c->footer(kDemoFooter);
}

DemoSubcommand::~DemoSubcommand() = default;

// The same order as `plan` (PlanSubcommand::Run): an --out that may not be
// replaced fails before the work, and nothing is left behind if the work
// fails.
int DemoSubcommand::Run() const {
  const DemoFlags& f = *flags_;
  sim::SimulateRequest request = DemoRequest();
  const model::Profile profile = LoadEmbeddedDemoProfile();
  const std::string out = f.no_files ? std::string() : f.out;
  if (!out.empty()) StagedDirectory probe(out, "demo", f.force);
  request.progress = ProgressLines(stderr, "demo: ");
  const sim::SimulateOutcome outcome = sim::SimulateJob(profile, request);
  if (!out.empty()) {
    StagedDirectory staged(out, "demo", f.force);
    WriteDemoOutputs(outcome, profile, &staged);
  }
  const std::string text = FormatDemoReport(outcome, out);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace joulepipe::cli
