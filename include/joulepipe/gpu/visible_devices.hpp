// CUDA_VISIBLE_DEVICES, as the CUDA driver reads it (pure functions; no NVML).
//
// Rules (those of the CUDA runtime; documented in docs/gpu-backend.md):
//   * unset                    every device, in NVML order;
//   * "" (set but empty)       no device;
//   * a comma list of entries, whitespace around entries ignored, each
//       - a device index "0", "3" (NVML index = CUDA's default order on
//         machines where CUDA_DEVICE_ORDER=PCI_BUS_ID; see the doc);
//       - "GPU-<uuid>" in full, or any prefix of it that matches exactly one
//         device ("GPU-8e5c" as CUDA accepts);
//       - "MIG-..." (a MIG instance): refused with MigError, since joulepipe
//         sets clocks and power limits of whole GPUs;
//     visible devices in the listed order. As CUDA does, parsing stops at the
//     first invalid entry (not a number or a GPU-/MIG- UUID, an index out of
//     range, a UUID matching no or several devices, a device listed twice):
//     the entries before it are visible, the rest ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace joulepipe::gpu {

inline constexpr char kCudaVisibleDevicesEnv[] = "CUDA_VISIBLE_DEVICES";

// The identity of one NVML device, as the resolution needs it.
struct DeviceId {
  unsigned nvml_index = 0;
  std::string uuid;  // "GPU-..." as nvmlDeviceGetUUID gives it
};

struct VisibleDevices {
  std::vector<unsigned> nvml_indices;  // the visible devices, in visible order
  // Empty when every entry was valid; else why parsing stopped, naming the
  // entry, e.g. "CUDA_VISIBLE_DEVICES entry 3 (\"7\") is not a device (4 GPUs);
  // it and the entries after it are ignored, as CUDA does".
  std::string stopped;
};

// Resolves `visible` (nullopt = variable unset) against `devices` (all NVML
// devices, in NVML index order). Throws MigError naming the entry if it
// reaches a MIG-... entry before an invalid one.
VisibleDevices ResolveVisibleDevices(const std::optional<std::string>& visible,
                                     const std::vector<DeviceId>& devices);

// $CUDA_VISIBLE_DEVICES, nullopt when unset.
std::optional<std::string> CudaVisibleDevicesFromEnv();

}  // namespace joulepipe::gpu
