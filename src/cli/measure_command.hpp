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
// SIGINT/SIGTERM sent to joulepipe by a process (kill, a batch scheduler)
// are forwarded to CMD; a terminal's Ctrl-C reaches CMD directly (same
// process group) and is not sent twice. The exit code is CMD's, 128+N if a
// signal N killed it, 127 if CMD cannot be found or run, 2 for bad flags or
// no usable NVML (unless only --cpu is asked for), 1 for internal errors.
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
