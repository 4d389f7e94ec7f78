// `joulepipe power`: stream sampled GPU power until interrupted, then sum up.
#include "power_command.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "measure_command.hpp"
#include "signals.hpp"

namespace joulepipe::cli {

using model::InputError;

struct PowerFlags {
  std::string gpus;
  CLI::Option* gpus_option = nullptr;
  int interval_ms = 1000;
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
    "Example:\n"
    "  joulepipe power --gpus 0,1 --interval-ms 500";

int RunPower(const PowerFlags& f) {
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
  while (signals.Wait(interval) == 0) {
    const double t = std::chrono::duration<double>(monitor::Clock::now() - start).count();
    std::string line = Printf("%.3f", t);
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const double w = monitor.LatestPower(i).value_or(0);
      total += w;
      line += Printf("  %.2f", w);
    }
    line += Printf("  %.2f\n", total);
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
  c->add_option("--interval-ms", f->interval_ms, "Sampling and printing period")
      ->capture_default_str()
      ->type_name("N");
}

PowerSubcommand::~PowerSubcommand() = default;

int PowerSubcommand::Run() const {
  return RunPower(*flags_);
}

}  // namespace joulepipe::cli
