// NVML functions the simulated library exports beyond our ABI declaration
// (include/joulepipe/gpu/nvml_api.hpp), for third-party clients such as
// pynvml: the v1 entry points, a few common queries, and what Zeus's GPU
// layer calls (versioned temperature, C2C mode; persistence mode and memory
// locked clocks are in nvml_api.hpp, since joulepiped calls them too). Layouts and values follow
// NVIDIA's public API documentation and pynvml's ctypes declarations.
#pragma once

#include "joulepipe/gpu/nvml_api.hpp"

extern "C" {

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
  unsigned int version;  // nvmlMemory_v2 below
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_v2_t;

// Struct version tag: sizeof | (2 << 24).
#define NVML_SIM_MEMORY_V2 (static_cast<unsigned>(sizeof(nvmlMemory_v2_t)) | (2u << 24))

// nvmlDeviceGetTemperatureV: the caller sets version and sensorType.
typedef struct nvmlTemperature_v1_st {
  unsigned int version;  // NVML_SIM_TEMPERATURE_V1
  nvmlTemperatureSensors_t sensorType;
  int temperature;  // degrees C
} nvmlTemperature_v1_t;
typedef nvmlTemperature_v1_t nvmlTemperature_t;

// Struct version tag: sizeof | (1 << 24) = 0x100000C, pynvml's nvmlTemperature_v1.
#define NVML_SIM_TEMPERATURE_V1 (static_cast<unsigned>(sizeof(nvmlTemperature_v1_t)) | (1u << 24))

// nvmlDeviceGetC2cModeInfoV (no version field: pynvml passes the bare struct).
typedef struct nvmlC2cModeInfo_v1_st {
  unsigned int isC2cEnabled;
} nvmlC2cModeInfo_v1_t;

// nvmlFieldValue_t::scopeId of the power fields (NVML_FI_DEV_POWER_*).
#define NVML_POWER_SCOPE_GPU 0u     // the GPU (board) power
#define NVML_POWER_SCOPE_MODULE 1u  // GPU + CPU module (Grace Hopper)
#define NVML_POWER_SCOPE_MEMORY 2u  // the GPU's memory subsystem

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor);
nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, unsigned int* mode);
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, unsigned int* pState);
nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t* temperature);
nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t* c2cModeInfo);

}  // extern "C"
