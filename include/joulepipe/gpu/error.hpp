// Errors of the `gpu` part. Every one is a model::InputError, so the CLI
// prints its message and exits 2 ("fix your environment or input"), never 1
// ("a bug in joulepipe"). Catch the precise type where a caller must branch:
//
//   GpuError                     any failure of this part
//   ├─ NvmlUnavailableError      no usable NVML: library not loadable, a
//   │                            required symbol missing, nvmlInit failed
//   ├─ NvmlError                 one NVML call failed: code, function,
//   │  │                         NVML's own error string, the device
//   │  └─ NvmlPermissionError    NVML_ERROR_NO_PERMISSION on a setter
//   ├─ MigError                  a MIG instance or a GPU in MIG mode where
//   │                            joulepipe needs a whole GPU
//   └─ GpuArgumentError          a caller's value out of range (a clock or a
//                                power limit the device does not accept)
#pragma once

#include <string>

#include "joulepipe/gpu/nvml_api.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::gpu {

class GpuError : public model::InputError {
 public:
  explicit GpuError(const std::string& message) : model::InputError(message) {}
};

// NVML cannot be used at all. what() says why (the dlerror text, the missing
// symbol and the library path, or nvmlInit's error) and how to fix it.
class NvmlUnavailableError : public GpuError {
 public:
  explicit NvmlUnavailableError(const std::string& message) : GpuError(message) {}
};

// One NVML call returned an error. what() reads, e.g.
//   "nvmlDeviceGetPowerUsage failed on GPU 1 (GPU-8e5c...): GPU is lost (NVML
//    error 15)[, hint]"
class NvmlError : public GpuError {
 public:
  NvmlError(nvmlReturn_t code, std::string function, std::string nvml_message, std::string device,
            const std::string& hint = "");

  nvmlReturn_t code() const { return code_; }
  // The NVML function that failed, e.g. "nvmlDeviceSetGpuLockedClocks".
  const std::string& function() const { return function_; }
  // NVML's own text for `code` (nvmlErrorString).
  const std::string& nvml_message() const { return nvml_message_; }
  // "GPU <nvml index> (<uuid>)", or "" for calls not about one device.
  const std::string& device() const { return device_; }

 private:
  nvmlReturn_t code_;
  std::string function_;
  std::string nvml_message_;
  std::string device_;
};

// NVML_ERROR_NO_PERMISSION: what() adds how to get the permission (run as
// root, as `nvidia-smi -lgc` / `-pl` need root, or go through the joulepiped
// daemon, which lets training run unprivileged).
class NvmlPermissionError : public NvmlError {
 public:
  using NvmlError::NvmlError;
};

class MigError : public GpuError {
 public:
  explicit MigError(const std::string& message) : GpuError(message) {}
};

class GpuArgumentError : public GpuError {
 public:
  explicit GpuArgumentError(const std::string& message) : GpuError(message) {}
};

}  // namespace joulepipe::gpu
