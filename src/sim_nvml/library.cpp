#include "library.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

namespace joulepipe::sim_nvml {

Library& Library::Get() {
  // Never destroyed: NVML calls may arrive from other threads or atexit
  // handlers while the process exits.
  static Library* lib = [] {
    auto* l = new Library;
    for (unsigned i = 0; i < kMaxDevices; ++i) l->handles[i].index = i;
    return l;
  }();
  return *lib;
}

double NowUnixS() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

void ReportInternalError(Library& lib, const char* function, const char* what) {
  if (lib.reported_error) return;
  lib.reported_error = true;
  std::fprintf(stderr, "joulepipe sim-nvml: %s: %s (further errors not shown)\n", function, what);
}

namespace {
constexpr size_t kMaxHistory = 64;
}  // namespace

const DeviceHistory& DeviceCall::history() {
  const DeviceHistories& all = lib_.store->Read();
  const auto it = all.find(device().uuid);
  return it == all.end() ? empty_ : it->second;
}

void DeviceCall::SetSettings(const Settings& s, double delay_s) {
  const DeviceConfig& dev = device();
  const double epoch = config().epoch_unix_s, now = now_;
  lib_.store->Modify([&](DeviceHistories& all) {
    DeviceHistory& h = all[dev.uuid];
    h.Set(now + delay_s, s);
    // In-process histories cache each change's energy (cheap readings at
    // high change rates); with a state file every process integrates the
    // same way, so all read the same counter.
    if (config().state_file.empty()) CacheLastEnergy(dev, epoch, h);
    // Bounded history: once there are many changes, fold those older than
    // any reading still needs (the 1 s power average, the last counter
    // tick, a 1 s margin) into the base (docs/sim-nvml.md, "State file").
    Compact(dev, epoch, h, kMaxHistory, now - 2.0 - config().energy_period_s);
  });
}

nvmlReturn_t CopyString(const std::string& text, char* buf, unsigned length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

void LogSetter(const Library& lib, const char* function, int device_index,
               const std::string& args_json, nvmlReturn_t result) {
  if (lib.config.call_log.empty()) return;
  nlohmann::json line{{"t", NowUnixS()},
                      {"pid", static_cast<long>(::getpid())},
                      {"function", function},
                      {"device", device_index},
                      {"args", nlohmann::json::parse(args_json)},
                      {"result", static_cast<int>(result)},
                      {"result_name", ErrorName(result)}};
  if (device_index >= 0 && device_index < static_cast<int>(lib.config.devices.size()))
    line["uuid"] = lib.config.devices[device_index].uuid;
  AppendCallLog(lib.config.call_log, line.dump());
}

nvmlReturn_t InitSession() {
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  if (lib.init_count > 0) {
    ++lib.init_count;
    return NVML_SUCCESS;
  }
  Config config;
  try {
    config = LoadConfig();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "joulepipe sim-nvml: %s\n", e.what());
    return NVML_ERROR_UNKNOWN;
  }
  if (config.init_error != 0) return static_cast<nvmlReturn_t>(config.init_error);
  lib.config = std::move(config);
  // A new session starts from the state file, or (without one) from default
  // settings: per-process settings do not outlive the session.
  lib.store = std::make_unique<StateStore>(lib.config.state_file);
  lib.init_count = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t ShutdownSession() {
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --lib.init_count;
  return NVML_SUCCESS;
}

}  // namespace joulepipe::sim_nvml
