// The CUDA driver API's event functions, loaded at run time with dlopen like
// NVML (joulepipe builds and runs without CUDA): what the runtime needs to
// mark a point on the training's stream and learn when the GPU reached it
// (runtime/device_markers.hpp), without synchronising the training thread.
//
// Which library: $JOULEPIPE_CUDA_LIBRARY if set and non-empty; else, when
// the loaded NVML library is joulepipe's simulated one, that library (it
// simulates the GPU's streams and events too: sim_nvml/device_stream.hpp);
// else "libcuda.so.1" (the driver's; a PyTorch process has it loaded
// already, so dlopen returns the same library and context).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace joulepipe::gpu {

inline constexpr char kCudaLibraryEnv[] = "JOULEPIPE_CUDA_LIBRARY";
inline constexpr char kCudaDefaultLibrary[] = "libcuda.so.1";

// Opaque driver handles as the driver API passes them.
using CudaResult = int;     // CUresult; 0 = CUDA_SUCCESS
using CudaEvent = void*;    // CUevent
using CudaStream = void*;   // CUstream (PyTorch: torch.cuda.current_stream().cuda_stream)
using CudaContext = void*;  // CUcontext
inline constexpr CudaResult kCudaNotReady = 600;  // CUDA_ERROR_NOT_READY

struct CudaDriver {
  std::string path;  // the library loaded
  CudaResult (*event_create)(CudaEvent*, unsigned) = nullptr;
  CudaResult (*event_record)(CudaEvent, CudaStream) = nullptr;
  CudaResult (*event_query)(CudaEvent) = nullptr;
  CudaResult (*event_elapsed)(float*, CudaEvent, CudaEvent) = nullptr;
  CudaResult (*event_destroy)(CudaEvent) = nullptr;
  // Optional (the simulated library has no contexts): the training thread's
  // context, made current on the thread that queries the events.
  CudaResult (*ctx_get_current)(CudaContext*) = nullptr;
  CudaResult (*ctx_set_current)(CudaContext) = nullptr;
};

// Loads the driver's event functions, or says why not in `why_not` (no such
// library, a symbol missing): the caller then marks the host's points.
std::optional<CudaDriver> LoadCudaDriver(std::string* why_not);

// CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC are not used: markers are
// timed (elapsed time between two) and never waited on by a blocking sync.
inline constexpr unsigned kCudaEventDefault = 0;

}  // namespace joulepipe::gpu
