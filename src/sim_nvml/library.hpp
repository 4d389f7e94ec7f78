// The process-wide state of the simulated library (a C library's state is
// inherently global) and the wrapper every exported function runs through.
//
// Invariants:
//   * every exported function holds Library::mu for its whole body, so calls
//     from several threads are serialised;
//   * handles are the addresses of Library::handles[i], fixed for the life of
//     the process: the same index gives the same handle in every session;
//   * config and store are valid while init_count > 0; they are reloaded
//     when a session starts (init_count 0 -> 1).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "config.hpp"
#include "device_model.hpp"
#include "errors.hpp"
#include "joulepipe/gpu/nvml_api.hpp"
#include "state_store.hpp"

struct nvmlDevice_st {
  unsigned index = 0;
};

namespace joulepipe::sim_nvml {

struct Library {
  std::mutex mu;
  int init_count = 0;
  Config config;
  std::unique_ptr<StateStore> store;
  nvmlDevice_st handles[kMaxDevices];
  bool reported_error = false;  // an internal error was printed once

  static Library& Get();
};

// Seconds since the Unix epoch on CLOCK_REALTIME.
double NowUnixS();

// Reports an internal error (exception) once per process on stderr.
void ReportInternalError(Library& lib, const char* function, const char* what);

// One call on one device, with the library locked and the device resolved.
class DeviceCall {
 public:
  DeviceCall(Library& lib, unsigned index, double now) : lib_(lib), index_(index), now_(now) {}

  unsigned index() const { return index_; }
  double now() const { return now_; }
  const Config& config() const { return lib_.config; }
  const DeviceConfig& device() const { return lib_.config.devices[index_]; }
  const physics::GpuSpec& gpu() const { return *device().gpu; }

  // The device's settings history (default settings if none recorded).
  const DeviceHistory& history();
  const Settings& settings() { return history().Current(); }
  // At now, which is before a locked-clock change still under way
  // (settings() is the newest, as the driver accepted it).
  Operating Now() { return OperatingAt(device(), config().epoch_unix_s, history().At(now_), now_); }

  // Records new settings from now + delay_s on (persisted to the state
  // file, if any).
  void SetSettings(const Settings& s, double delay_s = 0);

 private:
  Library& lib_;
  unsigned index_;
  double now_;
  DeviceHistory empty_;
};

// Runs `body(DeviceCall&)` for an exported device function named `function`
// with lib.mu held: checks initialisation and the handle, injects the
// configured faults (GPU lost, unknown error), and maps exceptions to
// NVML_ERROR_UNKNOWN.
template <class Body>
nvmlReturn_t RunLocked(Library& lib, const char* function, nvmlDevice_t device, Body&& body) {
  if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || device < &lib.handles[0] || device >= &lib.handles[kMaxDevices] ||
      device->index >= lib.config.devices.size())
    return NVML_ERROR_INVALID_ARGUMENT;
  try {
    DeviceCall call(lib, device->index, NowUnixS());
    const Faults& faults = call.device().faults;
    if (faults.gpu_lost_at_s && call.now() >= lib.config.epoch_unix_s + *faults.gpu_lost_at_s)
      return NVML_ERROR_GPU_IS_LOST;
    if (faults.unknown_error.count(function)) return NVML_ERROR_UNKNOWN;
    return body(call);
  } catch (const std::exception& e) {
    ReportInternalError(lib, function, e.what());
    return NVML_ERROR_UNKNOWN;
  }
}

// RunLocked under the library lock.
template <class Body>
nvmlReturn_t WithDevice(const char* function, nvmlDevice_t device, Body&& body) {
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  return RunLocked(lib, function, device, body);
}

// Same for functions without a device: locks, checks initialisation, maps
// exceptions.
template <class Body>
nvmlReturn_t WithLibrary(const char* function, Body&& body) {
  Library& lib = Library::Get();
  std::lock_guard<std::mutex> lock(lib.mu);
  if (lib.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  try {
    return body(lib);
  } catch (const std::exception& e) {
    ReportInternalError(lib, function, e.what());
    return NVML_ERROR_UNKNOWN;
  }
}

// Copies `text` with its terminating NUL into buf[length]; INSUFFICIENT_SIZE
// when it does not fit, INVALID_ARGUMENT for a null buffer.
nvmlReturn_t CopyString(const std::string& text, char* buf, unsigned length);

// Appends a setter call to the configured call log. `args_json` is a JSON
// object text.
void LogSetter(const Library& lib, const char* function, int device_index,
               const std::string& args_json, nvmlReturn_t result);

// nvmlInit: starts or joins a session. nvmlShutdown: leaves it.
nvmlReturn_t InitSession();
nvmlReturn_t ShutdownSession();

}  // namespace joulepipe::sim_nvml
