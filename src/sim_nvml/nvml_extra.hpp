// NVML functions the simulated library exports beyond our ABI declaration
// (include/joulepipe/gpu/nvml_api.hpp), for third-party clients such as
// pynvml: the v1 entry points and a few common queries. Layouts and values
// follow NVIDIA's public API documentation.
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

}  // extern "C"
