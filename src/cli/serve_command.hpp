// `joulepipe serve [--host 127.0.0.1] [--port 8470] [--db state.sqlite]
//                  [--token-file F] [--evict-after S] [--max-connections N]
//                  [--profile F --microbatches M [--schedule S] [--chunks V]
//                   [--p-block W]]`
//
// Runs the coordinator (serve::Server, docs/coordination.md) in the
// foreground until SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2
// (those not ignored at start; signals.hpp TakenSignals), then stops it
// cleanly (parked requests get 503, the state is on disk already) and
// exits 0. Prints
//   joulepipe serve: listening on http://127.0.0.1:8470 (db state.sqlite, N jobs restored)
// once bound (with --port 0, the port the OS chose), then one line per job
// event on stdout ("<UTC time> job <id>: ..."), flushed per line.
//
// --profile and the schedule flags are the defaults for jobs Zeus's client
// registers (POST /register_job carries only the parallel degrees). The
// token file holds the bearer token (surrounding whitespace ignored); a file
// other users can read is warned about. Exit 2 for a bad flag, an unusable
// database or a port in use.
#pragma once

#include <memory>

#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

struct ServeFlags;
class ServeSubcommand : public Subcommand {
 public:
  explicit ServeSubcommand(CLI::App* app);
  ~ServeSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<ServeFlags> flags_;
};

}  // namespace joulepipe::cli
