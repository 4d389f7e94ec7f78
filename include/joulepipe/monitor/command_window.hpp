// Running a command inside one measurement window, as `joulepipe measure`
// and the Python package (joulepipe.measure_command) both do: the command
// runs in its own process group (at a terminal, in the foreground, with the
// terminal handed over and given back); the signals the caller takes
// (TakenSignals) are forwarded to that group; the command's end is seen
// through a pidfd within a millisecond; its exit code is kept whatever
// happens to the measurement.
//
//   auto signals = monitor::TakeSignalsForCommand();  // before the Monitor
//   monitor::Monitor meter(options);                   // its thread inherits the mask
//   monitor::CommandRun run = monitor::RunInWindow(meter, {"python", "train.py"}, *signals);
//   return run.exit_code;
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/monitor/taken_signals.hpp"

namespace joulepipe::monitor {

// What a command that cannot be started exits with (as a shell's 127).
inline constexpr int kExitCannotRun = 127;

struct CommandRun {
  bool started = false;   // the command ran (else not_run says why)
  std::string not_run;    // "cannot run x: No such file or directory", "interrupted (SIGTERM) ..."
  int exit_code = 0;      // the command's; 128 + N if signal N killed it; kExitCannotRun
  std::string exit_note;  // "killed by SIGKILL"
  Measurement measurement;    // the window "command"; duration_s set even when measure_error is
  std::string measure_error;  // the window failed (not a GPU: those are tolerated per GPU)
};

// Takes the signals a supervisor forwards (TakenSignals with SIGCHLD and
// SIGTTOU also blocked) and sets SIGCHLD to its default action. Call it
// before creating the Monitor, so that its thread inherits the mask; keep
// it alive until RunInWindow returns.
std::unique_ptr<TakenSignals> TakeSignalsForCommand();

// Runs `command` (PATH lookup) between Begin("command", kAligned) and
// End("command") of `monitor`, forwarding the signals `signals` takes to
// the command's process group meanwhile. A stop signal already pending
// means the command is not run (exit code 128 + N). Never throws once the
// command has started; throws std::invalid_argument for an empty command.
CommandRun RunInWindow(Monitor& monitor, const std::vector<std::string>& command,
                       TakenSignals& signals);

}  // namespace joulepipe::monitor
