// CUDA_VISIBLE_DEVICES resolution (visible_devices.hpp has the rules).
#include "joulepipe/gpu/visible_devices.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "joulepipe/gpu/error.hpp"

namespace joulepipe::gpu {

namespace {

std::string_view Trim(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

std::vector<std::string_view> Split(std::string_view text) {
  std::vector<std::string_view> entries;
  for (;;) {
    const size_t comma = text.find(',');
    entries.push_back(Trim(text.substr(0, comma)));
    if (comma == std::string_view::npos) return entries;
    text.remove_prefix(comma + 1);
  }
}

bool AllDigits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

std::string Plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

VisibleDevices ResolveVisibleDevices(const std::optional<std::string>& visible,
                                     const std::vector<DeviceId>& devices) {
  VisibleDevices out;
  if (!visible.has_value()) {
    for (const DeviceId& d : devices) out.nvml_indices.push_back(d.nvml_index);
    return out;
  }
  if (Trim(*visible).empty()) return out;  // set but empty: no device, by design

  const std::vector<std::string_view> entries = Split(*visible);
  for (size_t position = 0; position < entries.size(); ++position) {
    const std::string_view entry = entries[position];
    std::string problem;  // non-empty: stop here
    std::optional<unsigned> index;
    if (StartsWith(entry, "MIG-")) {
      throw MigError("CUDA_VISIBLE_DEVICES=\"" + *visible + "\" names the MIG instance \"" +
                     std::string(entry) +
                     "\"; joulepipe controls whole GPUs (clocks and power limits cannot be set "
                     "per MIG instance): list whole GPUs (indices or GPU-<uuid>) in "
                     "CUDA_VISIBLE_DEVICES");
    } else if (StartsWith(entry, "GPU-")) {
      std::vector<unsigned> matches;
      for (const DeviceId& d : devices) {
        if (StartsWith(d.uuid, entry)) matches.push_back(d.nvml_index);
      }
      if (matches.empty()) {
        problem = "matches no GPU's UUID";
      } else if (matches.size() > 1) {
        problem = "is a prefix of " + Plural(matches.size(), "GPU") + "' UUIDs";
      } else {
        index = matches.front();
      }
    } else if (AllDigits(entry)) {
      unsigned long long value = 0;
      for (char c : entry)
        value = std::min(value * 10 + static_cast<unsigned>(c - '0'), 1ULL << 40);
      bool found = false;
      for (const DeviceId& d : devices) {
        if (d.nvml_index == value) found = true;
      }
      if (found) {
        index = static_cast<unsigned>(value);
      } else {
        problem = "is not a device index (there " +
                  std::string(devices.size() == 1 ? "is " : "are ") +
                  Plural(devices.size(), "GPU") + ")";
      }
    } else {
      problem = entry.empty() ? std::string("is empty")
                              : std::string("is neither an index nor a GPU-<uuid>");
    }
    if (index.has_value() && std::count(out.nvml_indices.begin(), out.nvml_indices.end(), *index)) {
      problem = "lists GPU " + std::to_string(*index) + " a second time";
    }
    if (!problem.empty()) {
      out.stopped = "CUDA_VISIBLE_DEVICES entry " + std::to_string(position + 1) + " (\"" +
                    std::string(entry) + "\") " + problem +
                    "; it and the entries after it are ignored, as CUDA does";
      return out;
    }
    out.nvml_indices.push_back(*index);
  }
  return out;
}

std::optional<std::string> CudaVisibleDevicesFromEnv() {
  const char* value = std::getenv(kCudaVisibleDevicesEnv);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

}  // namespace joulepipe::gpu
