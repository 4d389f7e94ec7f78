// The process-wide NVML library: loaded with dlopen at run time (joulepipe
// builds and runs without CUDA or a driver) and nvmlInit'd once.
//
// Which library: $JOULEPIPE_NVML_LIBRARY if set and non-empty, else
// "libnvidia-ml.so.1" (the driver's, found by the dynamic loader). Point it at
// <build>/sim-nvml/libnvidia-ml.so.1 to run against the simulated GPUs.
//
// Lifetime and threads: the first call of Nvml() (from any thread; the
// initialisation is thread-safe) loads the library, resolves its symbols by
// name and calls nvmlInit_v2. The library then stays loaded and initialised
// until the process exits, when nvmlShutdown is called. This is the only
// global state of the `gpu` part. If loading fails, Nvml() throws and the
// next call tries again (the environment may have been fixed).
#pragma once

#include <string>

namespace joulepipe::gpu {

inline constexpr char kNvmlLibraryEnv[] = "JOULEPIPE_NVML_LIBRARY";
inline constexpr char kNvmlDefaultLibrary[] = "libnvidia-ml.so.1";

struct NvmlInfo {
  // What was passed to dlopen ($JOULEPIPE_NVML_LIBRARY or the default).
  std::string requested;
  // The file the loader actually opened (absolute where it can tell).
  std::string path;
  std::string driver_version;  // nvmlSystemGetDriverVersion, "" if unknown
  std::string nvml_version;    // nvmlSystemGetNVMLVersion, "" if unknown
  // True when `path` is joulepipe's simulated library (src/sim_nvml): every
  // figure read through it is simulated, not measured.
  bool simulated = false;
};

// Loads and initialises NVML if not yet done; returns what was loaded.
// Throws NvmlUnavailableError: the library cannot be loaded (the message
// carries dlerror's text and says: set JOULEPIPE_NVML_LIBRARY or install the
// NVIDIA driver; for testing without a GPU use build/sim-nvml/...), a
// required symbol is missing (named, with the library path), or nvmlInit
// failed (NVML's error string, e.g. "Driver Not Loaded").
const NvmlInfo& Nvml();

// One sentence for reports: where the figures come from, e.g.
//   "GPU figures measured via NVML (/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1,
//    driver 550.54.15)."
// or, for the simulated library,
//   "GPU figures from the simulated NVML library (/.../sim-nvml/libnvidia-ml.so.1),
//    not measured."
// Requires Nvml() to succeed (throws as it does).
std::string NvmlMethodology();

// NVML's text for `code` (nvmlErrorString; loads NVML if not yet done), or
// "NVML error <code>" if NVML cannot be loaded. Never throws.
std::string NvmlErrorText(int code);

}  // namespace joulepipe::gpu
