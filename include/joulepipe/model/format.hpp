// printf-style formatting into a std::string, of any length: the one helper
// every part's messages use.
#pragma once

#include <cstdarg>
#include <string>

namespace joulepipe::model {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string FormatV(const char* format, va_list args);

// 100 * (1 - value / reference): the saving of `value` over `reference`, in
// %; round-off (|x| < 1e-9 %) is 0, so equal figures never print "-0.00%".
double SavingPercent(double value, double reference);
// 100 * (value / reference - 1): how much longer `value` is, in %; the same
// rounding.
double SlowdownPercent(double value, double reference);
// "slowdown 5.000%" for a `value` longer than `reference`, "speed-up 2.226%"
// for one shorter by at least 0.0005 % (what "%.3f" shows), and "slowdown
// 0.000%" between: a faster plan is never printed as a negative slowdown.
std::string SlowdownText(double value, double reference);

}  // namespace joulepipe::model
