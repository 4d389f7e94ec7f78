// `joulepipe measure`: run a command inside one tick-aligned measurement
// window and report what it drew, with the methodology. The command runs in
// its own process group (at a terminal, in the foreground); joulepipe
// forwards signals to the group, sees the command's end through a pidfd
// within a millisecond, and keeps its exit code whatever happens to the
// measurement or the --csv file.
#include "measure_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/command_window.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "output_dir.hpp"
#include "signals.hpp"

extern char** environ;

namespace joulepipe::cli {

using model::InputError;

struct MeasureFlags {
  std::string gpus;
  CLI::Option* gpus_option = nullptr;
  bool cpu = false;
  int interval_ms = 100;
  std::string csv;
  bool json = false;
  std::vector<std::string> command;
};

namespace {

constexpr char kMeasureFooter[] =
    "\nRuns CMD and reports its duration and energy per GPU, per CPU socket (package\n"
    "and DRAM, via RAPL) and in total. GPUs with NVML's energy counter are read at\n"
    "counter updates on both edges (joulepipe waits up to ~100 ms before starting CMD\n"
    "and after it exits) and the partial periods are corrected with instant power;\n"
    "GPUs without the counter are sampled every --interval-ms and integrated.\n"
    "Every report says which, whether totals are GPU-only or GPU+CPU+DRAM, and\n"
    "whether NVML is the real or the simulated library. docs/measure.md explains\n"
    "what is counted and the accuracy limits.\n"
    "\n"
    "CPU energy: read from /sys/class/powercap/intel-rapl:* when readable (root only\n"
    "since Linux 5.10); otherwise the report notes it. --cpu makes it required.\n"
    "Environment: JOULEPIPE_NVML_LIBRARY (NVML to load; build/sim-nvml/libnvidia-ml.so.1\n"
    "simulates GPUs), JOULEPIPE_RAPL_ROOT (powercap root, default /sys/class/powercap).\n"
    "\n"
    "Output: the report on stderr; --json: one JSON object as the last stdout line;\n"
    "--csv F: device,index,name,energy_j,avg_power_w,duration_s,source,approximate\n"
    "rows (one per GPU, CPU package, DRAM, and a total) written atomically.\n"
    "--csv F is checked before CMD starts (an unwritable F is refused and CMD not\n"
    "run); should writing it still fail at the end, the report and the rows go to\n"
    "stderr and the exit code is still CMD's.\n"
    "Exit code: CMD's (128+N if signal N killed it; 127 if it cannot be run), also\n"
    "when a GPU fails mid-run (the report says what was measured until then);\n"
    "2 for bad flags or no NVML.\n"
    "\n"
    "Signals: CMD runs in its own process group; SIGHUP, SIGINT, SIGQUIT, SIGTERM,\n"
    "SIGUSR1 and SIGUSR2 sent to joulepipe are forwarded to that whole group, and\n"
    "joulepipe reports when CMD ends. At a terminal CMD gets the terminal (Ctrl-C,\n"
    "Ctrl-Z and reading work as without joulepipe); it is given back at the end.\n"
    "\n"
    "Examples:\n"
    "  joulepipe measure -- torchrun --nproc-per-node 8 train.py\n"
    "  joulepipe measure --gpus 0,1 --cpu --json -- python bench.py > out.json";

struct DeviceRow {
  std::string device;  // "gpu", "cpu-package", "dram", "total"
  int index = 0;       // GPU visible index or CPU socket
  std::string name;
  double energy_j = 0;
  std::string source;
  bool approximate = false;
  bool aligned = false;
  // A GPU that failed mid-run: energy_j covers only its first measured_s.
  bool failed = false;
  double measured_s = 0;
  std::string error;
};

struct MeasureReport {
  std::vector<std::string> command;
  bool started = false;  // CMD ran (else `not_run` says why)
  std::string not_run;   // "cannot run x: No such file", "interrupted (SIGTERM) ..."
  int exit_code = 0;
  std::string exit_note;        // "killed by signal 9" etc.
  monitor::Measurement m;       // m.duration_s is set even when `measure_error` is
  std::string measure_error;    // the whole measurement failed (no energies)
  std::vector<DeviceRow> rows;  // without the total
  std::string scope;
  std::string methodology;  // monitor's + NVML's
  bool simulated = false;
  bool gpus_measured = false;
  bool complete() const { return measure_error.empty() && m.complete(); }
};

double AvgPower(double energy_j, double duration_s) {
  return duration_s > 0 ? energy_j / duration_s : 0;
}

DeviceRow Row(std::string device, int index, std::string name, double energy_j, std::string source,
              double measured_s) {
  DeviceRow row;
  row.device = std::move(device);
  row.index = index;
  row.name = std::move(name);
  row.energy_j = energy_j;
  row.source = std::move(source);
  row.measured_s = measured_s;
  return row;
}

std::vector<DeviceRow> Rows(const monitor::Measurement& m, const monitor::Monitor& monitor) {
  std::vector<DeviceRow> rows;
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    const monitor::GpuEnergy& g = m.gpus[i];
    DeviceRow row =
        Row("gpu", g.index, monitor.gpu_name(static_cast<int>(i)), g.energy_j,
            monitor::EnergySourceName(g.source), g.failed ? g.measured_s : m.duration_s);
    row.approximate = g.approximate;
    row.aligned = g.aligned;
    row.failed = g.failed;
    row.error = g.error;
    rows.push_back(row);
  }
  for (const monitor::CpuEnergy& c : m.cpus) {
    rows.push_back(Row("cpu-package", c.socket, "", c.package_j, "rapl", m.duration_s));
    if (c.has_dram) rows.push_back(Row("dram", c.socket, "", c.dram_j, "rapl", m.duration_s));
  }
  return rows;
}

std::string GpuLabel(const DeviceRow& row) {
  return Printf("GPU %d", row.index) + (row.name.empty() ? "" : " (" + row.name + ")");
}

// "GPU 1 (NAME) failed during the command, measured until 0.412 s (its last
// good reading): <NVML's message>".
std::string FailureText(const DeviceRow& row) {
  return GpuLabel(row) +
         Printf(" failed during the command, measured until %.3f s (its last good reading)",
                row.measured_s) +
         ": " + row.error;
}

std::string FormatText(const MeasureReport& r) {
  const monitor::Measurement& m = r.m;
  std::string out = "joulepipe measure: " + CommandLine(r.command) + "\n";
  out += Printf("  exit code %d%s, duration %.3f s\n", r.exit_code,
                r.exit_note.empty() ? "" : (" (" + r.exit_note + ")").c_str(), m.duration_s);
  if (!r.measure_error.empty()) {
    out += "  energy not measured: " + r.measure_error + "\n";
    out += "Methodology: " + r.methodology + "\n";
    return out;
  }
  for (const DeviceRow& row : r.rows) {
    const std::string label =
        row.device == "gpu"
            ? GpuLabel(row)
            : Printf("%s socket %d", row.device == "dram" ? "DRAM" : "CPU package", row.index);
    std::string how = row.source;
    if (row.failed) {
      how += Printf(", FAILED: first %.3f s only", row.measured_s);
    } else if (row.device == "gpu" && row.source == "counter") {
      how += row.aligned ? ", aligned edges" : ", unaligned edges";
    }
    if (row.approximate) how += ", approximate";
    out += Printf("  %-34s %12.3f J  %9.2f W  [%s]\n", label.c_str(), row.energy_j,
                  AvgPower(row.energy_j, row.measured_s), how.c_str());
  }
  out += Printf("  %-34s %12.3f J  %9.2f W%s\n", ("Total (" + r.scope + ")").c_str(),
                m.total_energy_j(), AvgPower(m.total_energy_j(), m.duration_s),
                m.complete() ? "" : "  [incomplete]");
  for (const DeviceRow& row : r.rows) {
    if (row.failed) out += "  Incomplete: " + FailureText(row) + "\n";
  }
  if (m.approximate()) {
    out +=
        "  Approximate: the command ran for less than the counter's update period, so\n"
        "  energy is instant power x duration.\n";
  }
  out += "Methodology: " + r.methodology + "\n";
  return out;
}

std::string FormatJson(const MeasureReport& r) {
  const monitor::Measurement& m = r.m;
  nlohmann::json j;
  j["version"] = 1;
  j["command"] = r.command;
  j["exit_code"] = r.exit_code;
  j["duration_s"] = m.duration_s;
  nlohmann::json gpus = nlohmann::json::array();
  nlohmann::json cpus = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  for (const DeviceRow& row : r.rows) {
    if (row.device != "gpu") continue;
    nlohmann::json g = {{"index", row.index},
                        {"name", row.name},
                        {"energy_j", row.energy_j},
                        {"avg_power_w", AvgPower(row.energy_j, row.measured_s)},
                        {"source", row.source},
                        {"aligned", row.aligned},
                        {"approximate", row.approximate},
                        {"failed", row.failed},
                        {"measured_s", row.measured_s}};
    if (row.failed) {
      g["error"] = row.error;
      errors.push_back(FailureText(row));
    }
    gpus.push_back(g);
  }
  for (const monitor::CpuEnergy& c : m.cpus) {
    cpus.push_back({{"socket", c.socket},
                    {"package_j", c.package_j},
                    {"dram_j", c.has_dram ? nlohmann::json(c.dram_j) : nlohmann::json()}});
  }
  if (!r.measure_error.empty()) errors.push_back("energy not measured: " + r.measure_error);
  const bool measured = r.measure_error.empty();
  j["gpus"] = gpus;
  j["cpus"] = cpus;
  j["gpu_energy_j"] = measured ? nlohmann::json(m.gpu_energy_j) : nlohmann::json();
  j["cpu_energy_j"] =
      measured && m.cpu_measured ? nlohmann::json(m.cpu_energy_j) : nlohmann::json();
  j["dram_energy_j"] =
      measured && m.cpu_measured ? nlohmann::json(m.dram_energy_j) : nlohmann::json();
  j["total_energy_j"] = measured ? nlohmann::json(m.total_energy_j()) : nlohmann::json();
  j["avg_power_w"] = AvgPower(m.total_energy_j(), m.duration_s);
  j["scope"] = r.scope;
  j["approximate"] = m.approximate();
  j["complete"] = r.complete();
  j["errors"] = errors;
  j["simulated"] = r.simulated;
  j["methodology"] = r.methodology;
  return j.dump() + "\n";
}

std::string FormatCsv(const MeasureReport& r) {
  std::string out = "device,index,name,energy_j,avg_power_w,duration_s,source,approximate\n";
  auto row = [&](const std::string& device, const std::string& index, const std::string& name,
                 double e, double d, const std::string& source, bool approximate) {
    out += device + "," + index + "," + name + "," + Printf("%.6f", e) + "," +
           Printf("%.4f", AvgPower(e, d)) + "," + Printf("%.6f", d) + "," + source + "," +
           (approximate ? "1" : "0") + "\n";
  };
  for (const DeviceRow& x : r.rows) {
    std::string name = x.name;
    for (char& c : name)
      if (c == ',' || c == '"' || c == '\n') c = ' ';
    // A failed GPU's row covers its first measured_s only.
    row(x.device, std::to_string(x.index), name, x.energy_j, x.measured_s,
        x.failed ? x.source + "-until-failure" : x.source, x.approximate);
  }
  row("total", "", r.scope, r.m.total_energy_j(), r.m.duration_s, r.complete() ? "" : "incomplete",
      r.m.approximate());
  return out;
}

// ---- Running the command ---------------------------------------------------------

// Opens the monitor, starts CMD inside the window and waits for it. Errors
// up to starting CMD throw (exit 2, CMD not run); from then on nothing may
// lose CMD's exit code: a failing measurement is reported in the result.
MeasureReport Measure(const MeasureFlags& f, monitor::TakenSignals& signals) {
  monitor::MonitorOptions options;
  if (f.gpus_option->count() > 0) options.gpus = ParseGpuList(f.gpus, "--gpus");
  options.cpu = f.cpu ? monitor::CpuMode::kRequired : monitor::CpuMode::kIfAvailable;
  options.rapl_root = RaplRootFromEnv();
  options.sampling_period_s = f.interval_ms * 1e-3;
  options.tolerate_gpu_failures = true;

  MeasureReport r;
  r.command = f.command;
  std::string nvml_note;
  std::unique_ptr<monitor::Monitor> monitor;  // after `signals`: its thread inherits the mask
  try {
    monitor = std::make_unique<monitor::Monitor>(options);
    r.gpus_measured = monitor->gpu_count() > 0;
  } catch (const gpu::NvmlUnavailableError& e) {
    if (!(f.cpu && !options.gpus)) {
      throw InputError(std::string(e.what()) +
                       "; to measure CPU and DRAM energy only, pass --cpu without --gpus");
    }
    options.gpus = std::vector<int>{};
    monitor = std::make_unique<monitor::Monitor>(options);
    nvml_note = " GPUs not measured: NVML is not available.";
  }
  r.scope = monitor->scope();
  r.methodology = monitor->methodology();
  if (r.gpus_measured) {
    r.methodology += " " + gpu::NvmlMethodology();
    r.simulated = gpu::Nvml().simulated;
  }
  r.methodology += nvml_note;
  r.methodology +=
      " Window: from just before CMD starts to just after it exits; counter edges aligned to "
      "counter updates and corrected with instant power.";

  const monitor::CommandRun run = monitor::RunInWindow(*monitor, f.command, signals);
  r.started = run.started;
  r.not_run = run.not_run;
  r.exit_code = run.exit_code;
  r.exit_note = run.exit_note;
  r.m = run.measurement;
  r.measure_error = run.measure_error;
  if (r.started && r.measure_error.empty()) r.rows = Rows(r.m, *monitor);
  return r;
}

}  // namespace

std::vector<int> ParseGpuList(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string entry =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int value = -1;
    const auto r = std::from_chars(entry.data(), entry.data() + entry.size(), value);
    if (entry.empty() || r.ec != std::errc() || r.ptr != entry.data() + entry.size() || value < 0) {
      throw InputError(flag +
                       " must be a comma list of GPU indices such as 0,1 (as CUDA "
                       "numbers the visible GPUs); got \"" +
                       text + "\"");
    }
    for (int seen : out) {
      if (seen == value) throw InputError(flag + " lists GPU " + entry + " twice");
    }
    out.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string RaplRootFromEnv() {
  const char* root = std::getenv(kRaplRootEnv);
  return root && *root ? std::string(root) : std::string(monitor::kDefaultRaplRoot);
}

MeasureSubcommand::MeasureSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "measure", "Run a command and report its GPU (and CPU/DRAM) energy, measured")),
      flags_(std::make_unique<MeasureFlags>()) {
  MeasureFlags* f = flags_.get();
  CLI::App* c = command();
  c->footer(kMeasureFooter);
  f->gpus_option =
      c->add_option("--gpus", f->gpus, "Visible GPU indices to measure (default: all visible)")
          ->type_name("0,1,...");
  c->add_flag("--cpu", f->cpu, "Require CPU package and DRAM energy (RAPL); fail if unreadable");
  c->add_option("--interval-ms", f->interval_ms,
                "Power sampling period for GPUs without an energy counter")
      ->capture_default_str()
      ->type_name("N");
  CLI::Option* csv = c->add_option("--csv", f->csv, "Also write per-device rows to F (atomically)")
                         ->type_name("F");
  CLI::Option* json =
      c->add_flag("--json", f->json, "Print one JSON object (last stdout line), not the report");
  csv->excludes(json);
  c->add_option("command", f->command, "The command to run and its arguments, after --")
      ->type_name("-- CMD ARGS...");
}

MeasureSubcommand::~MeasureSubcommand() = default;

// Outputs are checked before CMD starts: --csv is opened (its temporary
// created next to it) first, so an unwritable path never costs a run. After
// CMD started, the exit code is CMD's whatever fails: a GPU lost mid-run
// (reported, with what was measured until then), the whole measurement, or
// the --csv file at the end (its rows then go to stderr with the report).
int MeasureSubcommand::Run() const {
  const MeasureFlags& f = *flags_;
  if (f.command.empty()) {
    throw InputError("no command to measure; put it after --, e.g. joulepipe measure -- sleep 1");
  }
  if (f.interval_ms < 1) {
    throw InputError("--interval-ms must be >= 1 (got " + std::to_string(f.interval_ms) + ")");
  }
  std::optional<model::AtomicFile> csv;
  if (!f.csv.empty()) {
    try {
      csv.emplace(f.csv);
    } catch (const InputError& e) {
      throw InputError("--csv: " + std::string(e.what()) + "; the command was not run");
    }
  }
  // Taken, not handled: forwarded to CMD while it runs, dropped afterwards.
  // SIGCHLD wakes the wait; SIGTTOU is blocked so that joulepipe may take the
  // terminal back from the background.
  const std::unique_ptr<monitor::TakenSignals> signals = monitor::TakeSignalsForCommand();
  const MeasureReport r = Measure(f, *signals);
  std::fflush(stdout);
  if (!r.started) {
    std::fprintf(stderr, "joulepipe: error: %s\n", r.not_run.c_str());
    return r.exit_code;
  }
  if (f.json) {  // the text report says it; JSON readers may not look at "errors"
    for (const DeviceRow& row : r.rows) {
      if (row.failed) {
        std::fprintf(stderr, "joulepipe: warning: %s\n", FailureText(row).c_str());
      }
    }
    if (!r.measure_error.empty()) {
      std::fprintf(stderr, "joulepipe: warning: energy not measured: %s\n",
                   r.measure_error.c_str());
    }
  }
  if (csv) {
    const std::string rows = FormatCsv(r);
    try {
      csv->Commit(rows);
    } catch (const InputError& e) {
      std::fprintf(stderr,
                   "joulepipe: error: --csv: %s; the report and the rows follow on stderr, "
                   "the exit code is the command's\n",
                   e.what());
      std::fputs((FormatText(r) + rows).c_str(), stderr);
      return r.exit_code;
    }
  }
  if (f.json) {
    std::fputs(FormatJson(r).c_str(), stdout);
    std::fflush(stdout);
  } else {
    std::fputs(FormatText(r).c_str(), stderr);
  }
  return r.exit_code;
}

}  // namespace joulepipe::cli
