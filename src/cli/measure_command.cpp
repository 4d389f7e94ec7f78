// `joulepipe measure`: run a command inside one tick-aligned measurement
// window and report what it drew, with the methodology.
#include "measure_command.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"
#include "output_dir.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/monitor.hpp"

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

constexpr int kExitCannotRun = 127;

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
    "Exit code: CMD's (128+N if signal N killed it; 127 if it cannot be run);\n"
    "2 for bad flags or no NVML.\n"
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
};

struct MeasureReport {
  std::vector<std::string> command;
  int exit_code = 0;
  std::string exit_note;  // "killed by signal 9" etc.
  monitor::Measurement m;
  std::vector<DeviceRow> rows;  // without the total
  std::string scope;
  std::string methodology;  // monitor's + NVML's
  bool simulated = false;
  bool gpus_measured = false;
};

std::string CommandLine(const std::vector<std::string>& command) {
  std::string out;
  for (const std::string& word : command) {
    if (!out.empty()) out += ' ';
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_./=:,+@%") == std::string::npos;
    out += plain ? word : "'" + word + "'";
  }
  return out;
}

double AvgPower(double energy_j, double duration_s) {
  return duration_s > 0 ? energy_j / duration_s : 0;
}

std::vector<DeviceRow> Rows(const monitor::Measurement& m, const monitor::Monitor& monitor) {
  std::vector<DeviceRow> rows;
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    const monitor::GpuEnergy& g = m.gpus[i];
    rows.push_back(DeviceRow{"gpu", g.index, monitor.gpu_name(static_cast<int>(i)), g.energy_j,
                             monitor::EnergySourceName(g.source), g.approximate, g.aligned});
  }
  for (const monitor::CpuEnergy& c : m.cpus) {
    rows.push_back(DeviceRow{"cpu-package", c.socket, "", c.package_j, "rapl", false, false});
    if (c.has_dram) rows.push_back(DeviceRow{"dram", c.socket, "", c.dram_j, "rapl", false, false});
  }
  return rows;
}

std::string FormatText(const MeasureReport& r) {
  const monitor::Measurement& m = r.m;
  std::string out = "joulepipe measure: " + CommandLine(r.command) + "\n";
  out += Printf("  exit code %d%s, duration %.3f s\n", r.exit_code,
                r.exit_note.empty() ? "" : (" (" + r.exit_note + ")").c_str(), m.duration_s);
  for (const DeviceRow& row : r.rows) {
    std::string label;
    if (row.device == "gpu") {
      label = Printf("GPU %d", row.index) + (row.name.empty() ? "" : " (" + row.name + ")");
    } else {
      label = Printf("%s socket %d", row.device == "dram" ? "DRAM" : "CPU package", row.index);
    }
    std::string how = row.source;
    if (row.device == "gpu" && row.source == "counter")
      how += row.aligned ? ", aligned edges" : ", unaligned edges";
    if (row.approximate) how += ", approximate";
    out += Printf("  %-34s %12.3f J  %9.2f W  [%s]\n", label.c_str(), row.energy_j,
                  AvgPower(row.energy_j, m.duration_s), how.c_str());
  }
  out += Printf("  %-34s %12.3f J  %9.2f W\n", ("Total (" + r.scope + ")").c_str(),
                m.total_energy_j(), AvgPower(m.total_energy_j(), m.duration_s));
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
  for (const DeviceRow& row : r.rows) {
    if (row.device != "gpu") continue;
    gpus.push_back({{"index", row.index},
                    {"name", row.name},
                    {"energy_j", row.energy_j},
                    {"avg_power_w", AvgPower(row.energy_j, m.duration_s)},
                    {"source", row.source},
                    {"aligned", row.aligned},
                    {"approximate", row.approximate}});
  }
  for (const monitor::CpuEnergy& c : m.cpus) {
    cpus.push_back({{"socket", c.socket},
                    {"package_j", c.package_j},
                    {"dram_j", c.has_dram ? nlohmann::json(c.dram_j) : nlohmann::json()}});
  }
  j["gpus"] = gpus;
  j["cpus"] = cpus;
  j["gpu_energy_j"] = m.gpu_energy_j;
  j["cpu_energy_j"] = m.cpu_measured ? nlohmann::json(m.cpu_energy_j) : nlohmann::json();
  j["dram_energy_j"] = m.cpu_measured ? nlohmann::json(m.dram_energy_j) : nlohmann::json();
  j["total_energy_j"] = m.total_energy_j();
  j["avg_power_w"] = AvgPower(m.total_energy_j(), m.duration_s);
  j["scope"] = r.scope;
  j["approximate"] = m.approximate();
  j["simulated"] = r.simulated;
  j["methodology"] = r.methodology;
  return j.dump() + "\n";
}

std::string FormatCsv(const MeasureReport& r) {
  const double d = r.m.duration_s;
  std::string out = "device,index,name,energy_j,avg_power_w,duration_s,source,approximate\n";
  auto row = [&](const std::string& device, const std::string& index, const std::string& name,
                 double e, const std::string& source, bool approximate) {
    out += device + "," + index + "," + name + "," + Printf("%.6f", e) + "," +
           Printf("%.4f", AvgPower(e, d)) + "," + Printf("%.6f", d) + "," + source + "," +
           (approximate ? "1" : "0") + "\n";
  };
  for (const DeviceRow& x : r.rows) {
    std::string name = x.name;
    for (char& c : name)
      if (c == ',' || c == '"' || c == '\n') c = ' ';
    row(x.device, std::to_string(x.index), name, x.energy_j, x.source, x.approximate);
  }
  row("total", "", r.scope, r.m.total_energy_j(), "", r.m.approximate());
  return out;
}

// Blocks SIGINT, SIGTERM and SIGCHLD in the calling thread (and the threads
// it starts from now on) for its lifetime, so that Run can take them with
// sigtimedwait; restores the previous mask.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~BlockedSignals() {
    // Drop what is still pending (e.g. SIGCHLD) before unblocking.
    const timespec zero{0, 0};
    while (sigtimedwait(&set_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  const sigset_t& set() const { return set_; }
  const sigset_t& old() const { return old_; }

 private:
  sigset_t set_;
  sigset_t old_;
};

// Starts `command` (PATH lookup) with the signal mask joulepipe had before
// BlockedSignals and default dispositions. Returns its pid, or throws
// InputError-like failures as (errno, message) via *error.
pid_t Spawn(const std::vector<std::string>& command, const sigset_t& mask, int* error) {
  std::vector<char*> argv;
  for (const std::string& word : command) argv.push_back(const_cast<char*>(word.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGCHLD);
  posix_spawnattr_setsigmask(&attr, &mask);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  *error = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  return *error == 0 ? pid : -1;
}

// Waits for `pid`, forwarding SIGINT/SIGTERM that a process sent to us (a
// terminal's signals, si_code SI_KERNEL, already reached the child's
// process group). Returns the wait status.
int WaitForwarding(pid_t pid, const BlockedSignals& blocked) {
  const timespec tick{0, 50 * 1000 * 1000};
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) throw std::runtime_error("waitpid failed");
    siginfo_t info;
    const int sig = sigtimedwait(&blocked.set(), &info, &tick);
    if ((sig == SIGINT || sig == SIGTERM) && info.si_code != SI_KERNEL) kill(pid, sig);
  }
}

MeasureReport Measure(const MeasureFlags& f) {
  if (f.command.empty()) {
    throw InputError("no command to measure; put it after --, e.g. joulepipe measure -- sleep 1");
  }
  if (f.interval_ms < 1) {
    throw InputError("--interval-ms must be >= 1 (got " + std::to_string(f.interval_ms) + ")");
  }
  monitor::MonitorOptions options;
  if (f.gpus_option->count() > 0) options.gpus = ParseGpuList(f.gpus, "--gpus");
  options.cpu = f.cpu ? monitor::CpuMode::kRequired : monitor::CpuMode::kIfAvailable;
  options.rapl_root = RaplRootFromEnv();
  options.sampling_period_s = f.interval_ms * 1e-3;

  MeasureReport r;
  r.command = f.command;
  std::string nvml_note;
  BlockedSignals blocked;  // before Monitor starts its sampler thread
  std::unique_ptr<monitor::Monitor> monitor;
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

  monitor->Begin("command", monitor::Edges::kAligned);
  int error = 0;
  const pid_t pid = Spawn(f.command, blocked.old(), &error);
  if (pid < 0) {
    monitor->End("command");
    std::fflush(stdout);
    std::fprintf(stderr, "joulepipe: error: cannot run %s: %s\n", f.command[0].c_str(),
                 std::strerror(error));
    r.exit_code = -kExitCannotRun;
    return r;
  }
  const int status = WaitForwarding(pid, blocked);
  r.m = monitor->End("command");
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.exit_code = 128 + WTERMSIG(status);
    r.exit_note = "killed by signal " + std::to_string(WTERMSIG(status));
  } else {
    r.exit_code = kExitInternal;
  }
  r.rows = Rows(r.m, *monitor);
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

int MeasureSubcommand::Run() const {
  const MeasureReport r = Measure(*flags_);
  if (r.exit_code == -kExitCannotRun) return kExitCannotRun;
  std::fflush(stdout);
  if (!flags_->csv.empty()) WriteFileAtomically(flags_->csv, FormatCsv(r));
  if (flags_->json) {
    std::fputs(FormatJson(r).c_str(), stdout);
    std::fflush(stdout);
  } else {
    std::fputs(FormatText(r).c_str(), stderr);
  }
  return r.exit_code;
}

}  // namespace joulepipe::cli
