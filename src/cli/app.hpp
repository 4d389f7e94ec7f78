// The `joulepipe` command line: subcommands demo, plan, evaluate, simulate,
// profile, gpus, measure and power, each a Subcommand (subcommand.hpp) in
// its own <name>_command.{hpp,cpp}.
//
// Exit codes: 0 success; 2 bad input or usage, or an environment that cannot
// serve the command (no NVML library, a MIG instance, a lost GPU): a message
// on stderr names the flag, file, line, field or device at fault and says
// what to do; no output directory is left behind; 1 an unexpected internal
// error (kExitOk, kExitUsage, kExitInternal in subcommand.hpp). `measure`
// passes its command's exit code through instead.
#pragma once

namespace joulepipe::cli {

// The project version from CMake (project(... VERSION ...)).
inline constexpr char kVersion[] = JOULEPIPE_VERSION;

// Parses the arguments, runs the chosen subcommand and returns the exit code.
// Writes results to stdout and messages to stderr.
int RunApp(int argc, char** argv);

}  // namespace joulepipe::cli
