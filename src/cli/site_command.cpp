// `joulepipe site`: flags, the simulated profile, one sim::ProjectSite call,
// the table.
#include "site_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"
#include "inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/memory.hpp"
#include "joulepipe/physics/workload.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "signals.hpp"
#include "simulate_grid.hpp"

namespace joulepipe::cli {

namespace {

// GPU memory the estimate leaves for what it does not count (CUDA context,
// NCCL buffers, fragmentation), as `profile` does.
constexpr double kSiteMemoryMargin = 0.10;

using model::InputError;

std::string Energy(double joules) {
  const double mwh = joules / 3.6e9;
  if (mwh >= 1000) return Printf("%.2f GWh", mwh / 1e3);
  if (mwh >= 1) return Printf("%.1f MWh", mwh);
  return Printf("%.1f kWh", mwh * 1e3);
}

std::string Power(double watts) {
  if (watts >= 1e6) return Printf("%.2f MW", watts / 1e6);
  if (watts >= 1e3) return Printf("%.1f kW", watts / 1e3);
  return Printf("%.0f W", watts);
}

std::string Duration(double seconds) {
  if (seconds >= 2 * 86400) return Printf("%.1f days", seconds / 86400);
  if (seconds >= 2 * 3600) return Printf("%.1f hours", seconds / 3600);
  return Printf("%.1f min", seconds / 60);
}

std::string Money(double amount) {
  if (amount >= 1e6) return Printf("%.2f M", amount / 1e6);
  if (amount >= 1e3) return Printf("%.1f k", amount / 1e3);
  return Printf("%.0f", amount);
}

std::string Mass(double kg) {
  if (kg >= 1e3) return Printf("%.1f t", kg / 1e3);
  return Printf("%.0f kg", kg);
}

std::string Change(double value, double baseline) {
  if (baseline == 0) return "";
  const double pct = 100 * (value / baseline - 1);
  return Printf("%+.1f%%", std::fabs(pct) < 0.05 ? 0.0 : pct);  // no "-0.0%"
}

std::string Table(const sim::SiteProjection& p, const sim::Scenario& s) {
  const sim::RunFigures& b = s.baseline;
  const sim::RunFigures& j = s.joulepipe;
  const sim::SiteRequest& r = p.request;
  std::string t;
  auto row = [&](const std::string& what, const std::string& x, const std::string& y,
                 const std::string& change) {
    t += Printf("  %-30s %14s %14s %9s\n", what.c_str(), x.c_str(), y.c_str(), change.c_str());
  };
  row(s.name, "baseline", "joulepipe", "change");
  row("iteration time", Printf("%.3f s", b.iteration_s), Printf("%.3f s", j.iteration_s),
      Change(j.iteration_s, b.iteration_s));
  row("run duration", Duration(b.duration_s), Duration(j.duration_s),
      Change(j.duration_s, b.duration_s));
  row("GPU energy", Energy(b.gpu_energy_j), Energy(j.gpu_energy_j),
      Change(j.gpu_energy_j, b.gpu_energy_j));
  row(r.host_power_w > 0 ? "IT energy (GPU + host)" : "IT energy (GPU only)", Energy(b.it_energy_j),
      Energy(j.it_energy_j), Change(j.it_energy_j, b.it_energy_j));
  row(Printf("facility energy (PUE %g)", r.pue), Energy(b.facility_energy_j),
      Energy(j.facility_energy_j), Change(j.facility_energy_j, b.facility_energy_j));
  row("average facility power", Power(b.average_facility_w), Power(j.average_facility_w),
      Change(j.average_facility_w, b.average_facility_w));
  row("peak facility power", Power(b.peak_facility_w), Power(j.peak_facility_w),
      Change(j.peak_facility_w, b.peak_facility_w));
  row(Printf("cost (%g %s per kWh)", r.price_per_kwh, r.currency.c_str()),
      Money(b.cost) + " " + r.currency, Money(j.cost) + " " + r.currency, Change(j.cost, b.cost));
  row(Printf("CO2 (%g g per kWh)", r.carbon_g_per_kwh), Mass(b.co2_kg), Mass(j.co2_kg),
      Change(j.co2_kg, b.co2_kg));
  return t;
}

nlohmann::ordered_json RunJson(const sim::RunFigures& f) {
  return {{"iteration_s", f.iteration_s},
          {"gpu_energy_per_iteration_j", f.gpu_energy_per_iteration_j},
          {"duration_s", f.duration_s},
          {"gpu_energy_mwh", f.gpu_energy_j / 3.6e9},
          {"it_energy_mwh", f.it_energy_j / 3.6e9},
          {"facility_energy_mwh", f.facility_energy_j / 3.6e9},
          {"average_facility_mw", f.average_facility_w / 1e6},
          {"peak_facility_mw", f.peak_facility_w / 1e6},
          {"cost", f.cost},
          {"co2_t", f.co2_kg / 1e3}};
}

}  // namespace

std::string GridRow(const char* label, const sim::SiteGridFigures& f) {
  return Printf("  %-34s %8.2f MW %8.2f MW %8.2f / %6.2f MW %8.2f / %6.2f MW/s\n", label,
                f.aligned.peak_w / 1e6, f.aligned.trough_w / 1e6, f.aligned.swing_w / 1e6,
                f.random.swing_w / 1e6, f.aligned.ramp_w_per_s / 1e6, f.random.ramp_w_per_s / 1e6);
}

std::string GridReport(const sim::SiteProjection& p) {
  const sim::SiteGrid& g = *p.grid;
  const sim::SiteRequest& r = p.request;
  std::string s = Printf(
      "\nwhat the grid sees: %d job%s of %lld GPUs, IT power (GPU%s; cooling left out), %g ms "
      "bins, healthy\n",
      g.jobs, g.jobs == 1 ? "" : "s", static_cast<long long>(p.gpus),
      r.host_power_w > 0 ? " + host" : "", g.bin_s * 1e3);
  s += Printf("  %-34s %11s %11s %19s %22s\n", "", "peak", "trough", "swing in phase/random",
              "ramp in phase/random");
  s += GridRow("baseline, full clocks", g.baseline);
  s += GridRow("joulepipe same-time plan", g.joulepipe);
  if (g.shaped) {
    const std::string limits = GridLimitsText(r.grid_limits);
    s += Printf("  shaped for the site's %s (each job planned for 1/%d of it: all in phase)\n",
                limits.c_str(), g.jobs);
    s += GridRow(Printf("firmware floor %.3f MW per job", g.firmware.floor_w / 1e6).c_str(),
                 g.firmware_grid);
    s += GridRow(Printf("joulepipe plan + floor %.3f MW", g.chosen.floor_w / 1e6).c_str(),
                 g.chosen_grid);
    const sim::RunFigures& base = p.healthy.baseline;
    auto cost = [&](const char* label, const sim::RunFigures& f, const sim::ShapedPoint& pt) {
      return Printf("  %-34s %s facility (%+.1f%%), %s, of which for the grid %s GPU%s\n", label,
                    Energy(f.facility_energy_j).c_str(),
                    100 * (f.facility_energy_j / base.facility_energy_j - 1),
                    (Money(f.cost) + " " + r.currency).c_str(),
                    Energy(pt.filler_j * p.iterations).c_str(), pt.meets ? "" : " (misses)");
    };
    s += "  one job's run:\n";
    s += cost("firmware floor", g.firmware_run, g.firmware);
    s += cost("joulepipe plan + floor", g.chosen_run, g.chosen);
  }
  return s;
}

std::string FormatSiteReport(const sim::SiteProjection& p, const std::string& job_text) {
  const sim::SiteRequest& r = p.request;
  std::string s;
  s += "Figures are " + p.figures + ".\n";
  s += job_text;
  s += Printf("  run         %.4g tokens = %.0f iterations of %.0f tokens\n", r.tokens,
              p.iterations, r.tokens_per_iteration);
  s += "  joulepipe   every pipeline runs the least-energy plan at the all-max-clock time\n"
       "              (same speed); with a straggler the others slow to its pace\n";
  s += "\n" + Table(p, p.healthy);
  if (p.straggler) s += "\n" + Table(p, *p.straggler);
  if (p.budget) {
    const sim::BudgetFigures& b = *p.budget;
    s += Printf("\nfacility power budget %s\n", Power(b.power_budget_w).c_str());
    if (!b.fits) {
      s += Printf("  %lld GPUs do not fit at any clock: even the least-energy plan draws more.\n",
                  static_cast<long long>(p.gpus));
    } else if (b.slowdown <= 1e-9) {
      s += Printf(
          "  fits at full speed: the same-time plan draws %s on average (%s at baseline "
          "clocks)\n",
          Power(p.healthy.joulepipe.average_facility_w).c_str(),
          Power(p.healthy.baseline.average_facility_w).c_str());
    } else {
      s += Printf(
          "  fastest within it: %.2f%% slower than full clocks, %s on average; the run takes "
          "%s, %s facility energy\n",
          100 * b.slowdown, Power(b.run.average_facility_w).c_str(),
          Duration(b.run.duration_s).c_str(), Energy(b.run.facility_energy_j).c_str());
    }
    s += "  GPUs it powers at the same speed, at this job's power per GPU (facility capacity,\n"
         "  whole pipelines):\n";
    s += Printf(
        "    by average power  baseline %lld, joulepipe %lld: %+lld GPUs (%+.1f%%)\n",
        static_cast<long long>(b.gpus_average_baseline),
        static_cast<long long>(b.gpus_average_joulepipe),
        static_cast<long long>(b.gpus_average_joulepipe - b.gpus_average_baseline),
        b.gpus_average_baseline > 0
            ? 100.0 * (b.gpus_average_joulepipe - b.gpus_average_baseline) / b.gpus_average_baseline
            : 0.0);
    s += Printf("    by peak power     baseline %lld, joulepipe %lld: %+lld GPUs\n",
                static_cast<long long>(b.gpus_peak_baseline),
                static_cast<long long>(b.gpus_peak_joulepipe),
                static_cast<long long>(b.gpus_peak_joulepipe - b.gpus_peak_baseline));
    s += Printf(
        "  as one job of this global batch (pipelines sharing its %lld microbatches evenly):\n"
        "    by average power  baseline %lld, joulepipe %lld; by peak power baseline %lld, "
        "joulepipe %lld\n",
        static_cast<long long>(p.request.spec.microbatches) * p.request.pipelines,
        static_cast<long long>(b.job_gpus_average_baseline),
        static_cast<long long>(b.job_gpus_average_joulepipe),
        static_cast<long long>(b.job_gpus_peak_baseline),
        static_cast<long long>(b.job_gpus_peak_joulepipe));
  }
  if (p.grid) s += GridReport(p);
  s += "\nPeak power is an upper bound: every GPU at its plan's most power-hungry\n"
       "instruction at once. Energy counts all waits (bubbles, all-reduce) at P_block:\n"
       "the wait model is uncalibrated here (simulate --wait-model prices clocks while\n"
       "waiting).\n";
  return s;
}

std::string SiteJson(const sim::SiteProjection& p, const std::string& job_text) {
  using nlohmann::ordered_json;
  const sim::SiteRequest& r = p.request;
  ordered_json root;
  root["figures"] = p.figures;
  root["job"] = job_text;
  root["gpus"] = p.gpus;
  root["iterations"] = p.iterations;
  root["inputs"] = {{"tokens", r.tokens},
                    {"tokens_per_iteration", r.tokens_per_iteration},
                    {"pue", r.pue},
                    {"host_power_w", r.host_power_w},
                    {"price_per_kwh", r.price_per_kwh},
                    {"currency", r.currency},
                    {"carbon_g_per_kwh", r.carbon_g_per_kwh},
                    {"power_budget_mw", r.power_budget_w / 1e6},
                    {"straggler_slowdown", r.straggler_slowdown},
                    {"allreduce_s", r.allreduce_s},
                    {"p_block_w", p.p_block_w}};
  auto scenario = [](const sim::Scenario& s) {
    return ordered_json{
        {"name", s.name}, {"baseline", RunJson(s.baseline)}, {"joulepipe", RunJson(s.joulepipe)}};
  };
  root["healthy"] = scenario(p.healthy);
  if (p.straggler) root["straggler"] = scenario(*p.straggler);
  if (p.budget) {
    const sim::BudgetFigures& b = *p.budget;
    ordered_json j = {
        {"power_budget_mw", b.power_budget_w / 1e6},
        {"fits", b.fits},
        {"gpus_by_average_power",
         {{"baseline", b.gpus_average_baseline}, {"joulepipe", b.gpus_average_joulepipe}}},
        {"gpus_by_peak_power",
         {{"baseline", b.gpus_peak_baseline}, {"joulepipe", b.gpus_peak_joulepipe}}},
        {"job_gpus_by_average_power",
         {{"baseline", b.job_gpus_average_baseline}, {"joulepipe", b.job_gpus_average_joulepipe}}},
        {"job_gpus_by_peak_power",
         {{"baseline", b.job_gpus_peak_baseline}, {"joulepipe", b.job_gpus_peak_joulepipe}}}};
    if (b.fits) {
      j["slowdown"] = b.slowdown;
      j["run"] = RunJson(b.run);
    }
    root["budget"] = j;
  }
  if (p.grid) {
    const sim::SiteGrid& g = *p.grid;
    auto metrics = [](const sim::GridMetrics& m) {
      return ordered_json{{"peak_w", m.peak_w},         {"trough_w", m.trough_w},
                          {"swing_w", m.swing_w},       {"ramp_w_per_s", m.ramp_w_per_s},
                          {"band_rms_w", m.band_rms_w}, {"energy_j", m.energy_j}};
    };
    auto figures = [&](const sim::SiteGridFigures& f) {
      return ordered_json{{"aligned", metrics(f.aligned)}, {"random", metrics(f.random)}};
    };
    ordered_json j{{"jobs", g.jobs},
                   {"bin_s", g.bin_s},
                   {"baseline", figures(g.baseline)},
                   {"joulepipe", figures(g.joulepipe)}};
    if (g.shaped) {
      auto shaped = [&](const sim::ShapedPoint& pt, const sim::SiteGridFigures& f,
                        const sim::RunFigures& run) {
        return ordered_json{{"floor_w", pt.floor_w},
                            {"meets", pt.meets},
                            {"filler_j_per_iteration", pt.filler_j},
                            {"site", figures(f)},
                            {"run", RunJson(run)}};
      };
      j["limits"] = {{"max_ramp_w_per_s", p.request.grid_limits.max_ramp_w_per_s},
                     {"max_swing_w", p.request.grid_limits.max_swing_w},
                     {"min_power_fraction", p.request.grid_limits.min_power_fraction},
                     {"max_band_rms_w", p.request.grid_limits.max_band_rms_w}};
      j["firmware"] = shaped(g.firmware, g.firmware_grid, g.firmware_run);
      j["chosen"] = shaped(g.chosen, g.chosen_grid, g.chosen_run);
    }
    root["grid"] = j;
  }
  return root.dump(2) + "\n";
}

namespace {

constexpr char kSiteFooter[] =
    "\nProjects a whole training run onto a site: a simulated stage profile of the model\n"
    "on the GPU (the workload model, as `profile --simulate`), one pipeline's frontier,\n"
    "and the data-parallel job simulated with every clock at maximum (baseline) and\n"
    "with joulepipe's same-speed plan. The run takes ceil(tokens / (global batch x\n"
    "sequence)) iterations. IT energy = GPU energy + --host-power x GPUs x duration;\n"
    "facility energy = IT energy x --pue; cost and CO2 follow from it. Peak power is\n"
    "an upper bound (every GPU at its plan's most power-hungry instruction at once).\n"
    "\n"
    "With --power-budget-mw: the fastest plan whose average facility power fits, and\n"
    "how many GPUs (whole pipelines of PP x TP) the budget powers at the same speed\n"
    "with baseline clocks and with joulepipe. --straggler-slowdown adds the run with\n"
    "one pipeline that much slower throughout. Every figure is simulated.\n"
    "\n"
    "Example (GPT-3 175B, 4,096 A100-SXM, 300B tokens, a 5 MW site):\n"
    "  joulepipe site --model gpt3-175b --gpu a100-sxm --gpus 4096 --tokens 300e9 \\\n"
    "      --host-power 150 --power-budget-mw 5";

}  // namespace

struct SiteFlags {
  std::string model;
  std::string gpu;
  long long gpus = 0;
  double tokens = 0;
  int tp = 8;
  int pp = 8;
  int global_batch = 1536;
  int microbatch_size = 1;
  int seq = 0;
  std::string schedule = "1f1b";
  std::string profile;
  std::string framework = "megatron";
  std::string precision = "bf16";
  double pue = 1.2;
  double host_power_w = 0;
  double price_per_kwh = 0.08;
  std::string currency = "USD";
  double carbon_g_per_kwh = 400;
  double power_budget_mw = 0;
  double straggler_slowdown = 1;
  double dp_gbps = physics::kDefaultInterNodeGbps;
  double resolution_ms = 5;
  bool json = false;
  bool grid = false;
  int jobs = 1;
  GridLimitFlags limits;
};

SiteSubcommand::SiteSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "site", "Project a whole training run onto a site: duration, energy, power, cost")),
      flags_(std::make_unique<SiteFlags>()) {
  SiteFlags* f = flags_.get();
  CLI::App* c = command();
  AddJobFlags(c, &f->model, &f->gpu, &f->gpus, "GPUs of the job: a multiple of TP x PP");
  c->add_option("--tokens", f->tokens, "Tokens the run trains on (e.g. 300e9)")
      ->required()
      ->type_name("X");
  c->add_option("--tp", f->tp, "Tensor-parallel GPUs per stage")->capture_default_str();
  c->add_option("--pp", f->pp, "Pipeline stages")->capture_default_str();
  c->add_option("--global-batch", f->global_batch, "Sequences per iteration, all pipelines")
      ->capture_default_str();
  c->add_option("--microbatch-size", f->microbatch_size, "Sequences per microbatch")
      ->capture_default_str();
  c->add_option("--seq", f->seq, "Tokens per sequence (default: the model's)");
  c->add_option("--schedule", f->schedule, "Pipeline schedule (gpipe or 1f1b)")
      ->capture_default_str()
      ->type_name("{gpipe,1f1b}");
  c->add_option("--profile", f->profile,
                "A stage profile to use instead of the workload model's (e.g. a measured one, "
                "of the same PP and microbatch size; P_block from it or its metadata)")
      ->type_name("P.csv");
  c->add_option("--framework", f->framework,
                "Kernels of the training framework, as for `profile`: megatron or hf-eager")
      ->capture_default_str()
      ->type_name("{megatron,hf-eager}");
  c->add_option("--precision", f->precision,
                "Number format, as for `profile`: bf16 (the default) or tf32")
      ->capture_default_str()
      ->type_name("{bf16,tf32}");
  c->add_option("--pue", f->pue, "Power usage effectiveness, facility / IT power, 1..3")
      ->capture_default_str();
  c->add_option("--host-power", f->host_power_w,
                "Host power per GPU (CPU, DRAM, NIC), W (default 0: GPU energy only)")
      ->type_name("WATTS");
  c->add_option("--price-per-kwh", f->price_per_kwh,
                "Price of a kWh of facility energy, in --currency")
      ->capture_default_str();
  c->add_option("--currency", f->currency,
                "What --price-per-kwh and the cost are in, as printed (e.g. EUR)")
      ->capture_default_str()
      ->type_name("NAME");
  c->add_option("--carbon-g-per-kwh", f->carbon_g_per_kwh, "CO2 grams per kWh of facility energy")
      ->capture_default_str();
  c->add_option("--power-budget-mw", f->power_budget_mw, "Facility power budget, MW")
      ->type_name("MW");
  c->add_option("--straggler-slowdown", f->straggler_slowdown,
                "Also project a run with one pipeline this much slower throughout (> 1)")
      ->type_name("F");
  c->add_option("--dp-gbps", f->dp_gbps,
                "Inter-node bandwidth per GPU for the gradient all-reduce, GB/s")
      ->capture_default_str();
  c->add_option("--resolution-ms", f->resolution_ms, "Frontier grid spacing, ms")
      ->capture_default_str();
  c->add_flag("--grid", f->grid,
              "Print what the grid sees of the site's IT power: peak, trough, swing within 1 s "
              "and ramp, every job in phase and at random phases");
  c->add_option("--jobs", f->jobs, "Copies of this job at the site, for --grid (1..10000)")
      ->capture_default_str()
      ->type_name("N");
  AddGridLimitFlags(c, &f->limits, "The site's IT",
                    "each job gets a grid plan for the worst case (all jobs in phase), with the "
                    "firmware floor for comparison");
  c->add_flag("--json", f->json, "Print one JSON object instead of the table");
  c->footer(kSiteFooter);
}

SiteSubcommand::~SiteSubcommand() = default;

int SiteSubcommand::Run() const {
  const SiteFlags& f = *flags_;
  const physics::GpuSpec& gpu = physics::FindGpu(f.gpu);
  physics::WorkloadSpec spec;
  spec.model = physics::FindTransformer(f.model);
  spec.parallel.tp = f.tp;
  spec.parallel.pp = f.pp;
  spec.microbatch_size = f.microbatch_size;
  spec.seq_length = f.seq;
  spec.framework = physics::ParseFramework(f.framework);
  spec.precision = physics::ParsePrecision(f.precision);
  const long long dp = DataParallelFromFlags(f.gpus, f.tp, f.pp);
  spec.parallel.dp = static_cast<int>(dp);
  if (f.microbatch_size < 1 || f.global_batch < 1 ||
      f.global_batch % (dp * f.microbatch_size) != 0) {
    throw InputError(Printf(
        "--global-batch %d must be a multiple of the pipelines (%lld) x --microbatch-size %d: "
        "every pipeline gets the same number of microbatches",
        f.global_batch, dp, f.microbatch_size));
  }
  const int microbatches = static_cast<int>(f.global_batch / (dp * f.microbatch_size));
  if (!std::isfinite(f.dp_gbps) || f.dp_gbps <= 0 || f.dp_gbps > 10'000) {
    throw InputError(Printf("--dp-gbps must be > 0 and at most 10000 GB/s (got %g)", f.dp_gbps));
  }
  if (!std::isfinite(f.power_budget_mw) || f.power_budget_mw < 0) {
    throw InputError(Printf("--power-budget-mw must be >= 0 MW (got %g)", f.power_budget_mw));
  }
  sim::SiteRequest r;
  if (!schedule::ParseKind(f.schedule, &r.spec.kind) ||
      r.spec.kind == schedule::Kind::kInterleaved) {
    throw InputError("--schedule must be gpipe or 1f1b (got '" + f.schedule + "')");
  }
  const physics::SimulatedWorkload w = physics::SimulateWorkload(spec, gpu);
  model::RowRuleResult rows;
  if (f.profile.empty()) {
    rows.profile = physics::StampedProfile(w, gpu);
  } else {
    rows = ReadPlannableProfile(f.profile);
    for (const std::string& note : rows.notes)
      std::fprintf(stderr, "joulepipe: note: %s\n", note.c_str());
  }
  const model::Profile& profile = rows.profile;
  double allreduce = 0;
  for (const physics::SimulatedStage& s : w.stages) {
    allreduce =
        std::max(allreduce, physics::DpAllReduceSeconds(s.cost, spec.parallel.dp, f.dp_gbps));
  }
  r.spec.stages = f.pp;
  r.spec.microbatches = microbatches;
  r.spec.chunks = 1;
  r.pipelines = spec.parallel.dp;
  r.tp = f.tp;
  r.allreduce_s = allreduce;
  r.tokens = f.tokens;
  r.tokens_per_iteration = static_cast<double>(f.global_batch) * spec.seq();
  r.pue = f.pue;
  r.host_power_w = f.host_power_w;
  r.price_per_kwh = f.price_per_kwh;
  r.currency = f.currency;
  r.carbon_g_per_kwh = f.carbon_g_per_kwh;
  r.power_budget_w = f.power_budget_mw * 1e6;
  r.straggler_slowdown = f.straggler_slowdown;
  r.resolution_s = f.resolution_ms * 1e-3;
  if (f.jobs < 1 || f.jobs > sim::kMaxSiteJobs) {
    throw InputError("--jobs", Printf("--jobs must be 1..%d (got %d): copies of this job at the "
                                      "site, for the grid figures",
                                      sim::kMaxSiteJobs, f.jobs));
  }
  r.grid = f.grid;
  r.jobs = f.jobs;
  r.grid_limits = GridLimitsOf(f.limits);
  r.profile_name = f.profile.empty()
                       ? "the workload model's " + spec.model.id + " on " + gpu.id +
                             " profile (framework " + f.framework + ", " + f.precision + ")"
                       : f.profile;
  if (!f.profile.empty() && !profile.metadata.p_block_w) r.p_block_w = gpu.p_block_w;
  const CancellableScope cancellable;
  r.cancel = InterruptFlag();
  r.progress = ProgressLines(stderr, "site: ");
  const sim::SiteProjection p = sim::ProjectSite(profile, r);
  const std::string job = Printf(
      "  job         %s on %lld %s: TP %d x PP %d x DP %d, %s with %d microbatches of %d x "
      "%d tokens (global batch %d); DP all-reduce %.3f s at %g GB/s per GPU\n",
      spec.model.name.c_str(), f.gpus, gpu.name.c_str(), f.tp, f.pp, spec.parallel.dp,
      f.schedule.c_str(), microbatches, f.microbatch_size, spec.seq(), f.global_batch, allreduce,
      f.dp_gbps);
  // What one GPU holds at the peak stage (physics/memory.hpp): a projection
  // of a job that cannot run says so.
  const physics::MemoryEstimate mem = physics::EstimateMemory(
      spec,
      {r.spec.kind == schedule::Kind::kGPipe ? physics::PipelineShape::Kind::kGPipe
                                             : physics::PipelineShape::Kind::k1F1B,
       microbatches, 1},
      gpu);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::string memory = Printf(
      "  memory      %.1f of %.0f GiB per GPU at the peak (stage %d), estimated with the "
      "distributed optimizer and sequence parallelism\n",
      mem.peak_bytes() / kGiB, mem.gpu_bytes / kGiB, mem.peak_stage);
  if (!mem.Fits(kSiteMemoryMargin)) {
    memory += Printf(
        "  warning     this job does not fit in GPU memory with a %.0f%% margin: the "
        "projection is of a job that cannot run (more --pp or --tp, or a smaller "
        "--microbatch-size)\n",
        100 * kSiteMemoryMargin);
  }
  const std::string text = f.json ? SiteJson(p, job + memory) : FormatSiteReport(p, job + memory);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace joulepipe::cli
