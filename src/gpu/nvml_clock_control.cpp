// MakeNvmlClockControl: gpu::ClockControl over gpu::Device setters, devices
// named by NVML index (ListAllDevices: every GPU of the node, regardless of
// CUDA_VISIBLE_DEVICES, as the daemon sees them).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "clock_range.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/nvml.hpp"

namespace joulepipe::gpu {

namespace {

class NvmlClockControl : public ClockControl {
 public:
  ~NvmlClockControl() override { Restore(); }

  std::string Describe() const override {
    try {
      return "nvml (" + Nvml().path + ")";
    } catch (...) {
      return "nvml (not loaded)";
    }
  }

  std::vector<int> SupportedSmClocks(int nvml_index) override { return Open(nvml_index).supported; }

  void SetLockedClocks(int nvml_index, int min_mhz, int max_mhz) override {
    Entry& entry = Open(nvml_index);
    CheckLockableRange(entry.device.Describe(), entry.supported, min_mhz, max_mhz);
    entry.device.SetLockedClocks(min_mhz, max_mhz);
    clocks_changed_.insert(nvml_index);
  }

  void ResetLockedClocks(int nvml_index) override {
    Open(nvml_index).device.ResetLockedClocks();
    clocks_changed_.erase(nvml_index);
  }

  void SetPowerLimit(int nvml_index, double watts) override {
    Open(nvml_index).device.SetPowerLimit(watts);
    power_changed_.insert(nvml_index);
  }

  void ResetPowerLimit(int nvml_index) override {
    Open(nvml_index).device.ResetPowerLimit();
    power_changed_.erase(nvml_index);
  }

  std::string WhyNotChangeable(int nvml_index, bool power_limit) override {
    try {
      if (power_limit) {
        ResetPowerLimit(nvml_index);
      } else {
        ResetLockedClocks(nvml_index);
      }
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  void Restore() noexcept override {
    // Keep a device listed if its reset fails, so a later Restore retries.
    for (auto it = clocks_changed_.begin(); it != clocks_changed_.end();) {
      try {
        devices_.at(*it).device.ResetLockedClocks();
        it = clocks_changed_.erase(it);
      } catch (...) {
        ++it;
      }
    }
    for (auto it = power_changed_.begin(); it != power_changed_.end();) {
      try {
        devices_.at(*it).device.ResetPowerLimit();
        it = power_changed_.erase(it);
      } catch (...) {
        ++it;
      }
    }
  }

 private:
  struct Entry {
    Device device;
    std::vector<int> supported;  // highest first
  };

  Entry& Open(int nvml_index) {
    const auto found = devices_.find(nvml_index);
    if (found != devices_.end()) return found->second;
    const Device device = DeviceByNvmlIndex(nvml_index);
    Entry entry{device, device.SupportedSmClocks()};
    std::sort(entry.supported.rbegin(), entry.supported.rend());
    if (entry.supported.empty()) {
      throw GpuError(device.Describe() + " reports no supported SM clocks");
    }
    return devices_.emplace(nvml_index, std::move(entry)).first->second;
  }

  std::map<int, Entry> devices_;
  std::set<int> clocks_changed_;
  std::set<int> power_changed_;
};

}  // namespace

std::unique_ptr<ClockControl> MakeNvmlClockControl() {
  return std::make_unique<NvmlClockControl>();
}

}  // namespace joulepipe::gpu
