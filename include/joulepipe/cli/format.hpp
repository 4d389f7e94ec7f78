// Number formatting shared by the joulepipe subcommands.
//
// Files meant for machines (frontier.csv, `evaluate --json`) use Exact(): 17
// significant digits, so every double reads back bit-identical. Text meant
// for people uses Printf() with a fixed precision.
#pragma once

#include <string>

namespace joulepipe::cli {

// printf into a std::string.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "%.17g": round-trips any finite double exactly.
std::string Exact(double value);

// 100 * (1 - value / reference): the saving of `value` over `reference`, in %.
double SavingPercent(double value, double reference);

// 100 * (value / reference - 1): how much longer `value` is, in %.
double SlowdownPercent(double value, double reference);

}  // namespace joulepipe::cli
