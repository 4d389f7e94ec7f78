// `joulepipe calibrate-wait` against the simulated NVML library, whose
// "wait" section gives the blocked power at the lowest clock and the clock
// switch latency: the routine must measure them back, write a file plan
// --wait-model reads, reset the clocks, stop its load command and refuse to
// replace an existing file.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "process_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::Slurp;
using testing::Spit;

class CalibrateWaitTest : public ScratchDirTest {
 protected:
  CalibrateWaitTest() : ScratchDirTest("calibrate-wait") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    ::setenv("JOULEPIPE_NVML_LIBRARY", JOULEPIPE_SIM_NVML, 1);
    ::unsetenv("JOULEPIPE_SIM_NVML_GPU");
    ::unsetenv("JOULEPIPE_SIM_NVML_COUNT");
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  }
  void TearDown() override {
    ::unsetenv("JOULEPIPE_NVML_LIBRARY");
    ::unsetenv("JOULEPIPE_SIM_NVML_CONFIG");
    ScratchDirTest::TearDown();
  }

  // One A100 waiting on a peer all the time (utilization 0), clocks allowed,
  // every setter call logged; `wait` is the config's "wait" section.
  void Gpu(const json& wait, bool clocks = true) {
    json config = {{"permissions", {{"clocks", clocks}}},
                   {"energy_update_period_ms", 20},
                   {"call_log", (root_ / "calls.jsonl").string()},
                   {"load", {{{"start_s", -1e9}, {"end_s", 1e9}, {"utilization", 0.0}}}}};
    if (!wait.is_null()) config["wait"] = wait;
    Spit(root_ / "sim.json", config.dump());
    ::setenv("JOULEPIPE_SIM_NVML_CONFIG", (root_ / "sim.json").c_str(), 1);
  }
  Result Calibrate(const std::string& extra = "") const {
    return Run("calibrate-wait --clocks 1410,810,210 --dwell-s 0.3 --settle-s 0.05 --out " +
               Quote(root_ / "wait.json") + " " + extra);
  }
  // The setter calls the simulated library logged, in order.
  std::vector<std::string> Calls() const {
    std::vector<std::string> names;
    std::ifstream in(root_ / "calls.jsonl");
    for (std::string line; std::getline(in, line);)
      names.push_back(json::parse(line)["function"].get<std::string>());
    return names;
  }
};

TEST_F(CalibrateWaitTest, MeasuresTheSimulatedBlockedPowerAndSwitchLatency) {
  Gpu({{"blocked_w_at_min_clock", 60.0}, {"clock_switch_ms", 20}});
  const Result r = Calibrate();
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const model::WaitModel m = model::ReadWaitModelFile((root_ / "wait.json").string());
  const double p_block = physics::FindGpu("a100-sxm4-80gb").p_block_w;
  ASSERT_EQ(m.points.size(), 3u);
  EXPECT_EQ(m.points[0].mhz, 1410);
  EXPECT_EQ(m.points[2].mhz, 210);
  EXPECT_NEAR(m.points[0].blocked_w, p_block, 0.01 * p_block);
  EXPECT_NEAR(m.points[1].blocked_w, (60 + p_block) / 2, 0.01 * p_block);
  EXPECT_NEAR(m.points[2].blocked_w, 60, 0.6);
  EXPECT_GE(m.switch_latency_s, 0.019);
  EXPECT_LT(m.switch_latency_s, 0.2);
  EXPECT_EQ(m.gpu, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(m.wait_mhz(), 210);
  EXPECT_NE(r.out.find("wait model  calibrated ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("waiting at 210 MHz saves 23."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("simulated"), std::string::npos) << r.out;
  // Every lock is undone: the last call resets the clocks.
  const std::vector<std::string> calls = Calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), "nvmlDeviceResetGpuLockedClocks");

  // plan reads what calibrate-wait wrote.
  const fs::path profile =
      fs::path(JOULEPIPE_SOURCE_DIR) / "data/profiles/gpt3-175b+a100_sxm_bf16.csv";
  const Result plan = Run("plan --profile " + Quote(profile) +
                          " --schedule 1f1b --stages 8 --microbatches 12 --p-block 83.64 "
                          "--max-plans 3 --wait-model " +
                          Quote(root_ / "wait.json") + " --out " + Quote(root_ / "plans"));
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("wait model  calibrated ("), std::string::npos) << plan.out;
}

TEST_F(CalibrateWaitTest, AFlatGpuSavesNothing) {
  Gpu(nullptr);
  const Result r = Calibrate();
  ASSERT_EQ(r.code, 0) << r.err;
  const model::WaitModel m = model::ReadWaitModelFile((root_ / "wait.json").string());
  EXPECT_EQ(m.wait_mhz(), 0);
  EXPECT_NE(r.out.find("lowering saves nothing"), std::string::npos) << r.out;
}

TEST_F(CalibrateWaitTest, NeverReplacesAFileUnlessForced) {
  Gpu({{"blocked_w_at_min_clock", 60.0}});
  Spit(root_ / "wait.json", "mine");
  const Result r = Calibrate();
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exists; pass --force"), std::string::npos) << r.err;
  EXPECT_EQ(Slurp(root_ / "wait.json"), "mine");
  EXPECT_TRUE(Calls().empty());  // refused before touching the GPU
  const Result forced = Calibrate("--force");
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_NE(Slurp(root_ / "wait.json").find("\"wait_model\""), std::string::npos);
}

TEST_F(CalibrateWaitTest, StartsAndStopsTheLoadCommand) {
  Gpu({{"blocked_w_at_min_clock", 60.0}});
  const fs::path pid_file = root_ / "load.pid";
  const Result r = Calibrate("--warmup-s 0.1 -- sh -c " +
                             Quote("echo $$ > " + pid_file.string() + "; exec sleep 60"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("load: command: sh -c"), std::string::npos) << r.out;
  const pid_t pid = std::stoi(Slurp(pid_file));
  EXPECT_NE(::kill(pid, 0), 0) << "the load command must be stopped";
  EXPECT_NE(Slurp(root_ / "wait.json").find("command: sh -c"), std::string::npos);
}

TEST_F(CalibrateWaitTest, ALoadCommandThatEndsEarlyIsAnErrorAndNothingIsWritten) {
  Gpu({{"blocked_w_at_min_clock", 60.0}});
  const Result r = Calibrate("--warmup-s 1 -- sh -c 'exit 3'");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("exited with code 3"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root_ / "wait.json"));
}

TEST_F(CalibrateWaitTest, ErrorsNameTheFix) {
  Gpu(nullptr, /*clocks=*/false);
  Result r = Calibrate();
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--daemon"), std::string::npos) << r.err;  // how to get permission
  EXPECT_FALSE(fs::exists(root_ / "wait.json"));
  Gpu(nullptr);
  r = Run("calibrate-wait --clocks 1410,1234 --out " + Quote(root_ / "wait.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("1234 MHz is not a supported SM clock"), std::string::npos) << r.err;
  r = Run("calibrate-wait --clocks 1410,fast --out " + Quote(root_ / "wait.json"));
  EXPECT_NE(r.err.find("--clocks must be SM clocks in MHz"), std::string::npos) << r.err;
  r = Run("calibrate-wait --gpu 3 --out " + Quote(root_ / "wait.json"));
  EXPECT_NE(r.err.find("--gpu 3 is not visible"), std::string::npos) << r.err;
  r = Run("calibrate-wait");
  EXPECT_NE(r.err.find("--out is required"), std::string::npos) << r.err;
}

TEST_F(CalibrateWaitTest, CtrlCResetsTheClocksStopsTheLoadAndWritesNothing) {
  Gpu({{"blocked_w_at_min_clock", 60.0}});
  const fs::path pid_file = root_ / "load.pid", out = root_ / "out.txt", err = root_ / "err.txt";
  const pid_t pid = testing::StartCli(
      {"calibrate-wait", "--clocks", "1410,810,210", "--dwell-s", "5", "--settle-s", "0",
       "--warmup-s", "0.1", "--out", (root_ / "wait.json").string(), "--", "sh", "-c",
       "echo $$ > " + pid_file.string() + "; exec sleep 60"},
      out, err);
  // Interrupted while the first clock is being measured.
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        return Slurp(out).find("load: ") != std::string::npos && fs::exists(pid_file) &&
               !Calls().empty();
      },
      20));
  ::kill(pid, SIGINT);
  const int status = testing::WaitStatus(pid, 20);
  EXPECT_EQ(testing::ShellCode(status), 130) << Slurp(err);
  EXPECT_NE(Slurp(err).find("interrupted"), std::string::npos) << Slurp(err);
  EXPECT_FALSE(fs::exists(root_ / "wait.json"));
  EXPECT_EQ(Calls().back(), "nvmlDeviceResetGpuLockedClocks");
  const pid_t load = std::stoi(Slurp(pid_file));
  EXPECT_NE(::kill(load, 0), 0) << "the load command must be stopped";
}

}  // namespace
}  // namespace joulepipe::cli
