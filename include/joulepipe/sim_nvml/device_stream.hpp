// The simulated GPU's streams (issue 58, item 1): emulated kernels run on a
// device thread per stream, asynchronously to the host, and CUDA events
// named as the CUDA driver API names them, so that code written for a real
// GPU (where the host runs ahead of the device) runs unchanged against the
// simulated library. Not NVML; only the simulated library exports these.
//
//   * A stream has a launch queue of bounded depth: a launch or an event
//     record returns at once unless the queue is full, when the host waits
//     for room (as a real driver does at about a thousand kernels).
//   * A kernel's duration and power follow the clock in force WHILE it runs
//     (re-read at least every kMaxSliceS): at SM clock f its remaining work
//     runs at the rate 1 / (T x ((1 - beta) + beta x fmax / f)), T its time
//     at the GPU's highest clock and beta its compute share; its power is
//     the physics model's for its activity at the clock in force (the
//     device is "busy" in the settings history, so NVML's energy counter
//     and power readings follow it at their own periods). Between kernels
//     the device waits at its clock (blocked power). A locked-clock change
//     takes the configured switch latency, as for every setting.
//   * An event recorded on a stream completes when the device reaches it;
//     its device time is the Unix time of that moment.
//   * With a call log configured, each kernel is one line
//     ("function":"kernel", its start and end Unix times, the clock at its
//     start and end, the device's exact energy while it ran: the ground
//     truth a measurement is checked against).
// Handles are opaque; one device per stream (nvmlJoulepipeSimStreamCreate).
// Every function is thread-safe. CUresult values are the driver's:
// CUDA_SUCCESS 0, CUDA_ERROR_INVALID_VALUE 1, CUDA_ERROR_NOT_INITIALIZED 3,
// CUDA_ERROR_INVALID_HANDLE 400, CUDA_ERROR_NOT_READY 600.
#pragma once

#include "joulepipe/gpu/nvml_api.hpp"

struct SimStream;       // opaque: the simulated library's
struct SimEventHandle;  // opaque: the simulated library's

namespace joulepipe::sim_nvml {

using CUresult = int;
using CUstream = ::SimStream*;
using CUevent = ::SimEventHandle*;

inline constexpr CUresult kCudaSuccess = 0;
inline constexpr CUresult kCudaErrorInvalidValue = 1;
inline constexpr CUresult kCudaErrorNotInitialized = 3;
inline constexpr CUresult kCudaErrorInvalidHandle = 400;
inline constexpr CUresult kCudaErrorNotReady = 600;

inline constexpr unsigned kDefaultLaunchQueueDepth = 1024;
inline constexpr double kMaxSliceS = 1e-3;  // how often a running kernel re-reads the clock

}  // namespace joulepipe::sim_nvml

extern "C" {

// A stream on `device` whose launch queue holds `depth` items (1..65536; 0:
// kDefaultLaunchQueueDepth). NVML must be initialised.
int nvmlJoulepipeSimStreamCreate(nvmlDevice_t device, unsigned depth,
                                 joulepipe::sim_nvml::CUstream* stream);
// Waits for the stream's work, then ends its device thread.
int nvmlJoulepipeSimStreamDestroy(joulepipe::sim_nvml::CUstream stream);
// Queues an emulated kernel: `seconds_at_max_clock` > 0 (at most an hour),
// `compute_fraction` in [0, 1], `activity` >= 0.
int nvmlJoulepipeSimLaunchKernel(joulepipe::sim_nvml::CUstream stream, double seconds_at_max_clock,
                                 double compute_fraction, double activity);

// The CUDA driver API's names.
int cuInit(unsigned flags);
int cuStreamSynchronize(joulepipe::sim_nvml::CUstream stream);
int cuEventCreate(joulepipe::sim_nvml::CUevent* event, unsigned flags);
int cuEventRecord(joulepipe::sim_nvml::CUevent event, joulepipe::sim_nvml::CUstream stream);
int cuEventQuery(joulepipe::sim_nvml::CUevent event);
int cuEventSynchronize(joulepipe::sim_nvml::CUevent event);
int cuEventElapsedTime(float* milliseconds, joulepipe::sim_nvml::CUevent start,
                       joulepipe::sim_nvml::CUevent end);
int cuEventDestroy(joulepipe::sim_nvml::CUevent event);
int cuEventDestroy_v2(joulepipe::sim_nvml::CUevent event);

}  // extern "C"
