// The `joulepipe` command line: the App (CLI11) with its help text, the
// subcommands registered in the order `--help` lists them, dispatch to the
// one the user chose, and the one place that turns exceptions into messages
// and exit codes.
#include "app.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "calibrate_wait_command.hpp"
#include "demo_command.hpp"
#include "evaluate_command.hpp"
#include "flag_names.hpp"
#include "gpus_command.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/number_form.hpp"
#include "measure_command.hpp"
#include "plan_command.hpp"
#include "power_command.hpp"
#include "profile_command.hpp"
#include "report_command.hpp"
#include "serve_command.hpp"
#include "signals.hpp"
#include "simulate_command.hpp"
#include "site_command.hpp"
#include "subcommand.hpp"
#include "tune_command.hpp"

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

// ---- Usage errors in plain words -------------------------------------------------

std::vector<CLI::App*> Commands(CLI::App* app) {
  return app->get_subcommands([](CLI::App*) { return true; });
}

// "demo, plan, evaluate, ...": the commands in --help's order.
std::string CommandNames(CLI::App* app) {
  std::string names;
  for (CLI::App* command : Commands(app)) {
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  return names;
}

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Every option of every command that takes a value refuses an empty one:
// `--p-block ""` would read as 0 W, `--slowdown ""` as 0, `--out ""` as "no
// output". One check for all, attached after every command has registered
// its flags, so a new flag gets it too. Positional arguments (the command
// `measure` runs) may be empty.
void RefuseEmptyValues(CLI::App* app) {
  for (CLI::App* command : Commands(app)) {
    for (CLI::Option* option : command->get_options()) {
      if (!option->nonpositional() || option->get_items_expected_min() < 1) continue;
      const std::string name = option->get_name();
      std::string fix = "give " + option->get_type_name();
      if (!option->get_required()) fix += ", or leave " + name + " out";
      option->check(CLI::Validator(
          [fix](std::string& value) {
            return value.empty() ? "the value is empty; " + fix : std::string();
          },
          /*validator_desc=*/"", "not empty"));
    }
  }
}

// Whether an option's values are numbers, by its type name: names of text
// (files, ids, lists of words, choices) are FILE, DIR, ID, SOCKET, ADDR,
// LIST, TEXT or contain '.' or '{' (P.csv, {gpipe,1f1b}); every other name
// (N, MS, WATTS, CLI11's INT and FLOAT, lists such as 0,1,...) takes numbers.
bool TakesNumbers(const CLI::Option& option) {
  const std::string type = option.get_type_name();
  for (const char* text : {"FILE", "DIR", "ID", "SOCKET", "ADDR", "LIST", "TEXT"}) {
    if (type == text) return false;
  }
  return type.find_first_of(".{") == std::string::npos;
}

// Every option of every command that takes numbers refuses the forms
// model::NonDecimalProblem names (one number form: decimal), attached like
// RefuseEmptyValues; each comma-separated element of a list is checked.
void RefuseNonDecimalNumbers(CLI::App* app) {
  for (CLI::App* command : Commands(app)) {
    for (CLI::Option* option : command->get_options()) {
      if (!option->nonpositional() || option->get_items_expected_min() < 1) continue;
      if (!TakesNumbers(*option)) continue;
      option->check(CLI::Validator(
          [](std::string& value) {
            std::size_t start = 0;
            while (start <= value.size()) {
              const std::size_t comma = std::min(value.find(',', start), value.size());
              std::string problem = model::NonDecimalProblem(value.substr(start, comma - start));
              if (!problem.empty()) return problem;
              start = comma + 1;
            }
            return std::string();
          },
          /*validator_desc=*/"", "decimal"));
    }
  }
}

// The command the user chose, or nullptr.
CLI::App* ChosenCommand(CLI::App* app) {
  for (CLI::App* command : Commands(app)) {
    if (command->parsed()) return command;
  }
  return nullptr;
}

// What is wrong with `value`, a value CLI11 could not convert for a flag
// that takes a number: text that strtod reads fully is a number, so the flag
// wants a whole one (or a smaller one, when it is whole already).
std::string ConversionProblem(const std::string& value) {
  if (value.empty()) return "the value is empty";
  const char* begin = value.c_str();
  char* end = nullptr;
  std::strtod(begin, &end);
  if (end != begin + value.size()) return "'" + value + "' is not a number";
  const bool whole = value.find_first_not_of("+-0123456789") == std::string::npos;
  return "'" + value + (whole ? "' is out of range" : "' is not a whole number");
}

// A CLI11 parse error in joulepipe's words: what is wrong with which flag,
// and where to look (`<command> --help`).
std::string UsageMessage(CLI::App* app, const CLI::Error& e) {
  CLI::App* command = ChosenCommand(app);
  const std::string text = e.what();
  const std::string where = command ? "joulepipe " + command->get_name() : "joulepipe";
  const std::string help = "; run `" + where + " --help` to see its flags and an example";
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && command == nullptr) {
    return "no command given; the commands are " + CommandNames(app) +
           " (start with `joulepipe demo`, or run `joulepipe --help` to see what each does)";
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr &&
      StartsWith(text, "Could not convert: ")) {
    const std::string rest = text.substr(std::string("Could not convert: ").size());
    const std::size_t equals = rest.find(" = ");
    if (equals != std::string::npos) {
      const std::string flag = rest.substr(0, equals);
      std::string takes;
      const CLI::Option* option = command ? command->get_option_no_throw(flag) : nullptr;
      if (option != nullptr) {
        takes =
            "; " + flag + " takes " + option->get_type_name() + ": " + option->get_description();
      }
      return flag + ": " + ConversionProblem(rest.substr(equals + 3)) + takes + help;
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr &&
      text.find(" required ") != std::string::npos && text.find(" missing") != std::string::npos) {
    const std::string flag = text.substr(0, text.find(':'));
    return flag + " needs a value after it" + help;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr &&
      text.find(": At Most 1 required but received ") != std::string::npos) {
    const std::string flag = text.substr(0, text.find(':'));
    return flag + " is given more than once; give it once" + help;
  }
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr &&
      text.find(": ") != std::string::npos) {
    // CLI11 lists the extras last first; a word after an unknown flag is
    // that flag's value, so the flags are what to name.
    std::vector<std::string> flags, words;
    std::istringstream extras(text.substr(text.find(": ") + 2));
    for (std::string word; extras >> word;) {
      std::vector<std::string>& list = StartsWith(word, "-") ? flags : words;
      list.insert(list.begin(), word);  // back to the order given
    }
    auto join = [](const std::vector<std::string>& list) {
      std::string out;
      for (const std::string& word : list) out += (out.empty() ? "" : " ") + word;
      return out;
    };
    if (!flags.empty()) {
      return (flags.size() == 1 ? "unknown flag " : "unknown flags ") + join(flags) + " for `" +
             where + "`" + help;
    }
    return (words.size() == 1 ? "unexpected argument " : "unexpected arguments ") + join(words) +
           " for `" + where + "` (each flag takes one value)" + help;
  }
  return text + help;
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
  subcommands.push_back(std::make_unique<ReportSubcommand>(&app));
  subcommands.push_back(std::make_unique<SiteSubcommand>(&app));
  subcommands.push_back(std::make_unique<TuneSubcommand>(&app));
  subcommands.push_back(std::make_unique<ProfileSubcommand>(&app));
  subcommands.push_back(std::make_unique<GpusSubcommand>(&app));
  subcommands.push_back(std::make_unique<MeasureSubcommand>(&app));
  subcommands.push_back(std::make_unique<PowerSubcommand>(&app));
  subcommands.push_back(std::make_unique<CalibrateWaitSubcommand>(&app));
  subcommands.push_back(std::make_unique<ServeSubcommand>(&app));
  RefuseEmptyValues(&app);
  RefuseNonDecimalNumbers(&app);

  // CLI11 reads an unknown first word as "no command"; say what it is.
  if (argc >= 2) {
    const std::string word = argv[1];
    bool known = false;
    for (CLI::App* command : Commands(&app)) known = known || command->get_name() == word;
    const bool top_flag = word == "--help" || word == "-h" || word == "--version";
    if (!known && !top_flag) {
      const std::string message = (StartsWith(word, "-") ? "unknown flag '" + word +
                                                               "' before the command (only --help "
                                                               "and --version come first)"
                                                         : "unknown command '" + word + "'") +
                                  "; the commands are " + CommandNames(&app) +
                                  " (run `joulepipe --help` to see what each does)";
      return Fail(kExitUsage, "error", message.c_str());
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      app.exit(e);
      return kExitOk;
    }
    return Fail(kExitUsage, "error", UsageMessage(&app, e).c_str());
  }

  try {
    for (const std::unique_ptr<Subcommand>& subcommand : subcommands) {
      if (subcommand->parsed()) return subcommand->Run();
    }
    return Fail(kExitInternal, "internal error", "no subcommand selected");
  } catch (const model::Cancelled&) {
    return InterruptedExitCode();  // a signal; main() says so (signals.hpp)
  } catch (const InputError& e) {
    // Library messages name fields ("Spec::stages"); users know flags.
    return Fail(kExitUsage, "error", WithFlagNames(e.what()).c_str());
  } catch (const std::bad_alloc&) {
    // Inputs are bounded (docs/limits.md), so this is the machine, not a
    // typo; say what needs less memory rather than blame one flag.
    return Fail(kExitInternal, "error",
                "out of memory; a smaller job needs less (fewer stages, microbatches, "
                "pipelines or iterations, or a coarser --resolution-ms)");
  } catch (const std::exception& e) {
    const std::string message =
        std::string(e.what()) + " (this is a bug in joulepipe; please report it with the command)";
    return Fail(kExitInternal, "internal error", message.c_str());
  }
}

}  // namespace joulepipe::cli
