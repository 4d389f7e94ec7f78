#include "errors.hpp"

#include <cctype>

namespace joulepipe::sim_nvml {
namespace {

struct ErrorInfo {
  nvmlReturn_t code;
  const char* name;
  const char* description;
};

constexpr ErrorInfo kErrors[] = {
    {NVML_SUCCESS, "NVML_SUCCESS", "Success"},
    {NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED", "NVML was not initialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "NVML_ERROR_INVALID_ARGUMENT", "An argument is invalid"},
    {NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED",
     "The device does not support this operation"},
    {NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION",
     "The caller lacks the permission for this operation"},
    {NVML_ERROR_ALREADY_INITIALIZED, "NVML_ERROR_ALREADY_INITIALIZED",
     "NVML is already initialized"},
    {NVML_ERROR_NOT_FOUND, "NVML_ERROR_NOT_FOUND", "The requested object was not found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE",
     "The buffer passed is too small"},
    {NVML_ERROR_INSUFFICIENT_POWER, "NVML_ERROR_INSUFFICIENT_POWER",
     "The device's external power is insufficient"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED", "The GPU driver is not loaded"},
    {NVML_ERROR_TIMEOUT, "NVML_ERROR_TIMEOUT", "The operation timed out"},
    {NVML_ERROR_IRQ_ISSUE, "NVML_ERROR_IRQ_ISSUE", "The kernel reported an interrupt problem"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "NVML_ERROR_LIBRARY_NOT_FOUND",
     "A required shared library was not found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND",
     "The requested function was not found in this library"},
    {NVML_ERROR_CORRUPTED_INFOROM, "NVML_ERROR_CORRUPTED_INFOROM",
     "The device's infoROM is corrupt"},
    {NVML_ERROR_GPU_IS_LOST, "NVML_ERROR_GPU_IS_LOST",
     "The GPU fell off the bus or is otherwise unreachable"},
    {NVML_ERROR_RESET_REQUIRED, "NVML_ERROR_RESET_REQUIRED", "The GPU must be reset"},
    {NVML_ERROR_OPERATING_SYSTEM, "NVML_ERROR_OPERATING_SYSTEM",
     "The operating system blocked the request"},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
     "The library and the kernel driver versions differ"},
    {NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE", "The GPU is in use"},
    {NVML_ERROR_MEMORY, "NVML_ERROR_MEMORY", "Out of memory"},
    {NVML_ERROR_NO_DATA, "NVML_ERROR_NO_DATA", "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
     "ECC is not supported while vGPU is active"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "NVML_ERROR_INSUFFICIENT_RESOURCES",
     "Not enough resources for the request"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "NVML_ERROR_FREQ_NOT_SUPPORTED",
     "The requested frequency is not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
     "The structure version of an argument is not supported"},
    {NVML_ERROR_DEPRECATED, "NVML_ERROR_DEPRECATED", "The requested feature is deprecated"},
    {NVML_ERROR_NOT_READY, "NVML_ERROR_NOT_READY", "The system is not ready for the request"},
    {NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN", "An unknown error occurred"},
};

const ErrorInfo* Find(nvmlReturn_t code) {
  for (const ErrorInfo& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

}  // namespace

const char* ErrorName(nvmlReturn_t code) {
  const ErrorInfo* e = Find(code);
  return e ? e->name : "NVML_ERROR_UNKNOWN";
}

const char* ErrorDescription(nvmlReturn_t code) {
  const ErrorInfo* e = Find(code);
  return e ? e->description : "An error code NVML does not define";
}

std::optional<nvmlReturn_t> ParseErrorName(std::string_view name) {
  for (const ErrorInfo& e : kErrors) {
    const std::string_view full = e.name;  // NVML_ERROR_X or NVML_SUCCESS
    if (EqualsIgnoreCase(name, full) || EqualsIgnoreCase(name, full.substr(5))) return e.code;
    if (full.starts_with("NVML_ERROR_") && EqualsIgnoreCase(name, full.substr(11))) return e.code;
  }
  return std::nullopt;
}

}  // namespace joulepipe::sim_nvml
