// Number (and schedule shape) formatting shared by the joulepipe subcommands.
#include "format.hpp"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <utility>

#include "joulepipe/model/format.hpp"

namespace joulepipe::cli {

std::string Printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string out = model::FormatV(format, args);
  va_end(args);
  return out;
}

std::string Exact(double value) {
  return Printf("%.17g", value);
}

std::string PBlockOrigin(const std::string& p_block_source) {
  return p_block_source == "profile" ? "from the profile" : "from --p-block";
}

std::function<void(const char*, double)> ProgressLines(std::FILE* out, std::string prefix) {
  const auto started = std::chrono::steady_clock::now();
  auto last = started;
  return
      [out, prefix = std::move(prefix), started, last](const char* phase, double fraction) mutable {
        const auto now = std::chrono::steady_clock::now();
        if (now - started < std::chrono::seconds(2) || now - last < std::chrono::seconds(1)) return;
        last = now;
        std::fprintf(out, "joulepipe: %s%s %3.0f%% (%.0f s)\n", prefix.c_str(), phase,
                     100 * fraction, std::chrono::duration<double>(now - started).count());
        std::fflush(out);
      };
}

std::string CommandLine(const std::vector<std::string>& command) {
  std::string out;
  for (const std::string& word : command) {
    if (!out.empty()) out += ' ';
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_./=:,+@%") == std::string::npos;
    out += plain ? word : "'" + word + "'";
  }
  return out;
}

}  // namespace joulepipe::cli
