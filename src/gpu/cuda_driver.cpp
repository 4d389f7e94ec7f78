#include "joulepipe/gpu/cuda_driver.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "joulepipe/gpu/nvml.hpp"

namespace joulepipe::gpu {

namespace {

template <class Fn>
bool Resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn != nullptr;
}

std::string LibraryToLoad() {
  const char* env = std::getenv(kCudaLibraryEnv);
  if (env != nullptr && env[0] != '\0') return env;
  try {
    const NvmlInfo& nvml = Nvml();
    if (nvml.simulated) return nvml.path;
  } catch (const std::exception&) {
    // No NVML: the driver's CUDA library, if any.
  }
  return kCudaDefaultLibrary;
}

}  // namespace

std::optional<CudaDriver> LoadCudaDriver(std::string* why_not) {
  const std::string path = LibraryToLoad();
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    if (why_not != nullptr) {
      const char* why = dlerror();
      *why_not = "no CUDA driver (" + path +
                 " not loadable: " + (why != nullptr ? why : "unknown dlopen error") + ")";
    }
    return std::nullopt;
  }
  CudaDriver d;
  d.path = path;
  const char* missing = nullptr;
  if (!Resolve(handle, "cuEventCreate", d.event_create)) missing = "cuEventCreate";
  if (!Resolve(handle, "cuEventRecord", d.event_record)) missing = "cuEventRecord";
  if (!Resolve(handle, "cuEventQuery", d.event_query)) missing = "cuEventQuery";
  if (!Resolve(handle, "cuEventElapsedTime", d.event_elapsed)) missing = "cuEventElapsedTime";
  if (!Resolve(handle, "cuEventDestroy_v2", d.event_destroy)) missing = "cuEventDestroy_v2";
  Resolve(handle, "cuCtxGetCurrent", d.ctx_get_current);
  Resolve(handle, "cuCtxSetCurrent", d.ctx_set_current);
  if (missing != nullptr) {
    if (why_not != nullptr) *why_not = "the CUDA library " + path + " lacks " + missing;
    dlclose(handle);
    return std::nullopt;
  }
  return d;  // the library stays loaded: its functions are in use
}

}  // namespace joulepipe::gpu
