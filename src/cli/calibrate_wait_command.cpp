// `joulepipe calibrate-wait`: measure a GPU's power while it waits at each
// locked clock and its clock-switch latency, for plan --wait-model.
#include "calibrate_wait_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/output_files.hpp"
#include "joulepipe/monitor/background_command.hpp"
#include "joulepipe/monitor/wait_calibration.hpp"
#include "measure_command.hpp"
#include "output_dir.hpp"
#include "signals.hpp"

namespace joulepipe::cli {

using model::InputError;

struct CalibrateWaitFlags {
  std::string out;
  int gpu = 0;
  int points = 6;
  std::string clocks;
  CLI::Option* clocks_option = nullptr;
  double dwell_s = 2.0;
  double settle_s = 0.5;
  double warmup_s = -1;  // default: 10 s with a command, 0 without
  std::string daemon;
  bool force = false;
  std::vector<std::string> command;
};

namespace {

constexpr char kFooter[] =
    "\nFor each clock, highest first, the clocks are locked there (entered from the\n"
    "highest clock, as a wait is entered from compute), the switch is timed until\n"
    "NVML reports the new SM clock, and after --settle-s the mean power over\n"
    "--dwell-s is measured with the energy counter. The switch latency written is\n"
    "the larger of the median down- and up-switch. Needs permission to lock clocks:\n"
    "root, or --daemon SOCKET (joulepiped, docs/daemon.md). Clocks are reset on\n"
    "every way out, Ctrl-C included.\n"
    "\n"
    "The GPU must be waiting the way it waits in training while this runs. Give a\n"
    "command after -- that keeps it so (it is started first, in its own process\n"
    "group, given --warmup-s, and stopped at the end), e.g. a spin-wait kernel:\n"
    "  joulepipe calibrate-wait --gpu 0 --out wait.json -- \\\n"
    "    python3 -m joulepipe.wait_load --device 0\n"
    "Without a command the GPU is measured as it is (the file says so).\n"
    "\n"
    "Then plan with it:\n"
    "  joulepipe plan --profile P.csv --schedule 1f1b --stages S --microbatches M \\\n"
    "    --wait-model wait.json --out plans/\n"
    "An existing --out is replaced only with --force; nothing is written unless\n"
    "every clock was measured.";

std::vector<int> ParseClocks(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = text.find(',', at);
    const std::string word = text.substr(at, comma == std::string::npos ? comma : comma - at);
    size_t used = 0;
    int mhz = 0;
    try {
      mhz = std::stoi(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != word.size() || mhz <= 0)
      throw InputError(
          "--clocks must be SM clocks in MHz separated by commas (e.g. "
          "1410,1005,600,210), got '" +
          word + "'");
    out.push_back(mhz);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// The load command (monitor::BackgroundCommand: its own process group,
// stopped on every way out), started with the flag's words.
std::unique_ptr<monitor::BackgroundCommand> StartLoad(const std::vector<std::string>& command) {
  try {
    return std::make_unique<monitor::BackgroundCommand>(command);
  } catch (const std::system_error& e) {
    throw InputError("cannot start the wait-load command '" + command[0] +
                     "': " + std::strerror(e.code().value()));
  }
}

// Throws if the load command has ended: the GPU is no longer kept waiting.
void CheckLoadRunning(monitor::BackgroundCommand& load) {
  const std::optional<monitor::BackgroundCommand::Exit> exit = load.Ended();
  if (!exit) return;
  const std::string how = exit->signaled ? "was killed by " + SignalName(exit->signal)
                                         : "exited with code " + std::to_string(exit->code);
  throw InputError("the wait-load command " + how +
                   " during the calibration; it must keep the GPU waiting until it is "
                   "stopped (nothing was written)");
}

int RunCalibrateWait(const CalibrateWaitFlags& f) {
  if (f.out.empty()) throw InputError("--out is required (the wait-model JSON to write)");
  RefuseToReplace("--out", f.out, f.force);
  if (!(f.dwell_s > 0 && f.dwell_s <= 600))
    throw InputError("--dwell-s must be in (0, 600] seconds");
  if (!(f.settle_s >= 0 && f.settle_s <= 60))
    throw InputError("--settle-s must be in [0, 60] seconds");
  const double warmup = f.warmup_s >= 0 ? f.warmup_s : (f.command.empty() ? 0 : 10);
  if (warmup > 600) throw InputError("--warmup-s must be in [0, 600] seconds");

  const gpu::DeviceList visible = gpu::ListVisibleDevices();
  if (f.gpu < 0 || f.gpu >= static_cast<int>(visible.devices.size()))
    throw InputError("--gpu " + std::to_string(f.gpu) + " is not visible (visible: 0.." +
                     std::to_string(static_cast<int>(visible.devices.size()) - 1) +
                     "; check CUDA_VISIBLE_DEVICES)");
  const gpu::Device& device = visible.devices[static_cast<size_t>(f.gpu)];
  std::unique_ptr<gpu::ClockControl> control =
      f.daemon.empty() ? gpu::MakeNvmlClockControl() : gpu::MakeDaemonClockControl(f.daemon);

  monitor::WaitCalibrationOptions o;
  o.nvml_index = static_cast<int>(device.nvml_index());
  const std::vector<int> supported = control->SupportedSmClocks(o.nvml_index);
  o.clocks_mhz = f.clocks_option->count() > 0 ? ParseClocks(f.clocks)
                                              : monitor::SpreadClocks(supported, f.points);
  o.dwell_s = f.dwell_s;
  o.settle_s = f.settle_s;
  o.load = f.command.empty() ? "as found (no load started by calibrate-wait)"
                             : "command: " + CommandLine(f.command);
  o.cancel = InterruptFlag();
  o.progress = [](const std::string& line) {
    std::fprintf(stdout, "  %s\n", line.c_str());
    std::fflush(stdout);
  };

  const CancellableScope cancellable;
  std::fprintf(stdout, "calibrate-wait: GPU %d (%s, NVML %d) through %s; %zu clocks, %.1f s each\n",
               f.gpu, device.name().c_str(), o.nvml_index, control->Describe().c_str(),
               o.clocks_mhz.size(), f.settle_s + f.dwell_s);
  std::fprintf(stdout, "  load: %s\n", o.load.c_str());
  std::fflush(stdout);
  std::unique_ptr<monitor::BackgroundCommand> load;
  if (!f.command.empty()) load = StartLoad(f.command);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(warmup);
  while (std::chrono::steady_clock::now() < end) {
    if (InterruptFlag()->load()) throw model::Cancelled("calibrate-wait: interrupted");
    if (load) CheckLoadRunning(*load);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  monitor::WaitCalibration c;
  try {
    c = monitor::CalibrateWait(*control, o);
  } catch (const gpu::NvmlPermissionError& e) {
    throw InputError(std::string(e.what()) +
                     "; calibrate-wait --daemon SOCKET locks clocks through joulepiped");
  }
  if (load) CheckLoadRunning(*load);
  load.reset();
  control->Restore();

  model::WaitModel m = c.model;
  m.source = f.out;
  model::WriteFileAtomically(f.out, model::WaitModelToJson(m), InterruptFlag());
  std::string text = Printf("  switch latency %.2f ms (median of %zu down, %zu up)\n",
                            m.switch_latency_s * 1e3, c.down_s.size(), c.up_s.size());
  text += "wait model  " + m.Describe() + "\n";
  if (m.wait_mhz() == 0) {
    text +=
        "  no clock draws 1 % less than the highest while waiting (less is within what the "
        "measurement resolves): lowering saves nothing here\n";
  } else {
    text += Printf("  waiting at %d MHz saves %.2f W per GPU while lowered (%.1f %% of %.2f W)\n",
                   m.wait_mhz(), m.saving_w(), 100.0 * m.saving_w() / m.points.front().blocked_w,
                   m.points.front().blocked_w);
  }
  text += "wrote " + f.out + "; use it with: joulepipe plan ... --wait-model " + f.out + "\n";
  if (gpu::Nvml().simulated)
    text += "(simulated NVML: these figures are simulated, not measured)\n";
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace

CalibrateWaitSubcommand::CalibrateWaitSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "calibrate-wait",
          "Measure a GPU's power while waiting at each clock, for plan --wait-model")),
      flags_(std::make_unique<CalibrateWaitFlags>()) {
  CalibrateWaitFlags* f = flags_.get();
  CLI::App* c = command();
  c->footer(kFooter);
  c->add_option("--out", f->out, "The wait-model JSON to write")->type_name("FILE");
  c->add_option("--gpu", f->gpu, "Visible GPU index to calibrate")->capture_default_str();
  c->add_option("--points", f->points,
                "Clocks to measure, spread from the highest to the lowest supported")
      ->capture_default_str();
  f->clocks_option =
      c->add_option("--clocks", f->clocks, "The clocks to measure instead (MHz, supported ones)")
          ->type_name("F,F,...");
  c->add_option("--dwell-s", f->dwell_s, "Measured window per clock")->capture_default_str();
  c->add_option("--settle-s", f->settle_s, "Wait after each switch before measuring")
      ->capture_default_str();
  c->add_option("--warmup-s", f->warmup_s,
                "Wait after starting the command, before the first clock (default: 10 with a "
                "command, 0 without)");
  c->add_option("--daemon", f->daemon,
                "Lock clocks through joulepiped at this socket (default: NVML directly, needs "
                "root)")
      ->type_name("SOCKET");
  c->add_flag("--force", f->force, "Replace an existing --out");
  c->add_option("command", f->command,
                "A command that keeps the GPU waiting while it is measured, after --");
}

CalibrateWaitSubcommand::~CalibrateWaitSubcommand() = default;

int CalibrateWaitSubcommand::Run() const {
  return RunCalibrateWait(*flags_);
}

}  // namespace joulepipe::cli
