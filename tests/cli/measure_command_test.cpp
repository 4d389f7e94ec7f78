// `joulepipe measure` and `joulepipe power` as separate processes against
// the simulated NVML library: the acceptance (an idle GPU's energy over
// `measure -- sleep 1` within 2 % of the model's idle power x duration),
// exit-code passthrough, --csv, --cpu over a fake RAPL tree, bad flags, a
// missing library, and `power` stopped by SIGINT printing its summary.
// Then what must survive trouble: an unwritable --csv refused before the
// command runs, a --csv that fails at the end, a GPU lost mid-run, signals
// forwarded to the command's whole process group, a window that ends within
// milliseconds of the command, the terminal handed to the command, and
// nothing left behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/format.hpp"
#include "cli_test_support.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "process_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::PtyCli;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::ShellCode;
using testing::Slurp;
using testing::Spit;
using testing::StartCli;
using testing::WaitStatus;
using testing::WaitUntil;

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
  // The header comes once power takes its signals (a SIGINT before that is
  // an interruption, not the end of the stream).
  ASSERT_TRUE(WaitUntil([&] { return Slurp(out).find("total_W\n") != std::string::npos; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string text = Slurp(out);
  EXPECT_EQ(text.rfind("time_s  GPU0_W  GPU1_W  total_W\n", 0), 0u) << text;
  EXPECT_NE(text.find("  62.12  62.12  124.24\n"), std::string::npos) << text;
  for (const char* needle : {"Summary: ", "max 62.12 W", "[counter]", "GPU-only",
                             "Methodology:", "simulated NVML library"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << " not in\n" << text;
  }
  // The means come from the energy counter over a window that need not span
  // whole counter updates: within 1% of idle power, not digit for digit.
  for (const auto& [label, watts] : std::vector<std::pair<std::string, double>>{
           {"GPU 0: mean ", 62.12}, {"GPU 1: mean ", 62.12}, {"total: mean ", 124.24}}) {
    const size_t at = text.find(label);
    ASSERT_NE(at, std::string::npos) << label << " not in\n" << text;
    EXPECT_NEAR(std::strtod(text.c_str() + at + label.size(), nullptr), watts, watts * 0.01)
        << label << "in\n"
        << text;
  }
}

// `power --grid`: the streamed total as the grid sees it. Two idle simulated
// GPUs draw a steady 124.24 W: no swing, no ramp.
TEST_F(MeasureCommandTest, PowerGridSummarisesTheStreamedTotal) {
  ScopedEnv count("JOULEPIPE_SIM_NVML_COUNT", "2");
  const fs::path out = root_ / "power.out";
  const pid_t pid = StartCli({"power", "--interval-ms", "20", "--grid"}, out, root_ / "err.txt");
  ASSERT_TRUE(WaitUntil([&] { return Slurp(out).find("total_W\n") != std::string::npos; }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string text = Slurp(out);
  const std::size_t at = text.find("Grid (the total of the streamed samples, simulated): peak ");
  ASSERT_NE(at, std::string::npos) << text;
  double peak = 0, trough = 0, swing = -1;
  ASSERT_EQ(std::sscanf(text.c_str() + at,
                        "Grid (the total of the streamed samples, simulated): peak %lf W, trough "
                        "%lf W, swing %lf W",
                        &peak, &trough, &swing),
            3)
      << text.substr(at);
  EXPECT_NEAR(peak, 124.24, 0.5);
  EXPECT_NEAR(trough, 124.24, 0.5);
  EXPECT_LT(swing, 0.5);
  EXPECT_NE(text.find("0.1-20 Hz band RMS"), std::string::npos) << text.substr(at);
}

// power --join: two ranks' traces (one clock 2.3 s ahead) join into the job's
// power, aligned on their step ends; wrong flag combinations and a bad file
// are refused naming the flag or the field.
TEST_F(MeasureCommandTest, PowerJoinAlignsRankTracesIntoTheJobs) {
  for (int rank : {0, 1}) {
    std::string samples, ends;
    const double t0 = 1.8e9 + 2.3 * rank;  // rank 1's clock is 2.3 s ahead
    for (int i = 0; i < 300; ++i) {
      const double in = (i % 100) / 100.0;
      samples += (i ? "," : "") + Printf("[%.6f,%d]", t0 + i * 0.01, in < 0.8 ? 400 : 100);
    }
    for (int k = 0; k < 3; ++k) ends += (k ? "," : "") + Printf("[%d,%.6f]", k, t0 + k + 1.0);
    Spit(root_ / ("p" + std::to_string(rank) + ".json"),
         "{\"version\":1,\"kind\":\"power_trace\",\"rank\":" + std::to_string(rank) +
             ",\"gpu\":\"G\",\"interval_s\":0.01,\"samples\":[" + samples + "],\"step_ends\":[" +
             ends + "]}");
  }
  const std::string both = Quote(root_ / "p0.json") + " " + Quote(root_ / "p1.json");
  const Result r = Run("power --join " + both);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("clock +2.300 s from rank 0's (median over 3 common step ends)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("peak 800.00 W, trough 200.00 W"), std::string::npos) << r.out;
  const Result raw = Run("power --clock-only --join " + both);
  ASSERT_EQ(raw.code, 0) << raw.err;
  // On their clocks the all-reduces do not meet.
  EXPECT_NE(raw.out.find("peak 800.00 W, trough 500.00 W"), std::string::npos) << raw.out;
  const Result mixed = Run("power --gpus 0 --join " + both);
  EXPECT_EQ(mixed.code, 2);
  EXPECT_NE(mixed.err.find("--gpus and --interval-ms are for streaming"), std::string::npos)
      << mixed.err;
  const Result stray = Run("power --csv x.csv");
  EXPECT_EQ(stray.code, 2);
  EXPECT_NE(stray.err.find("--csv goes with --join"), std::string::npos) << stray.err;
  Spit(root_ / "bad.json", "{\"version\":1,\"kind\":\"power_trace\",\"rank\":0}");
  const Result bad = Run("power --join " + Quote(root_ / "bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("bad.json: interval_s is missing"), std::string::npos) << bad.err;
}

// ---- Trouble: outputs, lost GPUs, signals, timing ------------------------------

TEST_F(MeasureCommandTest, UnwritableCsvIsRefusedBeforeTheCommandRuns) {
  Spit(root_ / "file", "a file where a directory should be");
  fs::create_directories(root_ / "dir");
  const fs::path marker = root_ / "ran";
  for (const fs::path& csv : {root_ / "file" / "energy.csv", root_ / "dir",
                              fs::path("/proc/joulepipe-no-such-dir/energy.csv")}) {
    const Result r =
        Run("measure --csv " + Quote(csv) + " -- sh -c " + Quote("touch " + Quote(marker)));
    EXPECT_EQ(r.code, 2) << csv << "\n" << r.err;
    EXPECT_FALSE(fs::exists(marker))
        << "the command ran although --csv " << csv << " cannot be written";
    EXPECT_EQ(r.err.rfind("joulepipe: error: --csv: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("the command was not run"), std::string::npos) << r.err;
    fs::remove(marker);
  }
  EXPECT_EQ(Entries(), (std::set<std::string>{"dir", "file"}));
  EXPECT_TRUE(fs::is_empty(root_ / "dir"));
}

TEST_F(MeasureCommandTest, CsvFailingAtTheEndKeepsTheExitCodeAndTheReport) {
  // The command removes the directory --csv was prepared in.
  const fs::path dir = root_ / "out";
  const Result r = Run("measure --csv " + Quote(dir / "energy.csv") + " -- sh -c " +
                       Quote("rm -rf " + Quote(dir) + "; exit 5"));
  EXPECT_EQ(r.code, 5) << r.err;
  EXPECT_NE(r.err.find("joulepipe: error: --csv: cannot write"), std::string::npos) << r.err;
  for (const char* needle : {"exit code 5", "GPU 0 (NVIDIA A100-SXM4-80GB)", "Total (GPU-only)",
                             "device,index,name,energy_j", "\ntotal,,GPU-only,"}) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " not in " << r.err;
  }
  EXPECT_TRUE(Entries().empty());
}

TEST_F(MeasureCommandTest, GpuLostMidRunKeepsTheExitCodeAndReportsWhatWasMeasured) {
  // Two simulated GPUs; the second is lost 1 s after the configuration is
  // written (the counter's epoch), while `sleep 2` runs.
  const fs::path config = root_ / "sim.json";
  auto lose_gpu1_in_one_second = [&] {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    Spit(config,
         nlohmann::json{
             {"epoch_unix_s", now},
             {"count", 2},
             {"devices", {nlohmann::json::object(), {{"faults", {{"gpu_lost_at_s", 1.0}}}}}}}
             .dump());
  };
  ScopedEnv sim("JOULEPIPE_SIM_NVML_CONFIG", config.string());
  const double idle_w = physics::FindGpu("a100-sxm4-80gb").idle_w;

  lose_gpu1_in_one_second();
  const Result r = Run("measure --json -- sh -c 'sleep 2; exit 7'");
  EXPECT_EQ(r.code, 7) << r.err;
  const nlohmann::json j = LastJsonLine(r.out);
  EXPECT_EQ(j["exit_code"], 7);
  EXPECT_EQ(j["complete"], false);
  EXPECT_NEAR(j["duration_s"].get<double>(), 2.0, 0.1);
  const nlohmann::json& ok = j["gpus"][0];
  const nlohmann::json& lost = j["gpus"][1];
  EXPECT_EQ(ok["failed"], false);
  EXPECT_NEAR(ok["energy_j"].get<double>(), idle_w * j["duration_s"].get<double>(),
              0.02 * idle_w * 2);
  EXPECT_EQ(lost["failed"], true);
  const double until = lost["measured_s"];
  EXPECT_GT(until, 0.2) << "the GPU was measured until it was lost";
  EXPECT_LT(until, 1.05);
  EXPECT_NEAR(lost["energy_j"].get<double>(), idle_w * until, 0.15 * idle_w);
  EXPECT_NE(lost["error"].get<std::string>().find("GPU 1"), std::string::npos) << lost;
  EXPECT_NE(lost["error"].get<std::string>().find("fell off the bus"), std::string::npos) << lost;
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_NE(r.err.find("joulepipe: warning: GPU 1 (NVIDIA A100-SXM4-80GB) failed during the "
                       "command, measured until"),
            std::string::npos)
      << r.err;

  // The text report and the CSV say the same.
  lose_gpu1_in_one_second();
  const fs::path csv = root_ / "energy.csv";
  const Result text = Run("measure --csv " + Quote(csv) + " -- sh -c 'sleep 2; exit 7'");
  EXPECT_EQ(text.code, 7) << text.err;
  for (const char* needle : {"exit code 7", "[counter, FAILED: first ", "[incomplete]",
                             "Incomplete: GPU 1 (NVIDIA A100-SXM4-80GB) failed during"}) {
    EXPECT_NE(text.err.find(needle), std::string::npos) << needle << " not in " << text.err;
  }
  const std::string rows = Slurp(csv);
  EXPECT_NE(rows.find(",counter-until-failure,"), std::string::npos) << rows;
  EXPECT_NE(rows.find("\ntotal,,GPU-only,"), std::string::npos) << rows;
  EXPECT_NE(rows.find(",incomplete,"), std::string::npos) << rows;
}

// The command traps a signal sent to `measure` and records it; measure
// passes its exit code through.
TEST_F(MeasureCommandTest, SignalsToMeasureReachTheCommand) {
  for (int sig : {SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT, SIGINT, SIGTERM}) {
    const std::string name = sig == SIGHUP    ? "HUP"
                             : sig == SIGUSR1 ? "USR1"
                             : sig == SIGUSR2 ? "USR2"
                             : sig == SIGQUIT ? "QUIT"
                             : sig == SIGINT  ? "INT"
                                              : "TERM";
    const fs::path ready = root_ / "ready", got = root_ / "got";
    // (ulimit -c 0: a sleep that SIGQUIT ends dumps no core.)
    const std::string script = "ulimit -c 0; trap 'echo " + name + " > " + Quote(got) +
                               "; exit 9' " + name + "; touch " + Quote(ready) +
                               "; while :; do sleep 0.05; done";
    const pid_t pid =
        StartCli({"measure", "--", "sh", "-c", script}, root_ / "out.txt", root_ / "err.txt");
    ASSERT_TRUE(WaitUntil([&] { return fs::exists(ready); }, 10)) << Slurp(root_ / "err.txt");
    ::kill(pid, sig);
    const int status = WaitStatus(pid, 10);
    EXPECT_EQ(ShellCode(status), 9) << name << ": " << Slurp(root_ / "err.txt");
    EXPECT_EQ(Slurp(got), name + "\n") << name << " did not reach the command";
    EXPECT_NE(Slurp(root_ / "err.txt").find("exit code 9"), std::string::npos) << name;
    fs::remove(ready);
    fs::remove(got);
  }
}

TEST_F(MeasureCommandTest, SigtermReachesTheCommandsWholeProcessGroup) {
  // sh starts a grandchild that traps SIGTERM, and waits for it.
  const fs::path ready = root_ / "ready", got = root_ / "got";
  const std::string grandchild = "trap 'echo TERM > " + Quote(got) + "; exit 0' TERM; touch " +
                                 Quote(ready) + "; while :; do sleep 0.05; done";
  const std::string script = "sh -c " + Quote(grandchild) + " & wait";
  const pid_t pid =
      StartCli({"measure", "--", "sh", "-c", script}, root_ / "out.txt", root_ / "err.txt");
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(ready); }, 10)) << Slurp(root_ / "err.txt");
  ::kill(pid, SIGTERM);
  const int status = WaitStatus(pid, 10);
  EXPECT_EQ(ShellCode(status), 128 + SIGTERM) << Slurp(root_ / "err.txt");
  EXPECT_TRUE(WaitUntil([&] { return Slurp(got) == "TERM\n"; }, 5))
      << "SIGTERM did not reach the grandchild";
}

TEST_F(MeasureCommandTest, KilledMeasureWritesItsReportAndLeavesNoTemporary) {
  const fs::path dir = root_ / "out";
  const fs::path csv = dir / "energy.csv";
  const pid_t pid = StartCli({"measure", "--csv", csv.string(), "--", "sleep", "30"},
                             root_ / "out.txt", root_ / "err.txt");
  // --csv is prepared before the command starts: its temporary appears.
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(dir) && !fs::is_empty(dir); }, 10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  const int status = WaitStatus(pid, 10);
  EXPECT_EQ(ShellCode(status), 128 + SIGTERM) << Slurp(root_ / "err.txt");
  EXPECT_EQ(testing::EntriesOf(dir), std::set<std::string>{"energy.csv"});
  EXPECT_NE(Slurp(csv).find("\ntotal,,GPU-only,"), std::string::npos);
  EXPECT_NE(Slurp(root_ / "err.txt").find("killed by SIGTERM"), std::string::npos)
      << Slurp(root_ / "err.txt");
}

TEST_F(MeasureCommandTest, WindowEndsWithinMillisecondsOfTheCommand) {
  // The command's end used to be found by polling every 50 ms.
  std::vector<double> late;
  for (int run = 0; run < 5; ++run) {
    const Result r = Run("measure --json -- sleep 0.2");
    ASSERT_EQ(r.code, 0) << r.err;
    late.push_back(LastJsonLine(r.out)["duration_s"].get<double>() - 0.2);
  }
  std::sort(late.begin(), late.end());
  std::string all;
  for (double x : late) all += std::to_string(x * 1e3) + " ms ";
  EXPECT_GE(late.front(), 0.0) << all;
  EXPECT_LT(late[late.size() / 2], 0.01) << "median lateness: " << all;
  EXPECT_LT(late.back(), 0.03) << all;
  std::printf("measure -- sleep 0.2: duration_s - 0.2 = %s\n", all.c_str());
}

TEST_F(MeasureCommandTest, AtATerminalTheCommandGetsTheTerminal) {
  // The command reads the terminal (a background process group would be
  // stopped by SIGTTIN) ...
  {
    PtyCli cli({"measure", "--", "sh", "-c", "read line; echo got:$line"});
    ASSERT_TRUE(cli.ok());
    cli.ReadUntil("\n", 0.5);  // let it start
    cli.Type("hello\n");
    const std::string& seen = cli.ReadUntil("Methodology", 10);
    const int status = WaitStatus(cli.pid(), 10);
    EXPECT_EQ(ShellCode(status), 0) << seen;
    EXPECT_NE(seen.find("got:hello"), std::string::npos) << seen;
  }
  // ... and Ctrl-C reaches it (once: measure does not forward it again).
  // (exec: a shell that gets SIGINT just before it forks a foreground
  // command may wait for that command instead of ending.)
  {
    PtyCli cli({"measure", "--", "sh", "-c", "echo ready; exec sleep 30"});
    ASSERT_TRUE(cli.ok());
    ASSERT_NE(cli.ReadUntil("ready", 10).find("ready"), std::string::npos);
    cli.Type("\x03");
    const std::string& seen = cli.ReadUntil("Methodology", 10);
    const int status = WaitStatus(cli.pid(), 10);
    EXPECT_EQ(ShellCode(status), 128 + SIGINT) << seen;
    EXPECT_NE(seen.find("killed by SIGINT"), std::string::npos) << seen;
  }
}

TEST_F(MeasureCommandTest, PowerStopsWithItsSummaryOnEveryStopSignal) {
  for (int sig : {SIGHUP, SIGTERM, SIGUSR1, SIGQUIT}) {
    const fs::path out = root_ / "power.out";
    const pid_t pid = StartCli({"power", "--interval-ms", "50"}, out, root_ / "err.txt");
    ASSERT_TRUE(WaitUntil([&] { return Slurp(out).find("  total_W\n") != std::string::npos; }, 10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ::kill(pid, sig);
    const int status = WaitStatus(pid, 10);
    EXPECT_EQ(ShellCode(status), 0) << sig << ": " << Slurp(root_ / "err.txt");
    const std::string text = Slurp(out);
    EXPECT_NE(text.find("Summary: "), std::string::npos) << sig << "\n" << text;
    EXPECT_NE(text.find("Methodology:"), std::string::npos) << sig << "\n" << text;
  }
}

}  // namespace
}  // namespace joulepipe::cli
