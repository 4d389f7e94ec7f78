// `joulepipe gpus` against the simulated NVML library: the listing, --json,
// CUDA_VISIBLE_DEVICES, MIG, faults and the messages when NVML is unusable.
#include <cstdlib>
#include <map>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

using testing::Result;
using testing::Spit;

constexpr char kUuid0[] = "GPU-11111111-aaaa-0000-0000-000000000000";
constexpr char kUuid1[] = "GPU-22222222-bbbb-0000-0000-000000000000";

// Sets the environment the joulepipe child process sees, and restores it.
class GpusCommandTest : public testing::ScratchDirTest {
 protected:
  GpusCommandTest() : ScratchDirTest("gpus") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    for (const char* name :
         {"JOULEPIPE_NVML_LIBRARY", "JOULEPIPE_SIM_NVML_CONFIG", "JOULEPIPE_SIM_NVML_GPU",
          "JOULEPIPE_SIM_NVML_COUNT", "CUDA_VISIBLE_DEVICES"}) {
      const char* value = std::getenv(name);
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      ::unsetenv(name);
    }
    ::setenv("JOULEPIPE_NVML_LIBRARY", JOULEPIPE_SIM_NVML, 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    ScratchDirTest::TearDown();
  }

  // Points the simulated library at a config file with `json`.
  void Config(const std::string& json) {
    const auto path = root_ / "sim-nvml.json";
    Spit(path, json);
    ::setenv("JOULEPIPE_SIM_NVML_CONFIG", path.c_str(), 1);
  }
  void TwoH100s(const std::string& extra = "") {
    Config(std::string(R"({"gpu": "h100-sxm", "count": 2, "devices": [{"uuid": ")") + kUuid0 +
           R"("}, {"uuid": ")" + kUuid1 + R"("}])" + extra + "}");
  }

  static void ExpectIn(const std::string& text, const std::string& needle) {
    EXPECT_NE(text.find(needle), std::string::npos) << "'" << needle << "' not in:\n" << text;
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(GpusCommandTest, ListsEveryGpuWithTheMethodology) {
  TwoH100s();
  const Result r = Run("gpus");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* needle : {
           "2 GPUs visible (CUDA_VISIBLE_DEVICES unset: all GPUs)",
           "GPU 0 (NVML 0): NVIDIA H100",
           "GPU 1 (NVML 1): NVIDIA H100",
           ", Hopper\n",
           kUuid0,
           kUuid1,
           " MHz now, max 1980 MHz",
           "..1980 MHz, ",
           " clocks (at memory 2619 MHz)",
           "power limit     700.0 W (default 700.0 W, range 200.0 W..700.0 W, enforced 700.0 W)",
           " W (field NVML_FI_DEV_POWER_INSTANT)",
           "energy counter  yes (",
           "MIG mode        disabled",
           "throttle        gpu_idle",
           "Methodology: GPU figures from the simulated NVML library (",
           "sim-nvml/libnvidia-ml.so.1), not measured on a GPU.",
       }) {
    ExpectIn(r.out, needle);
  }
}

TEST_F(GpusCommandTest, JsonHasEveryFigure) {
  TwoH100s();
  const Result r = Run("gpus --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ExpectIn(j["methodology"].get<std::string>(), "simulated NVML library");
  EXPECT_EQ(j["nvml"]["simulated"], true);
  EXPECT_EQ(j["nvml"]["requested"], JOULEPIPE_SIM_NVML);
  EXPECT_EQ(j["nvml"]["driver_version"], "550.54.15");
  EXPECT_TRUE(j["cuda_visible_devices"].is_null());
  ASSERT_EQ(j["gpus"].size(), 2u);
  const nlohmann::json& g = j["gpus"][1];
  EXPECT_EQ(g["visible_index"], 1);
  EXPECT_EQ(g["nvml_index"], 1);
  EXPECT_EQ(g["uuid"], kUuid1);
  EXPECT_EQ(g["architecture"], "Hopper");
  EXPECT_EQ(g["mig_enabled"], false);
  EXPECT_EQ(g["sm_clock_max_mhz"], 1980);
  EXPECT_EQ(g["memory_clock_mhz"], 2619);
  EXPECT_EQ(g["supported_sm_clocks"]["max_mhz"], 1980);
  EXPECT_EQ(g["supported_sm_clocks"]["at_memory_clock_mhz"], 2619);
  EXPECT_EQ(g["supported_sm_clocks"]["count"], g["supported_sm_clocks"]["mhz"].size());
  EXPECT_EQ(g["power_limit_w"]["default"], 700.0);
  EXPECT_EQ(g["power_limit_w"]["min"], 200.0);
  EXPECT_GT(g["power_w"].get<double>(), 0.0);
  EXPECT_EQ(g["power_source"], "field NVML_FI_DEV_POWER_INSTANT");
  EXPECT_EQ(g["energy_counter"], true);
  EXPECT_GT(g["energy_j"].get<double>(), 0.0);
  EXPECT_EQ(g["throttle_reasons"], nlohmann::json::array({"gpu_idle"}));
  EXPECT_TRUE(g["errors"].empty());
}

TEST_F(GpusCommandTest, CudaVisibleDevicesSelectsAndOrders) {
  TwoH100s();
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-2222", 1);
  const Result r = Run("gpus --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cuda_visible_devices"], "GPU-2222");
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["visible_index"], 0);
  EXPECT_EQ(j["gpus"][0]["nvml_index"], 1);

  ::setenv("CUDA_VISIBLE_DEVICES", "1,5,0", 1);
  const Result text = Run("gpus");
  ASSERT_EQ(text.code, 0) << text.err;
  ExpectIn(text.out, "1 GPU visible (CUDA_VISIBLE_DEVICES=\"1,5,0\")");
  ExpectIn(text.out, "GPU 0 (NVML 1): ");
  ExpectIn(text.out, "note: CUDA_VISIBLE_DEVICES entry 2 (\"5\") is not a device index");
}

TEST_F(GpusCommandTest, NoVisibleGpuIsAnEmptyListNotAnError) {
  TwoH100s();
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const Result r = Run("gpus");
  EXPECT_EQ(r.code, 0) << r.err;
  ExpectIn(r.out, "no GPU visible (CUDA_VISIBLE_DEVICES=\"\")");
  ExpectIn(r.out, "Methodology: ");
  const Result j = Run("gpus --json");
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_TRUE(nlohmann::json::parse(j.out)["gpus"].empty());
}

TEST_F(GpusCommandTest, MigInstanceRefusedAndMigGpuShown) {
  Config(R"({"gpu": "a100-sxm4-80gb", "count": 2, "devices": [{}, {"mig": true}]})");
  const Result listed = Run("gpus");
  ASSERT_EQ(listed.code, 0) << listed.err;
  ExpectIn(listed.out, "MIG mode        enabled (joulepipe will not control this GPU)");
  ExpectIn(listed.out, "MIG mode        disabled");

  ::setenv("CUDA_VISIBLE_DEVICES", "MIG-0e4f3c1b-1111-2222-3333-444455556666", 1);
  const Result refused = Run("gpus");
  EXPECT_EQ(refused.code, 2);
  EXPECT_EQ(refused.out, "");
  ExpectIn(refused.err, "joulepipe: error: CUDA_VISIBLE_DEVICES=");
  ExpectIn(refused.err, "names the MIG instance");
}

TEST_F(GpusCommandTest, NoEnergyCounterSaysSo) {
  Config(R"({"gpu": "v100-sxm2", "faults": {"energy_counter_not_supported": true}})");
  const Result r = Run("gpus");
  ASSERT_EQ(r.code, 0) << r.err;
  ExpectIn(r.out, "energy counter  no (power sampling instead)");
  ExpectIn(r.out, ", Volta\n");
  const nlohmann::json j = nlohmann::json::parse(Run("gpus --json").out);
  EXPECT_EQ(j["gpus"][0]["energy_counter"], false);
  EXPECT_TRUE(j["gpus"][0]["energy_j"].is_null());
  EXPECT_TRUE(j["gpus"][0]["errors"].empty());  // not supported is not an error
  EXPECT_EQ(j["gpus"][0]["not_supported"], nlohmann::json::array({"energy_j"}));
}

TEST_F(GpusCommandTest, FailingQueryIsShownAndExitsTwo) {
  Config(
      R"({"gpu": "h100-sxm", "faults": {"unknown_error": ["nvmlDeviceGetPowerManagementLimit"]}})");
  const Result r = Run("gpus");
  EXPECT_EQ(r.code, 2);
  ExpectIn(r.out, "power limit     (nvmlDeviceGetPowerManagementLimit failed on GPU 0 (GPU-");
  ExpectIn(r.out, "(NVML error 999)");
  ExpectIn(r.out, "energy counter  yes");  // the other figures are there
  ExpectIn(r.err, "joulepipe: error: GPU 0 (NVML 0) answered some queries with an error");
  const Result j = Run("gpus --json");
  EXPECT_EQ(j.code, 2);
  const nlohmann::json g = nlohmann::json::parse(j.out)["gpus"][0];
  EXPECT_TRUE(g["power_limit_w"].is_null());
  ExpectIn(g["errors"]["power_limit_w"].get<std::string>(), "nvmlDeviceGetPowerManagementLimit");
}

TEST_F(GpusCommandTest, LostGpuIsAClearError) {
  Config(R"({"gpu": "h100-sxm", "count": 2, "devices": [{}, {"faults": {"gpu_lost_at_s": 0}}]})");
  const Result r = Run("gpus");
  EXPECT_EQ(r.code, 2);
  ExpectIn(r.err, "joulepipe: error: nvmlDeviceGetUUID failed on GPU 1: ");
  ExpectIn(r.err, "(NVML error 15)");
  ExpectIn(r.err, "fell off the bus");
}

TEST_F(GpusCommandTest, MissingLibraryIsAClearErrorNotACrash) {
  ::setenv("JOULEPIPE_NVML_LIBRARY", (root_ / "no-such-libnvidia-ml.so.1").c_str(), 1);
  const Result r = Run("gpus");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  ExpectIn(r.err, "joulepipe: error: cannot load the NVML library JOULEPIPE_NVML_LIBRARY=");
  ExpectIn(r.err, "no-such-libnvidia-ml.so.1");
  ExpectIn(r.err, "build/sim-nvml/libnvidia-ml.so.1");
}

TEST_F(GpusCommandTest, DriverNotLoadedIsAClearError) {
  Config(R"({"init_error": "driver_not_loaded"})");
  const Result r = Run("gpus --json");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  ExpectIn(r.err, "joulepipe: error: nvmlInit_v2 failed");
  ExpectIn(r.err, "kernel driver is not running");
}

TEST_F(GpusCommandTest, HelpTeachesTheLibraryVariable) {
  const Result r = Run("gpus --help");
  EXPECT_EQ(r.code, 0);
  ExpectIn(r.out, "JOULEPIPE_NVML_LIBRARY");
  ExpectIn(r.out, "CUDA_VISIBLE_DEVICES");
  ExpectIn(r.out, "--json");
}

}  // namespace
}  // namespace joulepipe::cli
