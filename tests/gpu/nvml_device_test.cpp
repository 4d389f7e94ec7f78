// The NVML backend against the simulated libnvidia-ml.so.1: the real code
// path (dlopen, dlsym, nvmlInit, every query and setter), one child process
// per test (sim_nvml_child.hpp says why).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "sim_nvml_child.hpp"

namespace joulepipe::gpu {
namespace {

using testing::Env;
using testing::RunInChild;
using testing::SimEnv;
using testing::TempFile;

constexpr char kUuid0[] = "GPU-11111111-aaaa-0000-0000-000000000000";
constexpr char kUuid1[] = "GPU-22222222-bbbb-0000-0000-000000000000";
constexpr char kUuid2[] = "GPU-22223333-cccc-0000-0000-000000000000";

// Three H100s with known UUIDs (1 and 2 share the prefix "GPU-2222").
std::string ThreeH100s(const std::string& extra = "") {
  return std::string(R"({"gpu": "h100-sxm", "count": 3, "devices": [{"uuid": ")") + kUuid0 +
         R"("}, {"uuid": ")" + kUuid1 + R"("}, {"uuid": ")" + kUuid2 + R"("}])" + extra + "}";
}

std::vector<unsigned> NvmlIndices(const DeviceList& list) {
  std::vector<unsigned> out;
  for (const Device& d : list.devices) out.push_back(d.nvml_index());
  return out;
}

// ---- Loading -------------------------------------------------------------------

TEST(NvmlLoadTest, LoadsTheSimulatedLibraryAndSaysSo) {
  RunInChild(SimEnv(""), [] {
    const NvmlInfo& info = Nvml();
    EXPECT_EQ(info.requested, JOULEPIPE_SIM_NVML);
    EXPECT_TRUE(info.simulated);
    EXPECT_CONTAINS(info.path, "sim-nvml/libnvidia-ml.so");
    EXPECT_EQ(info.driver_version, "550.54.15");
    EXPECT_FALSE(info.nvml_version.empty());
    EXPECT_CONTAINS(NvmlMethodology(), "simulated NVML library");
    EXPECT_CONTAINS(NvmlMethodology(), info.path);
    EXPECT_CONTAINS(NvmlMethodology(), "not measured");
  });
}

TEST(NvmlLoadTest, MissingLibraryNamedByTheVariable) {
  RunInChild(SimEnv("", {{"JOULEPIPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}}), [] {
    try {
      Nvml();
      ADD_FAILURE() << "loaded a nonexistent library";
    } catch (const NvmlUnavailableError& e) {
      EXPECT_CONTAINS(e.what(), "JOULEPIPE_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1");
      EXPECT_CONTAINS(e.what(), "No such file");  // dlerror's text
      EXPECT_CONTAINS(e.what(), "build/sim-nvml/libnvidia-ml.so.1");
    }
  });
}

TEST(NvmlLoadTest, NoDriverMessageForTheDefaultLibrary) {
  RunInChild(SimEnv("", {{"JOULEPIPE_NVML_LIBRARY", std::nullopt}}), [] {
    if (void* real = dlopen(kNvmlDefaultLibrary, RTLD_NOW | RTLD_LOCAL)) {
      dlclose(real);
      GTEST_SKIP() << "this machine has an NVIDIA driver";
    }
    try {
      Nvml();
      ADD_FAILURE() << "loaded NVML without a driver";
    } catch (const NvmlUnavailableError& e) {
      EXPECT_CONTAINS(e.what(), "no NVIDIA driver found (libnvidia-ml.so.1 not loadable: ");
      EXPECT_CONTAINS(e.what(), "set JOULEPIPE_NVML_LIBRARY");
      EXPECT_CONTAINS(e.what(), "install the NVIDIA driver");
      EXPECT_CONTAINS(e.what(), "build/sim-nvml/libnvidia-ml.so.1");
    }
  });
}

TEST(NvmlLoadTest, MissingRequiredSymbolIsNamedWithThePath) {
  RunInChild(SimEnv("", {{"JOULEPIPE_NVML_LIBRARY", "libm.so.6"}}), [] {
    try {
      Nvml();
      ADD_FAILURE() << "libm passed for NVML";
    } catch (const NvmlUnavailableError& e) {
      EXPECT_CONTAINS(e.what(), "lacks the required function nvmlInit_v2");
      EXPECT_CONTAINS(e.what(), "libm");
    }
  });
}

TEST(NvmlLoadTest, FailedLoadIsRetriedOnTheNextCall) {
  RunInChild(SimEnv("", {{"JOULEPIPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}}), [] {
    EXPECT_THROW(Nvml(), NvmlUnavailableError);
    ::setenv(kNvmlLibraryEnv, JOULEPIPE_SIM_NVML, 1);
    EXPECT_TRUE(Nvml().simulated);
  });
}

TEST(NvmlLoadTest, DriverNotLoadedAtInit) {
  TempFile config(R"({"init_error": "driver_not_loaded"})");
  RunInChild(SimEnv(config.path()), [] {
    try {
      ListVisibleDevices();
      ADD_FAILURE() << "listed devices without a driver";
    } catch (const NvmlUnavailableError& e) {
      EXPECT_CONTAINS(e.what(), "nvmlInit_v2 failed");
      EXPECT_CONTAINS(e.what(), "(NVML error 9)");
      EXPECT_CONTAINS(e.what(), "kernel driver is not running");
      EXPECT_CONTAINS(e.what(), "nvidia-smi");
    }
  });
}

TEST(NvmlLoadTest, ConcurrentFirstUseLoadsOnce) {
  RunInChild(SimEnv(""), [] {
    std::vector<const NvmlInfo*> seen(8);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < seen.size(); ++i) {
      threads.emplace_back([&seen, i] { seen[i] = &Nvml(); });
    }
    for (std::thread& t : threads) t.join();
    for (const NvmlInfo* info : seen) EXPECT_EQ(info, seen.front());
  });
}

// ---- Listing and CUDA_VISIBLE_DEVICES --------------------------------------------

TEST(DeviceListTest, EveryDeviceWithNameUuidAndIndices) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path()), [] {
    const DeviceList list = ListVisibleDevices();
    ASSERT_EQ(list.devices.size(), 3u);
    EXPECT_EQ(list.visible_devices_note, "");
    const char* uuids[] = {kUuid0, kUuid1, kUuid2};
    for (int i = 0; i < 3; ++i) {
      const Device& d = list.devices[i];
      EXPECT_EQ(d.visible_index(), i);
      EXPECT_EQ(d.nvml_index(), static_cast<unsigned>(i));
      EXPECT_EQ(d.uuid(), uuids[i]);
      EXPECT_CONTAINS(d.name(), "H100");
      EXPECT_EQ(d.architecture(), "Hopper");
      EXPECT_FALSE(d.mig_enabled());
      EXPECT_EQ(d.Describe(), "GPU " + std::to_string(i) + " (" + uuids[i] + ")");
    }
    const std::vector<Device> all = ListAllDevices();
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[2].visible_index(), -1);
    EXPECT_EQ(all[2].uuid(), kUuid2);
  });
}

TEST(DeviceListTest, SimpleOverridesGiveDefaultUuids) {
  RunInChild(
      SimEnv("", {{"JOULEPIPE_SIM_NVML_GPU", "a100-sxm4-80gb"}, {"JOULEPIPE_SIM_NVML_COUNT", "4"}}),
      [] {
        const DeviceList list = ListVisibleDevices();
        ASSERT_EQ(list.devices.size(), 4u);
        std::set<std::string> uuids;
        for (const Device& d : list.devices) {
          EXPECT_EQ(d.uuid().rfind("GPU-", 0), 0u) << d.uuid();
          EXPECT_EQ(d.architecture(), "Ampere");
          uuids.insert(d.uuid());
        }
        EXPECT_EQ(uuids.size(), 4u);
      });
}

TEST(DeviceListTest, CudaVisibleDevicesIndicesInOrder) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", "2,0"}}), [] {
    const DeviceList list = ListVisibleDevices();
    EXPECT_EQ(NvmlIndices(list), (std::vector<unsigned>{2, 0}));
    ASSERT_EQ(list.devices.size(), 2u);
    EXPECT_EQ(list.devices[0].visible_index(), 0);
    EXPECT_EQ(list.devices[1].visible_index(), 1);
    EXPECT_EQ(list.devices[0].uuid(), kUuid2);
  });
}

TEST(DeviceListTest, CudaVisibleDevicesUuidAndPrefix) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", std::string(kUuid2) + ",GPU-1111"}}),
             [] {
               EXPECT_EQ(NvmlIndices(ListVisibleDevices()), (std::vector<unsigned>{2, 0}));
             });
}

TEST(DeviceListTest, CudaVisibleDevicesStopsAtAnInvalidEntry) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", "1,GPU-2222,0"}}), [] {
    const DeviceList list = ListVisibleDevices();
    EXPECT_EQ(NvmlIndices(list), (std::vector<unsigned>{1}));
    EXPECT_CONTAINS(list.visible_devices_note, "\"GPU-2222\"");
    EXPECT_CONTAINS(list.visible_devices_note, "prefix of 2 GPUs");
  });
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", "0,5"}}), [] {
    const DeviceList list = ListVisibleDevices();
    EXPECT_EQ(NvmlIndices(list), (std::vector<unsigned>{0}));
    EXPECT_CONTAINS(list.visible_devices_note, "there are 3 GPUs");
  });
}

TEST(DeviceListTest, EmptyCudaVisibleDevicesMeansNone) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", ""}}), [] {
    const DeviceList list = ListVisibleDevices();
    EXPECT_TRUE(list.devices.empty());
    EXPECT_EQ(list.visible_devices_note, "");
  });
}

TEST(DeviceListTest, MigInstanceInCudaVisibleDevicesIsRefused) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", "MIG-0e4f3c1b-1111-2222-3333-4444"}}),
             [] {
               try {
                 ListVisibleDevices(MigPolicy::kList);
                 ADD_FAILURE() << "MIG instance accepted";
               } catch (const MigError& e) {
                 EXPECT_CONTAINS(e.what(), "MIG instance \"MIG-0e4f3c1b");
                 EXPECT_CONTAINS(e.what(), "cannot be set per MIG instance");
               }
             });
}

TEST(DeviceListTest, GpuInMigModeIsRefusedOrListed) {
  TempFile config(
      R"({"gpu": "a100-sxm4-80gb", "count": 2, "devices": [{}, {"mig": true}],
          "permissions": {"clocks": true, "power_limit": true}})");
  RunInChild(SimEnv(config.path()), [] {
    try {
      ListVisibleDevices();
      ADD_FAILURE() << "GPU in MIG mode accepted";
    } catch (const MigError& e) {
      EXPECT_CONTAINS(e.what(), "GPU 1 (GPU-");
      EXPECT_CONTAINS(e.what(), "is in MIG mode");
      EXPECT_CONTAINS(e.what(), "nvidia-smi -i 1 -mig 0");
    }
    const DeviceList list = ListVisibleDevices(MigPolicy::kList);
    ASSERT_EQ(list.devices.size(), 2u);
    EXPECT_FALSE(list.devices[0].mig_enabled());
    const Device& mig = list.devices[1];
    EXPECT_TRUE(mig.mig_enabled());
    EXPECT_THROW(mig.SetLockedClocks(1000, 1200), MigError);
    EXPECT_THROW(mig.ResetLockedClocks(), MigError);
    EXPECT_THROW(mig.SetPowerLimit(300), MigError);
    EXPECT_THROW(mig.ResetPowerLimit(), MigError);
    // Reads still work: `joulepipe gpus` shows the GPU.
    EXPECT_GT(mig.MaxClock(ClockDomain::kSm), 0);
  });
  // Hidden by CUDA_VISIBLE_DEVICES, a MIG GPU does not matter.
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", "0"}}),
             [] { EXPECT_EQ(ListVisibleDevices().devices.size(), 1u); });
}

// ---- Energy and power -----------------------------------------------------------

TEST(DeviceReadTest, EnergyCounterIsMonotonic) {
  TempFile config(ThreeH100s(R"(, "energy_update_period_ms": 10)"));
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    EXPECT_TRUE(d.HasEnergyCounter());
    const std::optional<EnergyReading> first = d.ReadEnergy();
    ASSERT_TRUE(first.has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    const std::optional<EnergyReading> second = d.ReadEnergy();
    ASSERT_TRUE(second.has_value());
    EXPECT_GT(second->millijoules, first->millijoules);
    EXPECT_DOUBLE_EQ(second->joules(), static_cast<double>(second->millijoules) / 1000.0);
    // An idle H100 draws tens of watts: 60 ms is joules, not kilojoules.
    const double window_j = second->joules() - first->joules();
    EXPECT_LT(window_j, 100.0);
  });
}

TEST(DeviceReadTest, EnergyCounterNotSupported) {
  TempFile config(R"({"gpu": "h100-sxm", "faults": {"energy_counter_not_supported": true}})");
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    EXPECT_FALSE(d.HasEnergyCounter());
    EXPECT_EQ(d.ReadEnergy(), std::nullopt);
    // The monitor's fallback: power still reads.
    EXPECT_GT(d.InstantPower().milliwatts, 0u);
  });
}

TEST(DeviceReadTest, InstantAndAveragePowerFromFieldValues) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    const PowerReading instant = d.InstantPower();
    EXPECT_EQ(instant.source, PowerSource::kFieldInstant);
    EXPECT_GT(instant.watts(), 10.0);
    EXPECT_LT(instant.watts(), 700.0);
    const PowerReading average = d.AveragePower();
    EXPECT_EQ(average.source, PowerSource::kFieldAverage);
    EXPECT_GT(average.watts(), 10.0);
    EXPECT_LT(average.watts(), 700.0);
  });
}

TEST(DeviceReadTest, PowerFallsBackToPowerUsageWithoutFieldValues) {
  TempFile config(R"({"gpu": "h100-sxm", "faults": {"field_values_not_supported": true}})");
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    const PowerReading instant = d.InstantPower();
    EXPECT_EQ(instant.source, PowerSource::kPowerUsage);
    EXPECT_GT(instant.watts(), 10.0);
    EXPECT_EQ(d.AveragePower().source, PowerSource::kPowerUsage);
  });
}

// ---- Clocks and limits ------------------------------------------------------------

TEST(DeviceReadTest, ClocksAndTheirRanges) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    const std::vector<int> memory = d.SupportedMemoryClocks();
    ASSERT_FALSE(memory.empty());
    EXPECT_TRUE(std::is_sorted(memory.rbegin(), memory.rend()));
    const std::vector<int> sm = d.SupportedSmClocks();
    ASSERT_GT(sm.size(), 10u);
    EXPECT_TRUE(std::is_sorted(sm.rbegin(), sm.rend()));            // highest first
    EXPECT_EQ(std::adjacent_find(sm.begin(), sm.end()), sm.end());  // no duplicates
    EXPECT_EQ(sm, d.SupportedGraphicsClocks(memory.front()));
    EXPECT_EQ(d.MaxClock(ClockDomain::kSm), 1980);
    EXPECT_EQ(sm.front(), d.MaxClock(ClockDomain::kSm));
    EXPECT_EQ(d.MaxClock(ClockDomain::kMemory), memory.front());
    EXPECT_EQ(d.CurrentClock(ClockDomain::kMemory), memory.front());
    EXPECT_GT(d.CurrentClock(ClockDomain::kSm), 0);
    EXPECT_LE(d.CurrentClock(ClockDomain::kSm), d.MaxClock(ClockDomain::kSm));
    EXPECT_EQ(d.CurrentClock(ClockDomain::kGraphics), d.CurrentClock(ClockDomain::kSm));
    // Idle, as the simulated GPU has no load: the idle reason is set.
    const std::vector<std::string> reasons = d.CurrentThrottleReasons().Names();
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), "gpu_idle"), reasons.end());
    EXPECT_GT(d.TemperatureC(), 20u);
    EXPECT_EQ(d.GetUtilization().gpu_percent, 0u);
    // A memory clock the GPU does not have: NVML's NOT_FOUND, precisely.
    try {
      d.SupportedGraphicsClocks(1);
      ADD_FAILURE() << "clocks for a 1 MHz memory clock";
    } catch (const NvmlError& e) {
      EXPECT_EQ(e.code(), NVML_ERROR_NOT_FOUND);
      EXPECT_EQ(e.function(), "nvmlDeviceGetSupportedGraphicsClocks");
    }
  });
}

TEST(DeviceReadTest, PowerLimitsAndConstraints) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path()), [] {
    const PowerLimits l = ListVisibleDevices().devices.at(0).GetPowerLimits();
    EXPECT_DOUBLE_EQ(l.min_w, 200);
    EXPECT_DOUBLE_EQ(l.max_w, 700);
    EXPECT_DOUBLE_EQ(l.default_w, 700);
    EXPECT_DOUBLE_EQ(l.current_w, 700);
    EXPECT_DOUBLE_EQ(l.enforced_w, 700);
  });
}

// ---- Setters ----------------------------------------------------------------------

TEST(DeviceControlTest, SettersWithoutPermissionSayHowToGetIt) {
  TempFile config(ThreeH100s());
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(1);
    const auto expect_permission = [&](const std::function<void()>& call, const char* function) {
      try {
        call();
        ADD_FAILURE() << function << " succeeded without permission";
      } catch (const NvmlPermissionError& e) {
        EXPECT_EQ(e.code(), NVML_ERROR_NO_PERMISSION);
        EXPECT_EQ(e.function(), function);
        EXPECT_EQ(e.device(), std::string("GPU 1 (") + kUuid1 + ")");
        EXPECT_CONTAINS(e.what(), std::string(function) + " failed on GPU 1 (" + kUuid1 + "): ");
        EXPECT_CONTAINS(e.what(), "(NVML error 4)");
        EXPECT_CONTAINS(e.what(), "run as root");
        EXPECT_CONTAINS(e.what(), "nvidia-smi -lgc");
        EXPECT_CONTAINS(e.what(), "joulepiped daemon (docs/daemon.md)");
      }
    };
    expect_permission([&] { d.SetLockedClocks(1000, 1500); }, "nvmlDeviceSetGpuLockedClocks");
    expect_permission([&] { d.ResetLockedClocks(); }, "nvmlDeviceResetGpuLockedClocks");
    expect_permission([&] { d.SetPowerLimit(500); }, "nvmlDeviceSetPowerManagementLimit");
    expect_permission([&] { d.ResetPowerLimit(); }, "nvmlDeviceSetPowerManagementLimit");
  });
}

TEST(DeviceControlTest, LockedClocksAndPowerLimitWithPermission) {
  TempFile config(ThreeH100s(R"(, "permissions": {"clocks": true, "power_limit": true})"));
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    d.SetLockedClocks(900, 1200);
    EXPECT_LE(d.CurrentClock(ClockDomain::kSm), 1200);
    d.ResetLockedClocks();

    d.SetPowerLimit(450.5);
    EXPECT_DOUBLE_EQ(d.GetPowerLimits().current_w, 450.5);
    d.SetPowerLimit(200);  // the bounds themselves are accepted
    d.SetPowerLimit(700);
    d.SetPowerLimit(321);
    d.ResetPowerLimit();
    EXPECT_DOUBLE_EQ(d.GetPowerLimits().current_w, 700);
    // The other GPUs are untouched.
    EXPECT_DOUBLE_EQ(ListVisibleDevices().devices.at(1).GetPowerLimits().current_w, 700);
  });
}

TEST(DeviceControlTest, OutOfRangeValuesAreRefusedBeforeNvml) {
  TempFile config(ThreeH100s(R"(, "permissions": {"clocks": true, "power_limit": true})"));
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    try {
      d.SetPowerLimit(800);
      ADD_FAILURE() << "800 W accepted";
    } catch (const GpuArgumentError& e) {
      EXPECT_CONTAINS(e.what(), "power limit 800.000 W for GPU 0");
      EXPECT_CONTAINS(e.what(), "[200.000 W, 700.000 W]");
    }
    EXPECT_THROW(d.SetPowerLimit(199.9), GpuArgumentError);
    EXPECT_THROW(d.SetPowerLimit(std::nan("")), GpuArgumentError);
    EXPECT_THROW(d.SetLockedClocks(1500, 1000), GpuArgumentError);
    EXPECT_THROW(d.SetLockedClocks(0, 1000), GpuArgumentError);
    EXPECT_DOUBLE_EQ(d.GetPowerLimits().current_w, 700);
  });
}

// ---- Injected faults ----------------------------------------------------------------

TEST(DeviceFaultTest, GpuLostWhileInUse) {
  // GPU 1 is lost 0.5 s after the config epoch, which is "now".
  const auto epoch = std::chrono::system_clock::now();
  const double epoch_s = std::chrono::duration<double>(epoch.time_since_epoch()).count();
  TempFile config(R"({"gpu": "h100-sxm", "count": 2, "epoch_unix_s": )" + std::to_string(epoch_s) +
                  R"(, "devices": [{}, {"faults": {"gpu_lost_at_s": 0.5}}]})");
  RunInChild(SimEnv(config.path()), [epoch] {
    const DeviceList list = ListVisibleDevices();
    if (std::chrono::system_clock::now() > epoch + std::chrono::milliseconds(450)) {
      GTEST_SKIP() << "the machine is too slow to open the GPUs within 0.5 s";
    }
    ASSERT_EQ(list.devices.size(), 2u);
    const Device& lost = list.devices[1];
    EXPECT_TRUE(lost.ReadEnergy().has_value());  // healthy until then
    std::this_thread::sleep_until(epoch + std::chrono::milliseconds(600));
    try {
      lost.ReadEnergy();
      ADD_FAILURE() << "read a lost GPU";
    } catch (const NvmlError& e) {
      EXPECT_EQ(e.code(), NVML_ERROR_GPU_IS_LOST);
      EXPECT_EQ(e.function(), "nvmlDeviceGetTotalEnergyConsumption");
      EXPECT_CONTAINS(e.what(), "failed on " + lost.Describe());
      EXPECT_CONTAINS(e.what(), e.nvml_message());
      EXPECT_CONTAINS(e.what(), "(NVML error 15)");
      EXPECT_CONTAINS(e.what(), "fell off the bus");
    }
    EXPECT_THROW(lost.InstantPower(), NvmlError);
    EXPECT_THROW(lost.GetPowerLimits(), NvmlError);
    // The healthy GPU still answers.
    EXPECT_TRUE(list.devices[0].ReadEnergy().has_value());
  });
}

TEST(DeviceFaultTest, GpuLostBeforeOpening) {
  TempFile config(R"({"gpu": "h100-sxm", "count": 2,
                      "devices": [{}, {"faults": {"gpu_lost_at_s": 0}}]})");
  RunInChild(SimEnv(config.path()), [] {
    try {
      ListVisibleDevices();
      ADD_FAILURE() << "opened a lost GPU";
    } catch (const NvmlError& e) {
      EXPECT_EQ(e.code(), NVML_ERROR_GPU_IS_LOST);
      EXPECT_EQ(e.device(), "GPU 1");
    }
  });
  // Hidden by CUDA_VISIBLE_DEVICES (by index), the lost GPU is never opened.
  RunInChild(SimEnv(config.path(), {{"CUDA_VISIBLE_DEVICES", "0"}}),
             [] { EXPECT_EQ(ListVisibleDevices().devices.size(), 1u); });
}

TEST(DeviceFaultTest, UnknownErrorOfOneFunction) {
  TempFile config(R"({"gpu": "h100-sxm", "faults": {"unknown_error":
                      ["nvmlDeviceGetFieldValues", "nvmlDeviceGetTotalEnergyConsumption"]}})");
  RunInChild(SimEnv(config.path()), [] {
    const Device d = ListVisibleDevices().devices.at(0);
    try {
      d.InstantPower();
      ADD_FAILURE() << "no error";
    } catch (const NvmlError& e) {
      EXPECT_EQ(e.code(), NVML_ERROR_UNKNOWN);
      EXPECT_EQ(e.function(), "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)");
      EXPECT_CONTAINS(e.what(), "(NVML error 999)");
    }
    // An error is not "no energy counter": ReadEnergy throws, it does not
    // return nullopt (the monitor must not silently fall back).
    try {
      d.ReadEnergy();
      ADD_FAILURE() << "no error";
    } catch (const NvmlError& e) {
      EXPECT_EQ(e.code(), NVML_ERROR_UNKNOWN);
    }
    EXPECT_GT(d.MaxClock(ClockDomain::kSm), 0);  // other functions work
  });
}

}  // namespace
}  // namespace joulepipe::gpu
