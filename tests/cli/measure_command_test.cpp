// `joulepipe measure` and `joulepipe power` as separate processes against
// the simulated NVML library: the acceptance (an idle GPU's energy over
// `measure -- sleep 1` within 2 % of the model's idle power x duration),
// exit-code passthrough, --csv, --cpu over a fake RAPL tree, bad flags, a
// missing library, and `power` stopped by SIGINT printing its summary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::Slurp;
using testing::Spit;

// The environment the joulepipe child sees: set here, restored afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ScopedEnv(const char* name, std::nullptr_t) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class MeasureCommandTest : public ScratchDirTest {
 protected:
  MeasureCommandTest()
      : ScratchDirTest("measure"),
        library_("JOULEPIPE_NVML_LIBRARY", std::string(JOULEPIPE_SIM_NVML)),
        config_("JOULEPIPE_SIM_NVML_CONFIG", nullptr),
        gpu_("JOULEPIPE_SIM_NVML_GPU", nullptr),
        count_("JOULEPIPE_SIM_NVML_COUNT", nullptr),
        visible_("CUDA_VISIBLE_DEVICES", nullptr),
        rapl_("JOULEPIPE_RAPL_ROOT", "/nonexistent/powercap") {}

  static nlohmann::json LastJsonLine(const std::string& out) {
    std::string text = out;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    const std::size_t nl = text.rfind('\n');
    return nlohmann::json::parse(nl == std::string::npos ? text : text.substr(nl + 1));
  }

  void MakeRapl(uint64_t package_uj) {
    const fs::path zone = root_ / "powercap" / "intel-rapl:0";
    fs::create_directories(zone);
    Spit(zone / "name", "package-0\n");
    Spit(zone / "energy_uj", std::to_string(package_uj) + "\n");
    Spit(zone / "max_energy_range_uj", "262143328850\n");
  }

  ScopedEnv library_, config_, gpu_, count_, visible_, rapl_;
};

// The acceptance: an idle simulated A100 over `sleep 1`.
TEST_F(MeasureCommandTest, SleepOneMatchesTheIdleModelWithinTwoPercent) {
  const double idle_w = physics::FindGpu("a100-sxm4-80gb").idle_w;
  for (int run = 0; run < 3; ++run) {
    const Result r = Run("measure --json -- sleep 1");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = LastJsonLine(r.out);
    const double duration = j["duration_s"];
    const double energy = j["gpus"][0]["energy_j"];
    const double predicted = idle_w * duration;
    EXPECT_NEAR(duration, 1.0, 0.1);
    EXPECT_NEAR(energy, predicted, 0.02 * predicted) << "run " << run;
    EXPECT_EQ(j["gpus"][0]["source"], "counter");
    EXPECT_EQ(j["gpus"][0]["aligned"], true);
    EXPECT_EQ(j["approximate"], false);
    EXPECT_EQ(j["simulated"], true);
    EXPECT_EQ(j["scope"], "GPU-only");
    EXPECT_EQ(j["exit_code"], 0);
    EXPECT_EQ(j["command"], nlohmann::json::array({"sleep", "1"}));
    EXPECT_DOUBLE_EQ(j["total_energy_j"].get<double>(), energy);
    EXPECT_TRUE(j["cpu_energy_j"].is_null());
    const std::string how = j["methodology"];
    for (const char* needle : {"NVML energy counter", "GPU-only", "simulated NVML library",
                               "CPU and DRAM not measured"}) {
      EXPECT_NE(how.find(needle), std::string::npos) << needle << " not in " << how;
    }
  }
}

TEST_F(MeasureCommandTest, TextReportGoesToStderrAndNamesTheMethod) {
  const Result r = Run("measure -- sh -c 'echo child-output'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "child-output\n");
  for (const char* needle : {"joulepipe measure: sh -c 'echo child-output'", "exit code 0",
                             "GPU 0 (NVIDIA A100-SXM4-80GB)", "counter, aligned edges",
                             "Total (GPU-only)", "Methodology:", "simulated NVML library"}) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " not in " << r.err;
  }
}

TEST_F(MeasureCommandTest, PassesTheExitCodeThrough) {
  EXPECT_EQ(Run("measure -- sh -c 'exit 3'").code, 3);
  const Result killed = Run("measure --json -- sh -c 'kill -TERM $$'");
  EXPECT_EQ(killed.code, 128 + SIGTERM) << killed.err;
  EXPECT_EQ(LastJsonLine(killed.out)["exit_code"], 128 + SIGTERM);
  const Result missing = Run("measure -- no-such-command-joulepipe");
  EXPECT_EQ(missing.code, 127);
  EXPECT_NE(missing.err.find("cannot run no-such-command-joulepipe"), std::string::npos)
      << missing.err;
}

TEST_F(MeasureCommandTest, CsvHasOneRowPerDeviceAndATotal) {
  ScopedEnv count("JOULEPIPE_SIM_NVML_COUNT", "3");
  const fs::path csv = root_ / "out" / "energy.csv";
  const Result r = Run("measure --gpus 0,2 --csv " + Quote(csv) + " -- sleep 0.3");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string text = Slurp(csv);
  EXPECT_EQ(text.rfind("device,index,name,energy_j,avg_power_w,duration_s,source,approximate\n", 0),
            0u)
      << text;
  EXPECT_NE(text.find("\ngpu,0,NVIDIA A100-SXM4-80GB,"), std::string::npos) << text;
  EXPECT_NE(text.find("\ngpu,2,NVIDIA A100-SXM4-80GB,"), std::string::npos) << text;
  EXPECT_EQ(text.find("\ngpu,1,"), std::string::npos) << text;
  EXPECT_NE(text.find("\ntotal,,GPU-only,"), std::string::npos) << text;
}

TEST_F(MeasureCommandTest, CpuFromAFakeRaplTree) {
  MakeRapl(1000);
  ScopedEnv rapl("JOULEPIPE_RAPL_ROOT", (root_ / "powercap").string());
  const Result r = Run("measure --cpu --json -- sleep 0.2");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = LastJsonLine(r.out);
  EXPECT_EQ(j["scope"], "GPU+CPU");
  ASSERT_EQ(j["cpus"].size(), 1u);
  EXPECT_EQ(j["cpus"][0]["package_j"], 0.0);  // the fake counter stood still
  EXPECT_TRUE(j["cpus"][0]["dram_j"].is_null());

  // --cpu without a readable tree: exit 2 naming the root.
  ScopedEnv gone("JOULEPIPE_RAPL_ROOT", (root_ / "none").string());
  const Result bad = Run("measure --cpu -- true");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("CPU energy was requested"), std::string::npos) << bad.err;

  // Only --cpu and no NVML: CPU-only, with a note.
  ScopedEnv rapl2("JOULEPIPE_RAPL_ROOT", (root_ / "powercap").string());
  ScopedEnv no_nvml("JOULEPIPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  const Result cpu_only = Run("measure --cpu --json -- true");
  ASSERT_EQ(cpu_only.code, 0) << cpu_only.err;
  const nlohmann::json c = LastJsonLine(cpu_only.out);
  EXPECT_EQ(c["scope"], "CPU-only");
  EXPECT_TRUE(c["gpus"].empty());
  EXPECT_NE(c["methodology"].get<std::string>().find("GPUs not measured"), std::string::npos);
}

TEST_F(MeasureCommandTest, BadFlagsExitTwo) {
  for (const char* args : {"measure", "measure --interval-ms 0 -- true", "measure --gpus x -- true",
                           "measure --gpus 0,0 -- true", "measure --gpus 7 -- true",
                           "measure --json --csv f.csv -- true", "measure --bogus -- true"}) {
    const Result r = Run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
  }
  EXPECT_NE(Run("measure").err.find("put it after --"), std::string::npos);
  EXPECT_NE(Run("measure --gpus 7 -- true").err.find("GPU 7 is not visible"), std::string::npos);
}

TEST_F(MeasureCommandTest, MissingLibraryIsAClearMessage) {
  ScopedEnv no_nvml("JOULEPIPE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  const Result r = Run("measure -- true");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("joulepipe: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pass --cpu without --gpus"), std::string::npos) << r.err;
  EXPECT_EQ(Run("power").code, 2);
}

TEST_F(MeasureCommandTest, PowerStreamsUntilSigintThenSummarises) {
  ScopedEnv count("JOULEPIPE_SIM_NVML_COUNT", "2");
  const fs::path out = root_ / "power.out";
  std::fflush(stdout);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen(out.c_str(), "w", stdout);
    ::execl(JOULEPIPE_CLI, JOULEPIPE_CLI, "power", "--interval-ms", "50", nullptr);
    ::_exit(99);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string text = Slurp(out);
  EXPECT_EQ(text.rfind("time_s  GPU0_W  GPU1_W  total_W\n", 0), 0u) << text;
  EXPECT_NE(text.find("  62.12  62.12  124.24\n"), std::string::npos) << text;
  for (const char* needle :
       {"Summary: ", "GPU 0: mean 62.1", "max 62.12 W", "GPU 1: mean", "[counter]",
        "total: mean 124.", "GPU-only", "Methodology:", "simulated NVML library"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << " not in\n" << text;
  }
}

}  // namespace
}  // namespace joulepipe::cli
