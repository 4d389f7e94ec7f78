// Entry point of the `joulepipe` command; see src/cli/app.cpp. The interrupt
// handlers (src/cli/signals.hpp) cover every subcommand; a command stopped by
// a signal ends by that signal here, after its temporaries are gone.
#include "app.hpp"
#include "signals.hpp"

int main(int argc, char** argv) {
  joulepipe::cli::InstallInterruptHandlers();
  return joulepipe::cli::FinishProcess(joulepipe::cli::RunApp(argc, argv));
}
