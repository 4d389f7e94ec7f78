// The ClockControl contract's check on a locked-clock range, shared by both
// implementations (direct NVML and the joulepiped client): 0 < min <= max and
// both are clocks the GPU supports. Nothing is clamped.
#pragma once

#include <string>
#include <vector>

namespace joulepipe::gpu {

// Throws GpuArgumentError naming `device` (e.g. "GPU 0 (GPU-...)") if the
// range is not lockable. `supported` is highest first.
void CheckLockableRange(const std::string& device, const std::vector<int>& supported, int min_mhz,
                        int max_mhz);

}  // namespace joulepipe::gpu
