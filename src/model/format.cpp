#include "joulepipe/model/format.hpp"

#include <cmath>
#include <cstdio>

namespace joulepipe::model {

std::string FormatV(const char* format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out;
  if (size > 0) {
    out.resize(static_cast<size_t>(size) + 1);  // vsnprintf writes the terminator
    std::vsnprintf(out.data(), out.size(), format, args);
    out.resize(static_cast<size_t>(size));
  }
  return out;
}

std::string Format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string out = FormatV(format, args);
  va_end(args);
  return out;
}

namespace {
double Clean(double percent) {
  return std::abs(percent) < 1e-9 ? 0.0 : percent;
}
}  // namespace

double SavingPercent(double value, double reference) {
  return Clean(100.0 * (1.0 - value / reference));
}

double SlowdownPercent(double value, double reference) {
  return Clean(100.0 * (value / reference - 1.0));
}

std::string SlowdownText(double value, double reference) {
  const double pct = SlowdownPercent(value, reference);
  if (pct <= -0.0005) return Format("speed-up %.3f%%", -pct);
  return Format("slowdown %.3f%%", pct > 0 ? pct : 0.0);
}

}  // namespace joulepipe::model
