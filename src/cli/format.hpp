// Number (and schedule shape) formatting shared by the joulepipe subcommands.
//
// Files meant for machines (frontier.csv, `evaluate --json`) use Exact(): 17
// significant digits, so every double reads back bit-identical. Text meant
// for people uses Printf() with a fixed precision.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "joulepipe/model/format.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::cli {

// printf into a std::string.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "%.17g": round-trips any finite double exactly.
std::string Exact(double value);

// A command as a shell would take it back: words with characters beyond
// [A-Za-z0-9-_./=:,+@%] in single quotes.
std::string CommandLine(const std::vector<std::string>& command);

// Savings and slowdowns in % (model/format.hpp), the schedule's shape for
// people (schedule/schedule.hpp).
using model::SavingPercent;
using model::SlowdownPercent;
using schedule::ShapeText;

// "from the profile" or "from --p-block": where P_block came from, given a
// library result's p_block_source ("profile" or "request").
std::string PBlockOrigin(const std::string& p_block_source);

// A progress callback for the library's long calls (plan, simulate) that
// prints "joulepipe: <prefix><phase> 42% (7 s)" lines to `out`: nothing in
// the first two seconds, so short runs stay quiet, then at most one a second.
std::function<void(const char* phase, double fraction)> ProgressLines(std::FILE* out,
                                                                      std::string prefix);

}  // namespace joulepipe::cli
