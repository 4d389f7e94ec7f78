// NVML return codes: their names and descriptions (our wording).
#pragma once

#include <optional>
#include <string_view>

#include "joulepipe/gpu/nvml_api.hpp"

namespace joulepipe::sim_nvml {

// "NVML_SUCCESS", "NVML_ERROR_GPU_IS_LOST", ...; "NVML_ERROR_UNKNOWN" for a
// code NVML does not define.
const char* ErrorName(nvmlReturn_t code);

// A short human description of every code (nvmlErrorString); a generic one
// for codes NVML does not define. Never null; static storage.
const char* ErrorDescription(nvmlReturn_t code);

// Accepts "NVML_ERROR_DRIVER_NOT_LOADED", "ERROR_DRIVER_NOT_LOADED" or
// "driver_not_loaded" (any case); nullopt if it names no code.
std::optional<nvmlReturn_t> ParseErrorName(std::string_view name);

}  // namespace joulepipe::sim_nvml
