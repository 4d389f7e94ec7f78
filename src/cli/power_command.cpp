// `joulepipe power`: stream sampled GPU power until interrupted, then sum up.
#include "power_command.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/output_files.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/monitor/power_trace.hpp"
#include "joulepipe/sim/waveform.hpp"
#include "measure_command.hpp"
#include "output_dir.hpp"
#include "signals.hpp"

namespace joulepipe::cli {

using model::InputError;

struct PowerFlags {
  std::string gpus;
  CLI::Option* gpus_option = nullptr;
  int interval_ms = 1000;
  CLI::Option* interval_option = nullptr;
  bool grid = false;
  // --join: the job's power from its ranks' traces (power_trace=), instead
  // of streaming this node's.
  std::vector<std::string> join;
  bool clock_only = false;  // --clock-only: no alignment on the step ends
  std::string csv;          // --csv FILE: the joined power per bin
  bool force = false;
};

namespace {

constexpr char kPowerFooter[] =
    "\nPrints a header, then one line per interval until Ctrl-C (SIGINT), SIGTERM,\n"
    "SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2:\n"
    "  time_s  GPU<i>_W ...  total_W\n"
    "with each GPU's latest sampled instant power. On exit prints the duration and,\n"
    "per GPU, mean power (energy / duration), the highest sampled power and the\n"
    "energy (NVML energy counter where the GPU has one, else the sampled integral),\n"
    "and the methodology; exits 0. A GPU that fails meanwhile (lost) is reported\n"
    "with what was measured until then. GPU power only. docs/measure.md has the\n"
    "accuracy limits.\n"
    "\n"
    "\n"
    "With --join TRACE...: no streaming. Joins the power traces a job's ranks\n"
    "recorded (the Python session's power_trace=) into the job's power on one time\n"
    "axis, aligned on the iteration boundaries (each rank's clock offset is the\n"
    "median difference of its step ends from the first trace's), and prints the\n"
    "offsets, the job's mean and peak power and what the grid sees of it; --csv\n"
    "writes it per bin (time_s,total_w,rank<r>_w...).\n"
    "\n"
    "Examples:\n"
    "  joulepipe power --gpus 0,1 --interval-ms 500\n"
    "  joulepipe power --join power.*.json --csv job-power.csv";

// What the grid sees of the measured total (the streamed lines, one bin
// each): the windows are at least a line apart, the band at most half the
// line rate.
std::string MeasuredGridText(const sim::Waveform& trace,
                             const char* what = "the total of the streamed samples",
                             bool simulated = false) {
  if (trace.gpu_w.size() < 2) return "Grid: too few samples (stream longer than two intervals)\n";
  const sim::GridOptions o = sim::MeasuredGridOptions(trace.dt_s);
  const sim::GridMetrics m = sim::MeasureGrid(trace, o);
  return Printf(
      "Grid (%s, %s): peak %.2f W, trough %.2f W, swing "
      "%.2f W within %g s, ramp %.2f W/s between %g s means, %g-%g Hz band RMS %.2f W. Instant "
      "power read every %g ms: faster swings than that are not seen.\n",
      what, simulated ? "simulated" : "measured", m.peak_w, m.trough_w, m.swing_w, o.swing_window_s,
      m.ramp_w_per_s, o.ramp_window_s, o.band_lo_hz, o.band_hi_hz, m.band_rms_w, trace.dt_s * 1e3);
}

std::string UtcText(double unix_s) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// --join: the job's power from its ranks' traces.
int RunJoin(const PowerFlags& f) {
  if (f.gpus_option->count() > 0 || f.interval_option->count() > 0) {
    throw InputError("--join",
                     "--join reads traces the ranks recorded; --gpus and --interval-ms are for "
                     "streaming this node's power: drop them");
  }
  if (!f.csv.empty()) RefuseToReplace("--csv", f.csv, f.force);
  std::vector<monitor::PowerTraceData> traces;
  for (const std::string& path : f.join) {
    traces.push_back(monitor::ReadPowerTraceFile(path));
  }
  // The first trace is the reference: rank order reads best.
  std::vector<std::size_t> order(traces.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return traces[a].rank < traces[b].rank; });
  std::vector<monitor::PowerTraceData> sorted;
  std::vector<std::string> paths;
  for (std::size_t i : order) {
    sorted.push_back(std::move(traces[i]));
    paths.push_back(f.join[i]);
  }
  const monitor::JoinedTrace j = monitor::JoinPowerTraces(sorted, !f.clock_only);
  const double seconds = static_cast<double>(j.total_w.size()) * j.dt_s;
  const bool simulated = std::any_of(sorted.begin(), sorted.end(),
                                     [](const monitor::PowerTraceData& t) { return t.simulated; });
  std::string out = Printf("Joined %zu ranks' power traces: %.3f s in common from %s, %g ms bins\n",
                           sorted.size(), seconds, UtcText(j.start_unix_s).c_str(), j.dt_s * 1e3);
  if (simulated) {
    out +=
        "Recorded through joulepipe's simulated NVML library: every figure below is "
        "simulated, not measured.\n";
  }
  for (std::size_t k = 0; k < sorted.size(); ++k) {
    const monitor::PowerTraceData& t = sorted[k];
    std::string how;
    if (k == 0) {
      how = "the reference";
    } else if (f.clock_only) {
      how = "on its own clock (--clock-only)";
    } else if (j.common_steps[k] == 0) {
      how = "on its own clock: no iteration in common with rank " + std::to_string(j.ranks[0]);
    } else {
      how = Printf("clock %+.3f s from rank %d's (median over %d common step ends)", j.offset_s[k],
                   j.ranks[0], j.common_steps[k]);
    }
    double sum = 0, peak = 0;
    for (double w : j.rank_w[k]) {
      sum += w;
      peak = std::max(peak, w);
    }
    out += Printf(
        "  rank %d (%s, %s): mean %.1f W, peak %.1f W; %zu samples every %g ms%s; %s\n", t.rank,
        t.gpu.empty() ? "GPU" : t.gpu.c_str(), paths[k].c_str(),
        sum / static_cast<double>(j.rank_w[k].size()), peak, t.t_s.size(), t.interval_s * 1e3,
        t.read_errors > 0
            ? Printf(", %llu failed reads", static_cast<unsigned long long>(t.read_errors)).c_str()
            : "",
        how.c_str());
  }
  sim::Waveform wave;
  wave.dt_s = j.dt_s;
  wave.gpu_w = j.total_w;
  wave.end_s = seconds;
  double sum = 0;
  for (double w : j.total_w) sum += w;
  out += Printf("  the job: mean %.1f W, energy %.3f kJ over the common window (GPU power)\n",
                sum / static_cast<double>(j.total_w.size()), wave.EnergyJ() / 1e3);
  out += MeasuredGridText(wave, "the job's joined power", simulated);
  if (!f.csv.empty()) {
    std::string csv = "time_s,total_w";
    for (int r : j.ranks) csv += ",rank" + std::to_string(r) + "_w";
    csv += "\n";
    for (std::size_t b = 0; b < j.total_w.size(); ++b) {
      csv += Printf("%.3f,%.3f", static_cast<double>(b) * j.dt_s, j.total_w[b]);
      for (const std::vector<double>& w : j.rank_w) csv += Printf(",%.3f", w[b]);
      csv += "\n";
    }
    model::WriteFileAtomically(f.csv, csv);
    out += "Wrote " + f.csv + "\n";
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int RunPower(const PowerFlags& f) {
  if (!f.join.empty()) return RunJoin(f);
  if (!f.csv.empty() || f.clock_only) {
    throw InputError(f.csv.empty() ? "--clock-only" : "--csv",
                     std::string(f.csv.empty() ? "--clock-only" : "--csv") +
                         " goes with --join (the job's power from its ranks' traces)");
  }
  if (f.interval_ms < 1) {
    throw InputError("--interval-ms must be >= 1 (got " + std::to_string(f.interval_ms) + ")");
  }
  monitor::MonitorOptions options;
  if (f.gpus_option->count() > 0) options.gpus = ParseGpuList(f.gpus, "--gpus");
  options.cpu = monitor::CpuMode::kOff;
  options.sampling_period_s = f.interval_ms * 1e-3;
  options.sample_all_gpus = true;
  options.tolerate_gpu_failures = true;  // a lost GPU must not cost the summary

  // Any of the stop signals ends the stream with the summary; taken before
  // the sampler thread starts, so that it inherits the mask.
  TakenSignals signals;
  monitor::Monitor monitor(options);
  const int n = monitor.gpu_count();
  if (n == 0) throw InputError("no GPU is visible (check CUDA_VISIBLE_DEVICES)");
  const std::string methodology = monitor.methodology() + " " + gpu::NvmlMethodology();

  std::string header = "time_s";
  for (int i = 0; i < n; ++i) header += Printf("  GPU%d_W", monitor.gpu_index(i));
  header += "  total_W\n";
  std::fputs(header.c_str(), stdout);
  std::fflush(stdout);

  const auto start = monitor::Clock::now();
  monitor.Begin("power", monitor::Edges::kAligned);  // exact energy in the summary
  const double interval = f.interval_ms * 1e-3;
  sim::Waveform trace;  // --grid: the total, one bin per line
  trace.dt_s = interval;
  while (signals.Wait(interval) == 0) {
    const double t = std::chrono::duration<double>(monitor::Clock::now() - start).count();
    std::string line = Printf("%.3f", t);
    double total = 0;
    bool every = true;  // every GPU has a reading (not so before the first sample)
    for (int i = 0; i < n; ++i) {
      const std::optional<double> w = monitor.LatestPower(i);
      every = every && w.has_value();
      total += w.value_or(0);
      line += Printf("  %.2f", w.value_or(0));
    }
    line += Printf("  %.2f\n", total);
    if (f.grid && every) {
      trace.gpu_w.push_back(total);
      trace.end_s = static_cast<double>(trace.gpu_w.size()) * interval;
    }
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }
  const monitor::Measurement m = monitor.End("power");

  std::string out = Printf("Summary: %.3f s\n", m.duration_s);
  for (int i = 0; i < n; ++i) {
    const monitor::GpuEnergy& g = m.gpus[i];
    const double mean = m.duration_s > 0 ? g.energy_j / m.duration_s : 0;
    const double max = monitor.MaxPower(i).value_or(0);
    if (g.failed) {
      const double until = g.measured_s > 0 ? g.energy_j / g.measured_s : 0;
      out += Printf("  GPU %d: FAILED %.3f s in (%s); until then mean %.2f W, energy %.3f J [%s]\n",
                    g.index, g.measured_s, g.error.c_str(), until, g.energy_j,
                    monitor::EnergySourceName(g.source));
      continue;
    }
    out += Printf("  GPU %d: mean %.2f W, max %.2f W, energy %.3f J [%s%s]\n", g.index, mean, max,
                  g.energy_j, monitor::EnergySourceName(g.source),
                  g.approximate ? ", approximate" : "");
  }
  out += Printf("  total: mean %.2f W, energy %.3f J (GPU-only%s)\n",
                m.duration_s > 0 ? m.gpu_energy_j / m.duration_s : 0, m.gpu_energy_j,
                m.complete() ? "" : "; incomplete: a GPU failed");
  out += "Methodology: " + methodology + " Streamed lines show instant power sampled every " +
         Printf("%d ms", f.interval_ms) + "; max is the highest sample.\n";
  if (f.grid)
    out += MeasuredGridText(trace, "the total of the streamed samples", gpu::Nvml().simulated);
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

PowerSubcommand::PowerSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand("power", "Stream GPU power until Ctrl-C, then a summary")),
      flags_(std::make_unique<PowerFlags>()) {
  PowerFlags* f = flags_.get();
  CLI::App* c = command();
  c->footer(kPowerFooter);
  f->gpus_option = c->add_option("--gpus", f->gpus, "Visible GPU indices (default: all visible)")
                       ->type_name("0,1,...");
  f->interval_option =
      c->add_option("--interval-ms", f->interval_ms, "Sampling and printing period")
          ->capture_default_str()
          ->type_name("N");
  c->add_flag("--grid", f->grid,
              "Also summarise what the grid sees of the streamed total: peak, trough, swing "
              "within 1 s, ramp and the 0.1-20 Hz band (use --interval-ms 10 or less)");
  c->add_option("--join", f->join,
                "Join the power traces of a job's ranks (the Python session's power_trace=) into "
                "the job's power, aligned on the iteration boundaries, and say what the grid sees")
      ->type_name("TRACE...")
      ->expected(1, -1);
  c->add_flag("--clock-only", f->clock_only,
              "--join: take each trace on its own clock (no alignment on the step ends)");
  c->add_option("--csv", f->csv, "--join: write the job's power per bin as CSV")->type_name("FILE");
  c->add_flag("--force", f->force, "--join: replace an existing --csv file");
}

PowerSubcommand::~PowerSubcommand() = default;

int PowerSubcommand::Run() const {
  return RunPower(*flags_);
}

}  // namespace joulepipe::cli
