#include "joulepipe/model/version.hpp"

#include <cstdio>
#include <ctime>

// CMakeLists.txt defines JOULEPIPE_VERSION for every target from the project
// version; a build without it is a build-system bug, not a fallback case.
#ifndef JOULEPIPE_VERSION
#error "JOULEPIPE_VERSION must be defined (CMakeLists.txt: add_compile_definitions)"
#endif

namespace joulepipe::model {

std::string_view Version() {
  return JOULEPIPE_VERSION;
}

std::string IsoUtc(std::chrono::system_clock::time_point when) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(when);
  std::tm utc{};
  gmtime_r(&seconds, &utc);  // thread-safe, unlike std::gmtime
  char text[96];             // room for any int fields, so no truncation warning
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec);
  return text;
}

std::string IsoUtcNow() {
  return IsoUtc(std::chrono::system_clock::now());
}

}  // namespace joulepipe::model
