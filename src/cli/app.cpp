// The `joulepipe` command line: the App (CLI11) with its help text, the
// subcommands registered in the order `--help` lists them, dispatch to the
// one the user chose, and the one place that turns exceptions into messages
// and exit codes.
#include "app.hpp"

#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "demo_command.hpp"
#include "evaluate_command.hpp"
#include "flag_names.hpp"
#include "gpus_command.hpp"
#include "joulepipe/model/error.hpp"
#include "measure_command.hpp"
#include "plan_command.hpp"
#include "power_command.hpp"
#include "profile_command.hpp"
#include "simulate_command.hpp"
#include "subcommand.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;

// ---- Help text -----------------------------------------------------------------

constexpr char kAppDescription[] =
    "joulepipe cuts the GPU energy of pipeline-parallel training without slowing it:\n"
    "it measures energy, plans one SM clock per forward/backward (instructions off\n"
    "the critical path run slower instead of waiting) and simulates whole jobs.\n"
    "Every figure says whether it was measured (NVML, RAPL), computed from a\n"
    "measured profile, or simulated.";

constexpr char kAppFooter[] =
    "\nStart with `joulepipe demo` (no input, no GPU), then:\n"
    "  joulepipe measure --json -- python train.py     # a baseline: energy of a run\n"
    "  joulepipe profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 \\\n"
    "                    --out prof.csv                # or a measured profile\n"
    "  joulepipe plan --profile prof.csv --schedule 1f1b --stages 8 --microbatches 48 \\\n"
    "                 --p-block 83.64 --out plan-out\n"
    "  joulepipe evaluate --profile prof.csv --plan plan-out/chosen.json --p-block 83.64\n"
    "  joulepipe simulate --profile prof.csv --p-block 83.64 --pipelines 16 --stages 8 \\\n"
    "                     --microbatches 48 --straggler-slowdown 1.2\n"
    "\n"
    "Profile CSV (Perseus/Zeus format): a header with at least the columns\n"
    "  stage,instruction,frequency,time,energy\n"
    "and one row per (stage, instruction, frequency): stage 0..S-1, instruction\n"
    "forward|backward, frequency = SM clock in MHz, time (s) and energy (J) of one\n"
    "instruction at that clock. Extra columns (rank, dp_rank, ...) are ignored.\n"
    "\n"
    "Without a GPU, gpus/measure/power run against the simulated driver:\n"
    "  export JOULEPIPE_NVML_LIBRARY=build/sim-nvml/libnvidia-ml.so.1\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input, usage or environment (no NVML, ...), 1 internal\n"
    "error; `measure` passes its command's exit code through.\n"
    "Run `joulepipe <command> --help` for a command; docs/cli.md has the details.";

int Fail(int code, const char* kind, const char* message) {
  std::fflush(stdout);
  std::fprintf(stderr, "joulepipe: %s: %s\n", kind, message);
  return code;
}

}  // namespace

int RunApp(int argc, char** argv) {
  CLI::App app{kAppDescription, "joulepipe"};
  app.footer(kAppFooter);
  app.set_version_flag("--version", std::string(kVersion),
                       "Print the version (" + std::string(kVersion) + ") and exit");
  app.require_subcommand(1);
  app.get_formatter()->column_width(34);

  // Each subcommand registers its own flags and help (<name>_command.hpp).
  std::vector<std::unique_ptr<Subcommand>> subcommands;
  subcommands.push_back(std::make_unique<DemoSubcommand>(&app));
  subcommands.push_back(std::make_unique<PlanSubcommand>(&app));
  subcommands.push_back(std::make_unique<EvaluateSubcommand>(&app));
  subcommands.push_back(std::make_unique<SimulateSubcommand>(&app));
  subcommands.push_back(std::make_unique<ProfileSubcommand>(&app));
  subcommands.push_back(std::make_unique<GpusSubcommand>(&app));
  subcommands.push_back(std::make_unique<MeasureSubcommand>(&app));
  subcommands.push_back(std::make_unique<PowerSubcommand>(&app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0.
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  try {
    for (const std::unique_ptr<Subcommand>& subcommand : subcommands) {
      if (subcommand->parsed()) return subcommand->Run();
    }
    return Fail(kExitInternal, "internal error", "no subcommand selected");
  } catch (const InputError& e) {
    // Library messages name fields ("Spec::stages"); users know flags.
    return Fail(kExitUsage, "error", WithFlagNames(e.what()).c_str());
  } catch (const std::bad_alloc&) {
    return Fail(kExitInternal, "error", "out of memory; try a coarser --resolution-ms");
  } catch (const std::exception& e) {
    return Fail(kExitInternal, "internal error", e.what());
  }
}

}  // namespace joulepipe::cli
