#include "clock_range.hpp"

#include <algorithm>

#include "joulepipe/gpu/error.hpp"

namespace joulepipe::gpu {

void CheckLockableRange(const std::string& device, const std::vector<int>& supported, int min_mhz,
                        int max_mhz) {
  if (min_mhz <= 0 || max_mhz < min_mhz) {
    throw GpuArgumentError("cannot lock the SM clock of " + device + " to [" +
                           std::to_string(min_mhz) + ", " + std::to_string(max_mhz) +
                           "] MHz: need 0 < min <= max");
  }
  for (const int mhz : {min_mhz, max_mhz}) {
    if (std::find(supported.begin(), supported.end(), mhz) == supported.end()) {
      const std::string range = supported.empty()
                                    ? std::string("none reported")
                                    : std::to_string(supported.back()) + ".." +
                                          std::to_string(supported.front()) + " MHz, " +
                                          std::to_string(supported.size()) + " steps";
      throw GpuArgumentError(std::to_string(mhz) + " MHz is not a supported SM clock of " + device +
                             " (supported: " + range + "; see ClockControl::SupportedSmClocks)");
    }
  }
}

}  // namespace joulepipe::gpu
