// CUDA_VISIBLE_DEVICES resolution, without NVML; throttle reason, power
// source and architecture names.
#include "joulepipe/gpu/visible_devices.hpp"

#include <gtest/gtest.h>

#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"
#include "sim_nvml_child.hpp"

namespace joulepipe::gpu {
namespace {

const std::vector<DeviceId> kFour = {
    {0, "GPU-aaaa1111-0000-0000-0000-000000000000"},
    {1, "GPU-aaaa2222-0000-0000-0000-000000000000"},
    {2, "GPU-bbbb3333-0000-0000-0000-000000000000"},
    {3, "GPU-cccc4444-0000-0000-0000-000000000000"},
};

std::vector<unsigned> Indices(const char* visible) {
  return ResolveVisibleDevices(std::string(visible), kFour).nvml_indices;
}

TEST(VisibleDevicesTest, UnsetMeansEveryDeviceInNvmlOrder) {
  const VisibleDevices v = ResolveVisibleDevices(std::nullopt, kFour);
  EXPECT_EQ(v.nvml_indices, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(v.stopped, "");
}

TEST(VisibleDevicesTest, EmptyMeansNoDeviceWithoutANote) {
  for (const char* text : {"", "  "}) {
    const VisibleDevices v = ResolveVisibleDevices(std::string(text), kFour);
    EXPECT_TRUE(v.nvml_indices.empty()) << text;
    EXPECT_EQ(v.stopped, "") << text;
  }
}

TEST(VisibleDevicesTest, IndicesInTheListedOrder) {
  EXPECT_EQ(Indices("2,0"), (std::vector<unsigned>{2, 0}));
  EXPECT_EQ(Indices(" 3 , 1 "), (std::vector<unsigned>{3, 1}));
  EXPECT_EQ(Indices("1"), (std::vector<unsigned>{1}));
}

TEST(VisibleDevicesTest, FullUuidAndUniquePrefix) {
  EXPECT_EQ(Indices("GPU-cccc4444-0000-0000-0000-000000000000,GPU-bbbb"),
            (std::vector<unsigned>{3, 2}));
  EXPECT_EQ(Indices("GPU-aaaa2,0"), (std::vector<unsigned>{1, 0}));
}

TEST(VisibleDevicesTest, AmbiguousPrefixStops) {
  const VisibleDevices v = ResolveVisibleDevices(std::string("3,GPU-aaaa,0"), kFour);
  EXPECT_EQ(v.nvml_indices, (std::vector<unsigned>{3}));
  EXPECT_CONTAINS(v.stopped, "entry 2 (\"GPU-aaaa\")");
  EXPECT_CONTAINS(v.stopped, "prefix of 2 GPUs");
  EXPECT_CONTAINS(v.stopped, "ignored, as CUDA does");
}

TEST(VisibleDevicesTest, FirstInvalidEntryStopsParsing) {
  struct Case {
    const char* text;
    std::vector<unsigned> visible;
    const char* why;
  } cases[] = {
      {"0,x,1", {0}, "neither an index nor a GPU-<uuid>"},
      {"1,7,2", {1}, "not a device index (there are 4 GPUs)"},
      {"0,,1", {0}, "is empty"},
      {"2,2", {2}, "lists GPU 2 a second time"},
      {"1,GPU-aaaa1111-0000-0000-0000-000000000000-x", {1}, "matches no GPU"},
      {"GPU-dddd,0", {}, "matches no GPU"},
      {"-1,0", {}, "neither an index"},
      {"99999999999999999999", {}, "not a device index"},
  };
  for (const Case& c : cases) {
    const VisibleDevices v = ResolveVisibleDevices(std::string(c.text), kFour);
    EXPECT_EQ(v.nvml_indices, c.visible) << c.text;
    EXPECT_CONTAINS(v.stopped, c.why) << c.text;
  }
}

TEST(VisibleDevicesTest, MigInstanceIsRefused) {
  try {
    ResolveVisibleDevices(std::string("0,MIG-4f3c1b2a-0000-0000-0000-000000000000"), kFour);
    FAIL() << "no MigError";
  } catch (const MigError& e) {
    EXPECT_CONTAINS(e.what(), "MIG instance \"MIG-4f3c1b2a");
    EXPECT_CONTAINS(e.what(), "whole GPUs");
  }
  EXPECT_THROW(ResolveVisibleDevices(std::string("MIG-GPU-aaaa1111/1/0"), kFour), MigError);
  // After an invalid entry nothing more is read, MIG included (as CUDA).
  EXPECT_EQ(Indices("1,x,MIG-abc"), (std::vector<unsigned>{1}));
}

TEST(VisibleDevicesTest, MigErrorIsAnInputError) {
  try {
    ResolveVisibleDevices(std::string("MIG-x"), kFour);
    FAIL();
  } catch (const model::InputError&) {
  }
}

TEST(ThrottleReasonsTest, NamesTheSetBitsLowestFirst) {
  EXPECT_TRUE(ThrottleReasons{0}.Names().empty());
  EXPECT_EQ((ThrottleReasons{nvmlClocksThrottleReasonGpuIdle}.Names()),
            (std::vector<std::string>{"gpu_idle"}));
  EXPECT_EQ(
      (ThrottleReasons{nvmlClocksThrottleReasonHwThermalSlowdown |
                       nvmlClocksThrottleReasonSwPowerCap | (1ULL << 40)}
           .Names()),
      (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown", "unknown_0x10000000000"}));
  EXPECT_EQ(ThrottleReasons{0x1ffULL}.Names().size(), 9u);
}

TEST(NamesTest, PowerSourcesAndArchitectures) {
  EXPECT_EQ(PowerSourceName(PowerSource::kFieldInstant), "field NVML_FI_DEV_POWER_INSTANT");
  EXPECT_EQ(PowerSourceName(PowerSource::kFieldAverage), "field NVML_FI_DEV_POWER_AVERAGE");
  EXPECT_EQ(PowerSourceName(PowerSource::kPowerUsage), "nvmlDeviceGetPowerUsage");
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_HOPPER), "Hopper");
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_AMPERE), "Ampere");
  EXPECT_EQ(ArchitectureName(NVML_DEVICE_ARCH_VOLTA), "Volta");
  EXPECT_EQ(ArchitectureName(0xffffffffu), "unknown (4294967295)");
}

TEST(EnergyReadingTest, MillijoulesToJoules) {
  EXPECT_DOUBLE_EQ(EnergyReading{123456}.joules(), 123.456);
  EXPECT_DOUBLE_EQ((PowerReading{71250, PowerSource::kPowerUsage}.watts()), 71.25);
}

TEST(NvmlErrorTest, MessageNamesFunctionDeviceCodeAndHint) {
  const NvmlError e(NVML_ERROR_GPU_IS_LOST, "nvmlDeviceGetPowerUsage", "GPU is lost",
                    "GPU 1 (GPU-x)", "reboot");
  EXPECT_STREQ(e.what(),
               "nvmlDeviceGetPowerUsage failed on GPU 1 (GPU-x): GPU is lost (NVML error 15); "
               "reboot");
  EXPECT_EQ(e.code(), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(e.function(), "nvmlDeviceGetPowerUsage");
  EXPECT_EQ(e.nvml_message(), "GPU is lost");
  EXPECT_EQ(e.device(), "GPU 1 (GPU-x)");
}

}  // namespace
}  // namespace joulepipe::gpu
