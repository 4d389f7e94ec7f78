// Loading libnvidia-ml with dlopen, resolving its symbols by name, the
// process-wide init/shutdown, and NVML error codes turned into exceptions.
#include "nvml_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace joulepipe::gpu {

namespace internal {

namespace {

constexpr char kSimulatedHint[] =
    "for testing without a GPU use build/sim-nvml/libnvidia-ml.so.1 "
    "(JOULEPIPE_NVML_LIBRARY=build/sim-nvml/libnvidia-ml.so.1)";

// Owns a dlopen handle until released; closes it if loading fails half-way.
class DlHandle {
 public:
  explicit DlHandle(void* handle) : handle_(handle) {}
  ~DlHandle() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  DlHandle(const DlHandle&) = delete;
  DlHandle& operator=(const DlHandle&) = delete;
  void* get() const { return handle_; }
  void release() { handle_ = nullptr; }

 private:
  void* handle_;
};

template <typename T>
void Resolve(void* handle, const char* name, T* slot) {
  // POSIX guarantees that dlsym's void* converts to a function pointer.
  *slot = reinterpret_cast<T>(dlsym(handle, name));
}

template <typename T>
void Require(void* handle, const char* name, const std::string& path, T* slot) {
  Resolve(handle, name, slot);
  if (*slot == nullptr) {
    throw NvmlUnavailableError(std::string("the NVML library ") + path +
                               " lacks the required function " + name +
                               "; it is not a usable libnvidia-ml.so.1 (or the NVIDIA driver is "
                               "too old): update the driver or point JOULEPIPE_NVML_LIBRARY at "
                               "another library");
  }
}

NvmlApi ResolveAll(void* h, const std::string& path) {
  NvmlApi a;
  Require(h, "nvmlInit_v2", path, &a.init_v2);
  Require(h, "nvmlShutdown", path, &a.shutdown);
  Require(h, "nvmlErrorString", path, &a.error_string);
  Require(h, "nvmlDeviceGetCount_v2", path, &a.device_get_count);
  Require(h, "nvmlDeviceGetHandleByIndex_v2", path, &a.device_get_handle_by_index);
  Require(h, "nvmlDeviceGetName", path, &a.device_get_name);
  Require(h, "nvmlDeviceGetUUID", path, &a.device_get_uuid);
  Resolve(h, "nvmlSystemGetDriverVersion", &a.system_get_driver_version);
  Resolve(h, "nvmlSystemGetNVMLVersion", &a.system_get_nvml_version);
  Resolve(h, "nvmlDeviceGetArchitecture", &a.device_get_architecture);
  Resolve(h, "nvmlDeviceGetMigMode", &a.device_get_mig_mode);
  Resolve(h, "nvmlDeviceGetTotalEnergyConsumption", &a.device_get_total_energy_consumption);
  Resolve(h, "nvmlDeviceGetPowerUsage", &a.device_get_power_usage);
  Resolve(h, "nvmlDeviceGetFieldValues", &a.device_get_field_values);
  Resolve(h, "nvmlDeviceGetUtilizationRates", &a.device_get_utilization_rates);
  Resolve(h, "nvmlDeviceGetTemperature", &a.device_get_temperature);
  Resolve(h, "nvmlDeviceGetSupportedMemoryClocks", &a.device_get_supported_memory_clocks);
  Resolve(h, "nvmlDeviceGetSupportedGraphicsClocks", &a.device_get_supported_graphics_clocks);
  Resolve(h, "nvmlDeviceGetClockInfo", &a.device_get_clock_info);
  Resolve(h, "nvmlDeviceGetMaxClockInfo", &a.device_get_max_clock_info);
  Resolve(h, "nvmlDeviceGetCurrentClocksThrottleReasons", &a.device_get_throttle_reasons);
  Resolve(h, "nvmlDeviceGetPowerManagementLimit", &a.device_get_power_limit);
  Resolve(h, "nvmlDeviceGetPowerManagementLimitConstraints", &a.device_get_power_limit_constraints);
  Resolve(h, "nvmlDeviceGetPowerManagementDefaultLimit", &a.device_get_power_default_limit);
  Resolve(h, "nvmlDeviceGetEnforcedPowerLimit", &a.device_get_enforced_power_limit);
  Resolve(h, "nvmlDeviceSetPowerManagementLimit", &a.device_set_power_limit);
  Resolve(h, "nvmlDeviceSetGpuLockedClocks", &a.device_set_locked_clocks);
  Resolve(h, "nvmlDeviceResetGpuLockedClocks", &a.device_reset_locked_clocks);
  Resolve(h, "nvmlDeviceSetMemoryLockedClocks", &a.device_set_memory_locked_clocks);
  Resolve(h, "nvmlDeviceResetMemoryLockedClocks", &a.device_reset_memory_locked_clocks);
  Resolve(h, "nvmlDeviceGetPersistenceMode", &a.device_get_persistence_mode);
  Resolve(h, "nvmlDeviceSetPersistenceMode", &a.device_set_persistence_mode);
  return a;
}

// The file the loader opened for `handle`, absolute where possible.
std::string LoadedPath(void* handle, const std::string& requested) {
  link_map* map = nullptr;
  std::string path = requested;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    path = map->l_name;
  }
  std::error_code ignored;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ignored);
  return ignored || canonical.empty() ? path : canonical.string();
}

// The simulated library (src/sim_nvml) exports a marker function that no
// NVIDIA driver has; a copy of it anywhere is recognised.
bool IsSimulated(void* handle) {
  return dlsym(handle, "nvmlJoulepipeSimulated") != nullptr;
}

std::string SystemString(nvmlReturn_t (*fn)(char*, unsigned int)) {
  if (fn == nullptr) return "";
  char buffer[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (fn(buffer, sizeof buffer) != NVML_SUCCESS) return "";
  buffer[sizeof buffer - 1] = '\0';
  return buffer;
}

std::string InitHint(nvmlReturn_t code) {
  switch (code) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "the NVIDIA kernel driver is not running (no GPU, or the driver is not "
             "installed or loaded): check `nvidia-smi`; " +
             std::string(kSimulatedHint);
    case NVML_ERROR_NO_PERMISSION:
      return "this user may not open the GPU device files (/dev/nvidia*): check their "
             "permissions or run as a user in the video group";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "the NVML library and the loaded kernel driver are different versions (often "
             "after a driver update): reboot or reload the nvidia kernel module";
    default:
      return "check `nvidia-smi`";
  }
}

LoadedNvml* Load() {
  const char* env = std::getenv(kNvmlLibraryEnv);
  const std::string requested = env != nullptr && env[0] != '\0' ? env : kNvmlDefaultLibrary;
  dlerror();  // clear
  DlHandle handle(dlopen(requested.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (handle.get() == nullptr) {
    const char* why = dlerror();
    std::string message;
    if (env != nullptr && env[0] != '\0') {
      message = std::string("cannot load the NVML library JOULEPIPE_NVML_LIBRARY=") + requested +
                " (" + (why != nullptr ? why : "unknown dlopen error") +
                "); fix or unset JOULEPIPE_NVML_LIBRARY; " + kSimulatedHint;
    } else {
      message = std::string("no NVIDIA driver found (") + kNvmlDefaultLibrary +
                " not loadable: " + (why != nullptr ? why : "unknown dlopen error") +
                "); set JOULEPIPE_NVML_LIBRARY to the library's path or install the NVIDIA "
                "driver; " +
                kSimulatedHint;
    }
    throw NvmlUnavailableError(message);
  }
  auto loaded = std::make_unique<LoadedNvml>();
  loaded->info.requested = requested;
  loaded->info.path = LoadedPath(handle.get(), requested);
  loaded->info.simulated = IsSimulated(handle.get());
  loaded->api = ResolveAll(handle.get(), loaded->info.path);
  const nvmlReturn_t code = loaded->api.init_v2();
  if (code != NVML_SUCCESS) {
    const char* text = loaded->api.error_string(code);
    throw NvmlUnavailableError("nvmlInit_v2 failed (NVML library " + loaded->info.path +
                               "): " + (text != nullptr ? text : "unknown error") +
                               " (NVML error " + std::to_string(code) + "); " + InitHint(code));
  }
  loaded->info.driver_version = SystemString(loaded->api.system_get_driver_version);
  loaded->info.nvml_version = SystemString(loaded->api.system_get_nvml_version);
  loaded->handle = handle.get();
  handle.release();  // stays loaded for the life of the process
  return loaded.release();
}

// Owns the loaded library; its destructor, run at process exit, shuts NVML
// down (the library itself stays mapped: unloading at exit gains nothing).
struct Holder {
  LoadedNvml* nvml;
  ~Holder() {
    if (nvml != nullptr) nvml->api.shutdown();
  }
};

std::string CodeHint(nvmlReturn_t code, const std::string& function) {
  switch (code) {
    case NVML_ERROR_NO_PERMISSION:
      return "changing GPU clocks and power limits needs root: run as root (as "
             "`nvidia-smi -lgc` and `nvidia-smi -pl` need root), or run the joulepiped daemon "
             "(docs/daemon.md) and control clocks through it unprivileged";
    case NVML_ERROR_GPU_IS_LOST:
      return "the GPU fell off the bus or stopped responding: check `nvidia-smi` and the "
             "kernel log (dmesg); it needs a reset or a reboot";
    case NVML_ERROR_NOT_SUPPORTED:
      return "this GPU or driver does not support it";
    case NVML_ERROR_DRIVER_NOT_LOADED:
      return "the NVIDIA kernel driver is not running: check `nvidia-smi`";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      return "the NVML library " + Library().info.path + " lacks " + function +
             ": update the NVIDIA driver";
    case NVML_ERROR_RESET_REQUIRED:
      return "the GPU needs a reset (nvidia-smi -r) or a reboot";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
      return "the NVML library and the kernel driver are different versions: reboot or reload "
             "the nvidia kernel module";
    default:
      return "";
  }
}

}  // namespace

const LoadedNvml& Library() {
  // Initialised once, thread-safely; if Load() throws, the next call retries.
  static Holder holder{Load()};
  return *holder.nvml;
}

void ThrowNvmlError(nvmlReturn_t code, const std::string& function, const std::string& device) {
  const std::string text = NvmlErrorText(code);
  const std::string hint = CodeHint(code, function);
  if (code == NVML_ERROR_NO_PERMISSION)
    throw NvmlPermissionError(code, function, text, device, hint);
  throw NvmlError(code, function, text, device, hint);
}

}  // namespace internal

NvmlError::NvmlError(nvmlReturn_t code, std::string function, std::string nvml_message,
                     std::string device, const std::string& hint)
    : GpuError(function + " failed" + (device.empty() ? "" : " on " + device) + ": " +
               nvml_message + " (NVML error " + std::to_string(static_cast<int>(code)) + ")" +
               (hint.empty() ? "" : "; " + hint)),
      code_(code),
      function_(std::move(function)),
      nvml_message_(std::move(nvml_message)),
      device_(std::move(device)) {}

const NvmlInfo& Nvml() {
  return internal::Library().info;
}

std::string NvmlMethodology() {
  const NvmlInfo& info = Nvml();
  if (info.simulated) {
    return "GPU figures from the simulated NVML library (" + info.path +
           "), not measured on a GPU.";
  }
  return "GPU figures measured via NVML (" + info.path +
         (info.driver_version.empty() ? "" : ", driver " + info.driver_version) + ").";
}

std::string NvmlErrorText(int code) {
  try {
    const char* text = internal::Library().api.error_string(static_cast<nvmlReturn_t>(code));
    if (text != nullptr) return text;
  } catch (...) {
  }
  return "NVML error " + std::to_string(code);
}

}  // namespace joulepipe::gpu
