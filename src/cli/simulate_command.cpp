// `joulepipe simulate`: flags, one sim::SimulateJob call, and printing.
#include "simulate_command.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "flag_names.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "objective_flags.hpp"
#include "output_dir.hpp"
#include "simulate_grid.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

// The summary lists every iteration of runs up to this long.
constexpr std::size_t kMaxIterationRows = 30;

double PipelineEnergy(const sim::SimulationResult& r, int pipeline) {
  double sum = 0;
  for (std::size_t i = 0; i < r.iterations.size(); ++i) {
    for (int s = 0; s < r.stages; ++s) sum += r.GpuEnergy(static_cast<int>(i), pipeline, s);
  }
  return sum * r.gpus_per_stage / static_cast<double>(r.iterations.size());
}

std::string StragglerText(const sim::SimulateRequest& r) {
  const sim::Straggler& g = r.job.straggler;
  if (g.pipeline < 0 || g.slowdown <= 1) return "none";
  std::string when;
  if (g.for_iterations == 0) {
    when = Printf("from iteration %d on", g.from_iteration);
  } else if (g.period == 0) {
    when = Printf("iterations %d..%d", g.from_iteration, g.from_iteration + g.for_iterations - 1);
  } else {
    when = Printf("%d of every %d iterations from iteration %d", g.for_iterations, g.period,
                  g.from_iteration);
  }
  return Printf("pipeline %d, T'/T = %g, %s", g.pipeline, g.slowdown, when.c_str());
}

std::string WaitModelText(const model::WaitModel& waits) {
  return waits.calibrated()
             ? waits.Describe()
             : waits.Describe() + "; waits at P_block (joulepipe calibrate-wait measures it)";
}

double MeanLoweredWaitS(const sim::SimulationResult& r) {
  double sum = 0;
  for (const sim::IterationResult& it : r.iterations) sum += it.lowered_wait_s;
  return r.iterations.empty() ? 0 : sum / static_cast<double>(r.iterations.size());
}

}  // namespace

std::string FormatSimulationSummary(const sim::SimulateOutcome& o) {
  const sim::SimulateRequest& r = o.request;
  const sim::JobSpec& j = r.job;
  const double tb = o.baseline.MeanTime(), eb = o.baseline.MeanEnergy();
  const double tj = o.joulepipe.MeanTime(), ej = o.joulepipe.MeanEnergy();
  const double t0 = o.max_clock.time_s;
  std::string s;
  s += Printf("Figures are %s.\n", kSimulatedFigures);
  s += "job\n";
  s += Printf("  profile       %s\n", r.profile_name.c_str());
  s += Printf("  schedule      %s (%d instructions per pipeline)\n", ShapeText(r.spec).c_str(),
              o.schedule.num_nodes());
  s += Printf("  GPUs          %lld = %d pipelines x %d stages x TP %d\n",
              static_cast<long long>(o.gpus()), j.pipelines, r.spec.stages, j.gpus_per_stage);
  s += Printf("  P_block       %g W %s (GPU power while blocked or idle)\n", j.p_block_w,
              PBlockOrigin(o.p_block_source).c_str());
  s += Printf("  wait model    %s\n", WaitModelText(j.waits).c_str());
  for (const std::string& note : o.notes) {
    s += Printf("  note          %s\n", WithFlagNames(note).c_str());
  }
  s += Printf("  straggler     %s\n", StragglerText(r).c_str());
  if (o.has_straggler() && r.detection == sim::Detection::kMeasured) {
    s += Printf(
        "  detection     measured: the coordinator's detector on each iteration's times "
        "(%d slow iteration(s) at >= %gx to switch, %d below %gx to switch back)\n",
        r.detector.window, r.detector.threshold, r.detector.window, r.detector.recover_below);
  } else if (o.has_straggler()) {
    s += Printf("  detection     %s\n",
                r.detection_lag == 0 ? "immediate (T' known in the iteration it happens)"
                                     : Printf("%d iteration(s) late", r.detection_lag).c_str());
  }
  s += Printf(
      "  faults        clock variability %g, data stalls %s, P2P latency %g us, "
      "all-reduce %g ms%s\n",
      j.clock_variability,
      j.stall_probability > 0 && j.stall_s > 0
          ? Printf("%g ms with p = %g", j.stall_s * 1e3, j.stall_probability).c_str()
          : "none",
      j.p2p_latency_s * 1e6, j.allreduce_s * 1e3,
      j.checkpoint_every > 0 && j.checkpoint_s > 0
          ? Printf(", checkpoint %g s every %d iterations", j.checkpoint_s, j.checkpoint_every)
                .c_str()
          : "");
  s += Printf("  iterations    %d (seed %llu)\n", j.iterations,
              static_cast<unsigned long long>(j.seed));
  s += "plans (one pipeline, noiseless)\n";
  s += Printf("  max clock     %.6f s, %.1f J\n", t0, o.max_clock.energy_j);
  s += Printf("  intrinsic     %.6f s, %.1f J (saving %.2f%%): %s\n", o.intrinsic.time_s,
              o.intrinsic.energy_j, SavingPercent(o.intrinsic.energy_j, o.max_clock.energy_j),
              ObjectiveText(r.objective, r.slowdown).c_str());
  if (o.has_straggler()) {
    s += Printf("  straggler T'  %.6f s; other pipelines run %.6f s = %.3f T, %.1f J\n",
                o.straggler_target_s, o.straggler_plan.time_s, o.straggler_plan.time_s / t0,
                o.straggler_plan.energy_j);
  }
  s += Printf("  frontier      %zu points, planned in %.2f s (%g ms grid)\n", o.frontier_points,
              o.solve_seconds, r.resolution_s * 1e3);
  s += "policies\n";
  s += "  baseline      every pipeline at its highest clocks\n";
  s += "  joulepipe     intrinsic plan; while a straggler is known, the others run the\n"
       "                least-energy plan within its iteration time T'\n";
  s += Printf("result (mean per iteration, whole job, %lld GPUs)\n",
              static_cast<long long>(o.gpus()));
  s += Printf("  %-12s %16s %20s\n", "", "iteration time", "energy/iteration");
  s += Printf("  %-12s %14.6f s %18.1f J\n", "baseline", tb, eb);
  s += Printf("  %-12s %14.6f s %18.1f J\n", "joulepipe", tj, ej);
  s += Printf("  saving        %.2f%% energy, iteration time %+.3f%%\n", SavingPercent(ej, eb),
              SlowdownPercent(tj, tb));
  if (j.waits.calibrated()) {
    s += Printf(
        "  lowered waits %.3f GPU-s per iteration at %d MHz (joulepipe policy; %.1f W "
        "less each)\n",
        MeanLoweredWaitS(o.joulepipe), j.waits.wait_mhz(),
        std::min(j.p_block_w, j.waits.saving_w()));
  }
  if (model::CountsHost(r.objective)) {
    // The host draws its power for the whole iteration, whatever the GPUs do.
    const double host_w = r.objective.host_power_w * static_cast<double>(o.gpus());
    const double nb = eb + host_w * tb, nj = ej + host_w * tj;
    s += Printf(
        "  with host     %.1f J vs %.1f J per iteration: %.2f%% saving (GPU + host, %g "
        "W per GPU)\n",
        nb, nj, SavingPercent(nj, nb), r.objective.host_power_w);
  }
  if (r.objective.goal == model::Goal::kPowerBudget) {
    const double host_w = r.objective.host_power_w * static_cast<double>(o.gpus());
    s += Printf("  power         %.1f kW on average (budget %g kW; %s)\n", (ej / tj + host_w) / 1e3,
                r.objective.power_budget_w / 1e3, model::EnergyScope(r.objective).c_str());
  }
  s += Printf("  simulated in  %.3f s (both policies)\n", o.simulate_seconds);
  // A short run's iterations show the switch (and, with a lag, its cost).
  const std::size_t n = o.baseline.iterations.size();
  if (n > 1 && n <= kMaxIterationRows) {
    s += "per iteration (whole job)\n";
    s += Printf("  %4s %-9s %12s %14s %12s %14s %8s\n", "iter", "straggler", "baseline s",
                "baseline J", "joulepipe s", "joulepipe J", "saving");
    for (std::size_t i = 0; i < n; ++i) {
      const sim::IterationResult& b = o.baseline.iterations[i];
      const sim::IterationResult& q = o.joulepipe.iterations[i];
      s += Printf("  %4zu %-9s %12.6f %14.1f %12.6f %14.1f %7.2f%%\n", i,
                  b.straggler_active ? "slow" : "-", b.time_s, b.energy_j, q.time_s, q.energy_j,
                  SavingPercent(q.energy_j, b.energy_j));
    }
  }
  return s;
}

std::string SimulationJson(const sim::SimulateOutcome& o) {
  return SimulationJsonObject(o).dump() + "\n";
}

nlohmann::ordered_json SimulationJsonObject(const sim::SimulateOutcome& o) {
  using nlohmann::ordered_json;
  const sim::SimulateRequest& r = o.request;
  const sim::JobSpec& j = r.job;
  const double eb = o.baseline.MeanEnergy(), ej = o.joulepipe.MeanEnergy();
  ordered_json root;
  root["baseline"] = {{"time_s", o.baseline.MeanTime()}, {"energy_j", eb}};
  root["joulepipe"] = {{"time_s", o.joulepipe.MeanTime()},
                       {"energy_j", ej},
                       {"lowered_wait_s", MeanLoweredWaitS(o.joulepipe)}};
  root["saving_pct"] = SavingPercent(ej, eb);
  root["figures"] = kSimulatedFigures;
  root["gpus"] = o.gpus();
  ordered_json inputs;
  inputs["profile"] = r.profile_name;
  inputs["schedule"] = std::string(schedule::KindName(r.spec.kind));
  inputs["stages"] = r.spec.stages;
  inputs["microbatches"] = r.spec.microbatches;
  inputs["chunks"] = r.spec.chunks;
  inputs["pipelines"] = j.pipelines;
  inputs["tp"] = j.gpus_per_stage;
  inputs["p_block_w"] = j.p_block_w;
  inputs["p_block_from"] = o.p_block_source == "profile" ? "profile" : "--p-block";
  inputs["wait_model"] = WaitModelText(j.waits);
  inputs["iterations"] = j.iterations;
  inputs["straggler_pipeline"] = j.straggler.pipeline;
  inputs["straggler_slowdown"] = j.straggler.slowdown;
  inputs["straggler_from"] = j.straggler.from_iteration;
  inputs["straggler_for"] = j.straggler.for_iterations;
  inputs["straggler_period"] = j.straggler.period;
  inputs["detection"] = sim::DetectionName(r.detection);
  inputs["detection_lag"] = r.detection_lag;
  inputs["detection_window"] = r.detector.window;
  inputs["detection_threshold"] = r.detector.threshold;
  inputs["clock_variability"] = j.clock_variability;
  inputs["stall_probability"] = j.stall_probability;
  inputs["stall_s"] = j.stall_s;
  inputs["p2p_latency_s"] = j.p2p_latency_s;
  inputs["allreduce_s"] = j.allreduce_s;
  inputs["checkpoint_every"] = j.checkpoint_every;
  inputs["checkpoint_s"] = j.checkpoint_s;
  inputs["seed"] = j.seed;
  inputs["resolution_s"] = r.resolution_s;
  inputs["goal"] = std::string(model::GoalName(r.objective.goal));
  inputs["slowdown"] = r.slowdown;
  inputs["energy_budget_j"] = r.objective.energy_budget_j;
  inputs["power_budget_w"] = r.objective.power_budget_w;
  inputs["host_power_w"] = r.objective.host_power_w;
  root["inputs"] = inputs;
  root["energy_scope"] = model::EnergyScope(r.objective);
  if (model::CountsHost(r.objective)) {
    const double host_w = r.objective.host_power_w * static_cast<double>(o.gpus());
    const double nb = eb + host_w * o.baseline.MeanTime(),
                 nj = ej + host_w * o.joulepipe.MeanTime();
    root["with_host"] = {{"baseline_energy_j", nb},
                         {"joulepipe_energy_j", nj},
                         {"saving_pct", SavingPercent(nj, nb)}};
  }
  ordered_json notes = ordered_json::array();
  for (const std::string& note : o.notes) notes.push_back(WithFlagNames(note));
  root["notes"] = notes;
  root["plans"] = {
      {"max_clock", {{"time_s", o.max_clock.time_s}, {"energy_j", o.max_clock.energy_j}}},
      {"intrinsic",
       {{"time_s", o.intrinsic.time_s},
        {"energy_j", o.intrinsic.energy_j},
        {"goal", ObjectiveText(r.objective, r.slowdown)}}},
      {"straggler_response",
       {{"target_s", o.straggler_target_s},
        {"time_s", o.straggler_plan.time_s},
        {"energy_j", o.straggler_plan.energy_j}}},
      {"frontier_points", o.frontier_points},
      {"solve_seconds", o.solve_seconds}};
  ordered_json pipelines = ordered_json::array();
  for (int p = 0; p < j.pipelines; ++p) {
    const double b = PipelineEnergy(o.baseline, p), q = PipelineEnergy(o.joulepipe, p);
    pipelines.push_back({{"pipeline", p},
                         {"straggler", p == j.straggler.pipeline},
                         {"baseline_energy_j", b},
                         {"joulepipe_energy_j", q},
                         {"saving_pct", SavingPercent(q, b)}});
  }
  root["per_pipeline"] = pipelines;
  ordered_json iterations = ordered_json::array();
  for (std::size_t i = 0; i < o.baseline.iterations.size(); ++i) {
    const sim::IterationResult& b = o.baseline.iterations[i];
    const sim::IterationResult& q = o.joulepipe.iterations[i];
    iterations.push_back({{"iteration", i},
                          {"straggler_active", b.straggler_active},
                          {"target_s", q.target_s},
                          {"baseline", {{"time_s", b.time_s}, {"energy_j", b.energy_j}}},
                          {"joulepipe", {{"time_s", q.time_s}, {"energy_j", q.energy_j}}}});
  }
  root["per_iteration"] = iterations;
  root["simulate_seconds"] = o.simulate_seconds;
  if (!o.baseline.waveform.gpu_w.empty()) root["waveform"] = WaveformExcerptJson(o);
  return root;
}

std::string SimulationTimeline(const sim::SimulateOutcome& o) {
  return sim::TimelineJson(o.schedule,
                           {{"joulepipe", 0, &o.joulepipe.timeline},
                            {"baseline", o.request.job.pipelines, &o.baseline.timeline}});
}

// ---- The subcommand ------------------------------------------------------------

namespace {

constexpr char kSimulateFooter[] =
    "\nPlans one pipeline's iteration time-energy frontier, then simulates D such\n"
    "pipelines training in data parallel (gradient all-reduce after every iteration)\n"
    "under two policies and compares them:\n"
    "  baseline   every pipeline runs every instruction at its highest clock;\n"
    "  joulepipe  every pipeline runs the intrinsic plan (least energy at the same\n"
    "             iteration time T, or the operating point --max-slowdown,\n"
    "             --least-energy, --energy-budget or --power-budget chooses; the\n"
    "             budgets are the whole job's); while a straggler slows its pipeline to T',\n"
    "             the straggler keeps that plan and the others run the least-energy\n"
    "             frontier plan whose time is <= T' (they would wait anyway), and\n"
    "             switch back when it recovers (after --detection-lag iterations,\n"
    "             or, with --detection measured, when the coordinator's detector\n"
    "             has seen --detection-window slow or recovered iterations).\n"
    "\n"
    "Accounting (GPU energy, simulated from the profile): per GPU and iteration\n"
    "  E = sum of instruction energies + P_block x (iteration time - busy time).\n"
    "The iteration time is the slowest pipeline's finish plus the all-reduce; every\n"
    "wait (dependencies, data stalls, all-reduce) is charged at P_block. A slowed\n"
    "instruction (straggler, slow GPU) does the same work; its extra time counts as\n"
    "stalled at P_block. --tp multiplies the energy by the GPUs per stage.\n"
    "\n"
    "Example (Perseus's emulation: 16 pipelines, one straggler at T'/T = 1.2):\n"
    "  joulepipe simulate --profile data/profiles/gpt3-175b+a100_sxm_bf16.csv \\\n"
    "      --p-block 83.64 --pipelines 16 --stages 8 --microbatches 96 --tp 8 \\\n"
    "      --straggler-slowdown 1.2 --iterations 1\n"
    "Episodic straggler seen one iteration late, with a timeline for chrome://tracing:\n"
    "  joulepipe simulate ... --straggler-slowdown 1.3 --straggler-from 3 \\\n"
    "      --straggler-for 4 --detection-lag 1 --iterations 12 --timeline trace.json";

}  // namespace

struct SimulateFlags {
  GridFlags grid;
  std::string profile;
  std::string wait_model;
  std::string schedule = "1f1b";
  int stages = 0;
  int microbatches = 0;
  int chunks = 2;
  double p_block_w = 0;                   // only read when --p-block was given
  CLI::Option* p_block_option = nullptr;  // tells whether --p-block was given
  int pipelines = 0;
  int tp = 1;
  double slowdown = 1;
  int straggler_pipeline = 0;
  int straggler_from = 0;
  int straggler_for = 0;
  int straggler_period = 0;
  int detection_lag = 0;
  std::string detection = "oracle";
  int detection_window = 2;
  double detection_threshold = 1.05;
  double clock_variability = 0;
  double stall_probability = 0;
  double stall_ms = 0;
  int checkpoint_every = 0;
  double checkpoint_s = 0;
  double p2p_latency_us = 0;
  double allreduce_ms = 0;
  int iterations = 10;
  std::uint64_t seed = 1;
  std::string timeline;
  int timeline_iterations = 1;
  double resolution_ms = 5;
  ObjectiveFlags objective;
  bool json = false;
  CLI::Option* chunks_option = nullptr;
};

SimulateSubcommand::SimulateSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "simulate", "Simulate data-parallel training with a straggler: baseline vs joulepipe")),
      flags_(std::make_unique<SimulateFlags>()) {
  SimulateFlags* f = flags_.get();
  CLI::App* c = command();
  c->footer(kSimulateFooter);
  c->add_option("--profile", f->profile, "Stage profile CSV (as for `plan`)")
      ->required()
      ->type_name("P.csv");
  f->p_block_option =
      c->add_option("--p-block", f->p_block_w,
                    "GPU power while blocked or idle, watts (default: the profile's p_block_w)")
          ->type_name("WATTS");
  c->add_option("--pipelines", f->pipelines, "Data-parallel pipelines D, 1..100000")
      ->required()
      ->type_name("D");
  c->add_option("--stages", f->stages, "Pipeline stages S, 1..1024")->required()->type_name("S");
  c->add_option("--microbatches", f->microbatches, "Microbatches per iteration M, >= 1")
      ->required()
      ->type_name("M");
  c->add_option("--schedule", f->schedule, "Pipeline schedule")
      ->capture_default_str()
      ->type_name("{gpipe,1f1b,interleaved}");
  f->chunks_option =
      c->add_option("--chunks", f->chunks, "Model chunks per stage V (interleaved only; default 2)")
          ->type_name("V");
  c->add_option("--tp", f->tp,
                "GPUs per stage (tensor-parallel degree), 1..1024; multiplies energy")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--iterations", f->iterations, "Iterations to simulate")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--straggler-slowdown", f->slowdown,
                "Straggler's iteration time over normal, T'/T, 1..100 (1 = no straggler)")
      ->capture_default_str()
      ->type_name("F");
  c->add_option("--straggler-pipeline", f->straggler_pipeline, "Which pipeline straggles")
      ->capture_default_str()
      ->type_name("P");
  c->add_option("--straggler-from", f->straggler_from, "First iteration it straggles")
      ->capture_default_str()
      ->type_name("I");
  c->add_option("--straggler-for", f->straggler_for, "Iterations per episode (0 = until the end)")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--straggler-period", f->straggler_period,
                "Repeat the episode every P iterations (0 = once)")
      ->capture_default_str()
      ->type_name("P");
  c->add_option("--detection-lag", f->detection_lag,
                "Iterations before joulepipe knows of a slowdown (0 = immediate; "
                "--detection oracle)")
      ->capture_default_str()
      ->type_name("K");
  c->add_option("--detection", f->detection,
                "oracle: the slowdown is known --detection-lag iterations late; measured: the "
                "coordinator's straggler detector (joulepipe serve's) watches the simulated "
                "iteration times")
      ->capture_default_str()
      ->type_name("{oracle,measured}");
  c->add_option("--detection-window", f->detection_window,
                "--detection measured: consecutive slow (or recovered) iterations before "
                "switching, 1..100")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--detection-threshold", f->detection_threshold,
                "--detection measured: a pipeline this many times slower than the others "
                "straggles, (1, 100]")
      ->capture_default_str()
      ->type_name("X");
  c->add_option("--clock-variability", f->clock_variability,
                "Std. dev. of each GPU's time factor, drawn once, 0..0.2 (e.g. 0.02)")
      ->capture_default_str()
      ->type_name("SIGMA");
  c->add_option("--stall-probability", f->stall_probability,
                "Chance per iteration and pipeline of a data-loader stall, 0..1")
      ->capture_default_str()
      ->type_name("P");
  c->add_option("--wait-model", f->wait_model,
                "Clocks while waiting: the GPU's calibration (joulepipe calibrate-wait); the "
                "joulepipe policy then lowers the waits its plans mark (default: uncalibrated, "
                "every wait at P_block)")
      ->type_name("FILE");
  c->add_option("--checkpoint-every", f->checkpoint_every,
                "A checkpoint save after every N iterations (0: none): the whole job pauses "
                "--checkpoint-s at P_block, a trough the grid sees")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--checkpoint-s", f->checkpoint_s, "The pause of one checkpoint save, seconds")
      ->capture_default_str()
      ->type_name("S");
  c->add_option("--stall-ms", f->stall_ms, "Length of a data-loader stall, ms (at most an hour)")
      ->capture_default_str()
      ->type_name("MS");
  c->add_option("--p2p-latency-us", f->p2p_latency_us,
                "Latency added to every dependency between stages, microseconds (at most 1 s)")
      ->capture_default_str()
      ->type_name("US");
  c->add_option("--allreduce-ms", f->allreduce_ms,
                "Gradient all-reduce time per iteration, ms (at most an hour)")
      ->capture_default_str()
      ->type_name("MS");
  c->add_option("--seed", f->seed, "Seed of clock variability and stalls")
      ->capture_default_str()
      ->type_name("N")
      // CLI11 reads "-1" into an unsigned as 2^64 - 1 and saturates what is
      // too large; a seed is a whole number that fits 64 bits, as written.
      ->check(CLI::Validator(
          [](std::string& value) {
            std::uint64_t seed = 0;
            const char* end = value.data() + value.size();
            const auto [ptr, ec] = std::from_chars(value.data(), end, seed);
            // (An empty value is refused by app.cpp's check for every flag.)
            if (value.empty() || (ec == std::errc() && ptr == end)) return std::string();
            return "'" + value + "' is not a seed; give a whole number 0..18446744073709551615";
          },
          "", "seed"));
  c->add_option("--timeline", f->timeline,
                "Write a Chrome trace (chrome://tracing, Perfetto) of the first iterations")
      ->type_name("FILE");
  c->add_option("--timeline-iterations", f->timeline_iterations, "Iterations in --timeline")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--resolution-ms", f->resolution_ms,
                "Frontier grid spacing, ms (T and T' are planned exactly)")
      ->capture_default_str()
      ->type_name("MS");
  AddObjectiveFlags(c, &f->objective, "the whole job's GPUs");
  c->add_flag("--grid", f->grid.grid,
              "Print what the grid sees of the job: peak, trough, swing within 1 s, ramp and "
              "the oscillation in a band, from its power over time (both policies; GPU + host "
              "with --host-power)");
  c->add_option("--waveform-ms", f->grid.waveform_ms, "Bin width of the job's power waveform, ms")
      ->capture_default_str()
      ->type_name("MS");
  c->add_option("--band-lo-hz", f->grid.band_lo_hz, "The oscillation band's low end, Hz")
      ->capture_default_str()
      ->type_name("HZ");
  c->add_option("--band-hi-hz", f->grid.band_hi_hz, "The oscillation band's high end, Hz")
      ->capture_default_str()
      ->type_name("HZ");
  AddGridLimitFlags(c, &f->grid.limits, "Grid plan: the job's",
                    "prints the least-energy plan + power floor that keeps it, beside the "
                    "firmware floor alone");
  AddGridPlanOutFlags(c, &f->grid);
  c->add_flag("--grid-offsets", f->grid.offsets,
              "Grid plan: also try offsets between the pipelines' starts (a lever that costs "
              "time: the drops to the all-reduce come one after another; none by default)");
  c->add_flag("--grid-frontier", f->grid.frontier,
              "Print the energy-smoothness frontier: what each ramp limit (shares of the "
              "baseline's ramp) costs, joulepipe against the firmware floor");
  c->add_option("--waveform-csv", f->grid.waveform_csv,
                "Write the job's power over time, both policies, as CSV "
                "(time_s,baseline_gpu_w,joulepipe_gpu_w)")
      ->type_name("FILE");
  c->add_flag(
      "--json", f->json,
      "Print one JSON object {baseline:{time_s,energy_j}, joulepipe:{...}, saving_pct, ...}");
}

SimulateSubcommand::~SimulateSubcommand() = default;

int SimulateSubcommand::Run() const {
  const SimulateFlags& f = *flags_;
  sim::SimulateRequest request;
  request.profile_name = f.profile;
  request.spec = ScheduleFromFlags(f.schedule, f.stages, f.microbatches, f.chunks,
                                   f.chunks_option->count() > 0);
  if (f.timeline_iterations < 1) {
    throw InputError("--timeline-iterations must be at least 1 (got " +
                     std::to_string(f.timeline_iterations) + ")");
  }
  sim::JobSpec& job = request.job;
  job.pipelines = f.pipelines;
  job.gpus_per_stage = f.tp;
  request.p_block_w = IfGiven(f.p_block_option, f.p_block_w);
  job.p2p_latency_s = f.p2p_latency_us * 1e-6;
  job.allreduce_s = f.allreduce_ms * 1e-3;
  job.iterations = f.iterations;
  job.straggler.pipeline = f.straggler_pipeline;
  job.straggler.slowdown = f.slowdown;
  job.straggler.from_iteration = f.straggler_from;
  job.straggler.for_iterations = f.straggler_for;
  job.straggler.period = f.straggler_period;
  job.clock_variability = f.clock_variability;
  job.stall_probability = f.stall_probability;
  job.stall_s = f.stall_ms * 1e-3;
  job.checkpoint_every = f.checkpoint_every;
  job.checkpoint_s = f.checkpoint_s;
  job.seed = f.seed;
  request.detection_lag = f.detection_lag;
  if (f.detection != "oracle" && f.detection != "measured") {
    throw model::InputError("--detection",
                            "--detection is oracle or measured (got '" + f.detection +
                                "'): oracle knows a slowdown --detection-lag iterations late, "
                                "measured detects it from the simulated iteration times");
  }
  request.detection =
      f.detection == "measured" ? sim::Detection::kMeasured : sim::Detection::kOracle;
  request.detector.window = f.detection_window;
  request.detector.threshold = f.detection_threshold;
  request.detector.recover_below = std::min(request.detector.recover_below, f.detection_threshold);
  request.resolution_s = f.resolution_ms * 1e-3;
  request.objective = ObjectiveFromFlags(f.objective, 0, &request.slowdown);
  request.timeline_iterations = f.timeline.empty() ? 0 : f.timeline_iterations;
  request.waveform_dt_s = GridWaveformDtS(f.grid);
  sim::CheckSimulateRequest(request);  // flags before files
  CheckGridPlanOut(f.grid);

  // Planned and replayed on the rows the one rule gives (as `plan` and
  // `evaluate` use them); its notes lead the simulation's.
  const model::RowRuleResult rows = ReadPlannableProfile(f.profile);
  const model::Profile& profile = rows.profile;
  if (!f.wait_model.empty()) job.waits = model::ReadWaitModelFile(f.wait_model);
  request.progress = ProgressLines(stderr, "simulate: ");
  sim::SimulateOutcome outcome = sim::SimulateJob(profile, request);
  outcome.notes.insert(outcome.notes.begin(), rows.notes.begin(), rows.notes.end());
  if (!f.timeline.empty()) WriteFileAtomically(f.timeline, SimulationTimeline(outcome));
  const sim::GridOptions grid = GridOptionsOf(f.grid, outcome, f.objective.host_power_w);
  if (!f.grid.waveform_csv.empty()) {
    WriteFileAtomically(f.grid.waveform_csv, WaveformCsv(outcome, grid));
  }
  std::string text;
  GridPlanOutput grid_plan;
  if (f.grid.plans()) {
    grid_plan = GridPlanReport(outcome, profile, f.grid, grid, request.waveform_dt_s);
  }
  if (!grid_plan.plan_file.empty()) WriteFileAtomically(f.grid.plan_out, grid_plan.plan_file);
  if (f.json) {
    nlohmann::ordered_json root = SimulationJsonObject(outcome);
    if (f.grid.grid) root["grid"] = GridJson(outcome, grid, request.waveform_dt_s);
    if (f.grid.plans()) root["grid_plan"] = grid_plan.json;
    text = root.dump() + "\n";
  } else {
    text = FormatSimulationSummary(outcome);
    if (f.grid.grid) text += GridText(outcome, grid, request.waveform_dt_s);
    text += grid_plan.text;
    if (!f.grid.waveform_csv.empty()) {
      text += Printf("waveform      %s (%g ms bins, both policies)\n", f.grid.waveform_csv.c_str(),
                     f.grid.waveform_ms);
    }
  }
  if (!f.json && !f.timeline.empty()) {
    const bool cut = outcome.baseline.timeline_truncated || outcome.joulepipe.timeline_truncated;
    text +=
        Printf("timeline      %s (first %d iteration(s), both policies%s)\n", f.timeline.c_str(),
               f.timeline_iterations, cut ? "; cut at 500,000 events each" : "");
  }
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace joulepipe::cli
