// `joulepipe measure [--gpus 0,1] [--cpu] [--interval-ms N] [--csv F | --json]
//                    -- CMD ARGS...`
//
// Runs CMD (PATH lookup) inside one tick-aligned measurement window
// (monitor::Edges::kAligned) and reports its duration and energy per GPU,
// per CPU socket (package, DRAM) and in total, with the methodology: counter
// or sampling per GPU, GPU-only or GPU+CPU+DRAM, measured via NVML or the
// simulated NVML library. docs/measure.md has the method and its limits.
//
// CMD's stdin, stdout and stderr are joulepipe's. The report goes to stderr;
// --json prints one JSON object (schema in docs/measure.md) as the last line
// of stdout instead; --csv F also writes per-device rows to F atomically.
// F is prepared (parent directories and a temporary next to it created)
// before CMD starts, so an unwritable F fails (exit 2) without running CMD;
// should writing F still fail at the end, the report and the rows go to
// stderr and the exit code is still CMD's.
//
// Process groups and signals: CMD runs in a process group of its own. At a
// terminal, with joulepipe in the foreground, that group gets the terminal
// for the run (Ctrl-C, Ctrl-Z and terminal reads reach CMD as without
// joulepipe; a stopped CMD stops joulepipe too, so the shell's fg/bg work)
// and joulepipe takes it back at the end. SIGHUP, SIGINT, SIGQUIT, SIGTERM,
// SIGUSR1 and SIGUSR2 sent to joulepipe (kill, a batch scheduler, a closing
// terminal) are forwarded to CMD's whole group (kill(-pgid, sig)), then
// joulepipe reports when CMD ends; signals ignored when joulepipe started
// (nohup) stay ignored and are not forwarded. A stop signal already pending
// before CMD starts means CMD is not started (exit 128+N).
//
// The window ends within about a millisecond of CMD's exit: joulepipe waits
// on a pidfd (pidfd_open), or on SIGCHLD where the kernel has none.
//
// Exit code: CMD's, 128+N if a signal N killed it, 127 if CMD cannot be
// found or run, also when a GPU fails mid-run (the report then marks it
// failed, with its energy up to its last good reading and NVML's message)
// or the measurement fails as a whole (the report says so); 2 for bad
// flags, an unwritable --csv or no usable NVML (unless only --cpu is asked
// for), 1 for internal errors.
//
// Environment: JOULEPIPE_NVML_LIBRARY (gpu/nvml.hpp), JOULEPIPE_RAPL_ROOT
// (the powercap root, default /sys/class/powercap; tests use a fake tree).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

inline constexpr char kRaplRootEnv[] = "JOULEPIPE_RAPL_ROOT";

// "0,1,3" -> {0, 1, 3}. Throws model::InputError naming `flag` for anything
// else (empty entries, non-numbers, negative numbers, duplicates).
std::vector<int> ParseGpuList(const std::string& text, const std::string& flag);

// $JOULEPIPE_RAPL_ROOT if set and non-empty, else monitor::kDefaultRaplRoot.
std::string RaplRootFromEnv();

struct MeasureFlags;
class MeasureSubcommand : public Subcommand {
 public:
  explicit MeasureSubcommand(CLI::App* app);
  ~MeasureSubcommand() override;

  int Run() const override;  // the exit code (CMD's, see above)

 private:
  std::unique_ptr<MeasureFlags> flags_;
};

}  // namespace joulepipe::cli
