// `joulepipe calibrate-wait --out wait.json [--gpu N] [--points N | --clocks
// F,F,...] [--dwell-s S] [--settle-s S] [--daemon SOCKET] [--force]
// [-- COMMAND ...]`
//
// Measures the GPU's wait model (monitor/wait_calibration.hpp): its power at
// each locked SM clock while it waits, and the clock-switch latency; writes
// the JSON that `plan --wait-model` and `evaluate --wait-model` read
// (model/wait_model.hpp). COMMAND, if given, is started first in its own
// process group to keep the GPU waiting (e.g. a spin-wait kernel) and is
// stopped (SIGTERM, then SIGKILL after 5 s) when the measurement ends;
// without it the GPU is measured as it is. Clocks go back to their defaults
// on every way out, Ctrl-C included. An existing --out is replaced only with
// --force; nothing is written unless every clock was measured.
#pragma once

#include <memory>

#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

struct CalibrateWaitFlags;
class CalibrateWaitSubcommand : public Subcommand {
 public:
  explicit CalibrateWaitSubcommand(CLI::App* app);
  ~CalibrateWaitSubcommand() override;

  int Run() const override;

 private:
  std::unique_ptr<CalibrateWaitFlags> flags_;
};

}  // namespace joulepipe::cli
