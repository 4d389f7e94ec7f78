// printf-style formatting into a std::string, of any length: the one helper
// every part's messages use.
#pragma once

#include <cstdarg>
#include <string>

namespace joulepipe::model {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string FormatV(const char* format, va_list args);

}  // namespace joulepipe::model
