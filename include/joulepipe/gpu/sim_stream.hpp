// A stream of the simulated GPU, for CPU harnesses that stand in for a GPU's
// work (the Megatron CPU example's --emulate-kernel-ms, tests): emulated
// kernels run on the simulated library's device thread, asynchronously to
// the host, and each kernel's duration and power follow the SM clock in
// force while it runs (include/joulepipe/sim_nvml/device_stream.hpp,
// docs/sim-nvml.md). Only the simulated NVML library has streams; with a
// real driver there is nothing to emulate.
//
//   gpu::SimulatedStream stream(0);         // NVML index 0 of the simulated library
//   stream.Launch(0.010, /*compute_fraction=*/1.0);   // returns at once
//   stream.Synchronize();                   // waits for the device
#pragma once

#include <memory>

namespace joulepipe::gpu {

class SimulatedStream {
 public:
  // A stream on NVML device `nvml_index` with a launch queue of `depth`
  // kernels (0: the library's default, 1,024). Throws NvmlUnavailableError
  // when NVML cannot be loaded or is not the simulated library (naming the
  // fix: JOULEPIPE_NVML_LIBRARY=<build>/sim-nvml/libnvidia-ml.so.1), and
  // GpuError for an index the library does not have.
  explicit SimulatedStream(unsigned nvml_index, unsigned depth = 0);
  ~SimulatedStream();  // waits for the stream's kernels
  SimulatedStream(const SimulatedStream&) = delete;
  SimulatedStream& operator=(const SimulatedStream&) = delete;

  // Queues a kernel taking `seconds_at_max_clock` at the GPU's highest clock
  // (> 0, at most an hour), of which `compute_fraction` (0..1) slows with a
  // lower clock, drawing power for `activity` (>= 0). Returns at once unless
  // the launch queue is full. Throws GpuError naming the bad value.
  void Launch(double seconds_at_max_clock, double compute_fraction = 1, double activity = 1);
  // Waits until the device has run everything queued.
  void Synchronize();
  // The stream as the CUDA driver API names it (a CUstream of the simulated
  // library): what Agent::SetStream takes, as PyTorch's cuda_stream.
  void* handle() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace joulepipe::gpu
