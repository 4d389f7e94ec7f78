// `joulepipe power [--gpus 0,1] [--interval-ms N]`
//
// Streams GPU power until SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 or
// SIGUSR2 (those not ignored at start; signals.hpp TakenSignals): a header
// line, then one line per interval on stdout,
//   time_s  GPU0_W  GPU1_W  total_W
// (instant power, as sampled by the monitor's sampler thread), flushed per
// line. On the signal it prints a summary (duration; per GPU mean power =
// energy / duration, max sampled power, energy from the energy counter
// where the GPU has one, else the sampled integral; total) and the
// methodology, and exits 0. A GPU that fails meanwhile (lost) is reported
// as failed with what was measured until then, not as an error. GPU energy
// only. Exit 2 without NVML or for a bad flag.
#pragma once

#include <memory>

#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

struct PowerFlags;
class PowerSubcommand : public Subcommand {
 public:
  explicit PowerSubcommand(CLI::App* app);
  ~PowerSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<PowerFlags> flags_;
};

}  // namespace joulepipe::cli
