// The `joulepipe` command line: subcommands demo, plan and evaluate.
//
// Exit codes: 0 success; 2 bad input or usage (a message on stderr names the
// flag, file, line or field at fault; no output directory is left behind);
// 1 an unexpected internal error.
#pragma once

namespace joulepipe::cli {

// The project version from CMake (project(... VERSION ...)).
inline constexpr char kVersion[] = JOULEPIPE_VERSION;

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitUsage = 2;

// Parses the arguments, runs the chosen subcommand and returns the exit code.
// Writes results to stdout and messages to stderr.
int RunApp(int argc, char** argv);

}  // namespace joulepipe::cli
