#include "joulepipe/gpu/sim_stream.hpp"

#include <dlfcn.h>

#include <cmath>
#include <string>

#include "joulepipe/gpu/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/sim_nvml/device_stream.hpp"
#include "nvml_library.hpp"

namespace joulepipe::gpu {

struct SimulatedStream::Impl {
  decltype(&::nvmlJoulepipeSimStreamCreate) create = nullptr;
  decltype(&::nvmlJoulepipeSimStreamDestroy) destroy = nullptr;
  decltype(&::nvmlJoulepipeSimLaunchKernel) launch = nullptr;
  decltype(&::cuStreamSynchronize) synchronize = nullptr;
  sim_nvml::CUstream stream = nullptr;
};

namespace {

template <class Fn>
void Resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

SimulatedStream::SimulatedStream(unsigned nvml_index, unsigned depth)
    : impl_(std::make_unique<Impl>()) {
  const internal::LoadedNvml& nvml = internal::Library();
  Resolve(nvml.handle, "nvmlJoulepipeSimStreamCreate", impl_->create);
  Resolve(nvml.handle, "nvmlJoulepipeSimStreamDestroy", impl_->destroy);
  Resolve(nvml.handle, "nvmlJoulepipeSimLaunchKernel", impl_->launch);
  Resolve(nvml.handle, "cuStreamSynchronize", impl_->synchronize);
  if (!impl_->create || !impl_->destroy || !impl_->launch || !impl_->synchronize) {
    throw NvmlUnavailableError(
        "the NVML library " + nvml.info.path +
        " has no simulated streams (emulated kernels are the simulated GPU's): set "
        "JOULEPIPE_NVML_LIBRARY=<build>/sim-nvml/libnvidia-ml.so.1, or run the real work on "
        "the GPU");
  }
  nvmlDevice_t device = nullptr;
  const nvmlReturn_t found = nvml.api.device_get_handle_by_index(nvml_index, &device);
  if (found != NVML_SUCCESS) internal::ThrowNvmlError(found, "nvmlDeviceGetHandleByIndex", "");
  const int made = impl_->create(device, depth, &impl_->stream);
  if (made != sim_nvml::kCudaSuccess) {
    throw GpuError(model::Format("cannot create a simulated stream on GPU %u (CUDA error %d)",
                                 nvml_index, made));
  }
}

SimulatedStream::~SimulatedStream() {
  if (impl_ && impl_->stream != nullptr) impl_->destroy(impl_->stream);
}

void SimulatedStream::Launch(double seconds_at_max_clock, double compute_fraction,
                             double activity) {
  if (!(seconds_at_max_clock > 0 && seconds_at_max_clock <= 3600)) {
    throw GpuError(model::Format(
        "an emulated kernel takes > 0 and at most 3600 s at the highest clock (got %g s)",
        seconds_at_max_clock));
  }
  if (!(compute_fraction >= 0 && compute_fraction <= 1)) {
    throw GpuError(model::Format(
        "an emulated kernel's compute_fraction is a share in [0, 1] (got %g)", compute_fraction));
  }
  if (!(activity >= 0) || !std::isfinite(activity)) {
    throw GpuError(model::Format("an emulated kernel's activity is >= 0 (got %g)", activity));
  }
  const int result = impl_->launch(impl_->stream, seconds_at_max_clock, compute_fraction, activity);
  if (result != sim_nvml::kCudaSuccess) {
    throw GpuError(model::Format("the simulated GPU refused a kernel (CUDA error %d)", result));
  }
}

void SimulatedStream::Synchronize() {
  impl_->synchronize(impl_->stream);
}

void* SimulatedStream::handle() const {
  return impl_->stream;
}

}  // namespace joulepipe::gpu
