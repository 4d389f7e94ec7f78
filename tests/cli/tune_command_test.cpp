// `joulepipe tune` end to end: the summary's identities, the files of --out,
// flag errors naming the flag, and Ctrl-C keeping what is solved.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"
#include "process_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Result;

class TuneCommandTest : public testing::ScratchDirTest {
 protected:
  TuneCommandTest() : ScratchDirTest("tune") {}

  // GPT-3 XL on 16 A100-SXM, today TP 2 x PP 4 x DP 2, global batch 32.
  Result Tune(const std::string& extra) const {
    return Run(
        "tune --model gpt3-1.3b --gpu a100-sxm --gpus 16 --tp 2 --pp 4 --global-batch 32 "
        "--max-microbatch-size 2 --max-chunks 3 --grid-points 20 " +
        extra);
  }
};

TEST_F(TuneCommandTest, SummaryAddsUpAndTheFilesDescribeTheChosenConfiguration) {
  const fs::path out = root_ / "out";
  const Result r = Tune("--json --out " + testing::Quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["figures"].get<std::string>().find("simulated"), std::string::npos);
  const double total = j["saving_pct"]["total"], clocks = j["saving_pct"]["clocks"];
  EXPECT_NEAR(total, clocks + j["saving_pct"]["configuration"].get<double>(), 1e-9);
  EXPECT_GT(clocks, 0);
  EXPECT_GE(total, clocks);  // never worse than clocks alone
  EXPECT_LE(j["chosen"]["with_plan"]["time_s"].get<double>(),
            j["target_time_s"].get<double>() * (1 + 1e-12));
  EXPECT_GT(j["chosen"]["headroom_gib"].get<double>(), 0.10 * 80);
  const nlohmann::json& chosen = j["chosen"];
  EXPECT_EQ(chosen["tp"].get<int>() * chosen["pp"].get<int>() * chosen["dp"].get<int>(), 16);
  EXPECT_EQ(chosen["dp"].get<int>() * chosen["microbatch_size"].get<int>() *
                chosen["microbatches"].get<int>(),
            32);
  EXPECT_EQ(testing::Slurp(out / "summary.json"), r.out);

  // The chosen plan is of the chosen configuration's schedule.
  const nlohmann::json plan = nlohmann::json::parse(testing::Slurp(out / "chosen.json"));
  EXPECT_EQ(plan["schedule"], chosen["schedule"]);
  EXPECT_EQ(plan["num_stages"], chosen["pp"]);
  EXPECT_EQ(plan["num_microbatches"], chosen["microbatches"]);

  // The envelope: ascending time, strictly descending energy, and its point
  // within the target is the chosen one.
  std::istringstream csv(testing::Slurp(out / "envelope.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("time_s,energy_j,saving_pct,", 0), 0u) << line;
  double last_t = 0, last_e = INFINITY, best = INFINITY;
  int rows = 0;
  while (std::getline(csv, line)) {
    const double t = std::stod(line), e = std::stod(line.substr(line.find(',') + 1));
    EXPECT_GT(t, last_t);
    EXPECT_LT(e, last_e);
    if (t <= j["target_time_s"].get<double>() * (1 + 1e-12)) best = e;
    last_t = t;
    last_e = e;
    ++rows;
  }
  EXPECT_EQ(rows, j["envelope_points"].get<int>());
  EXPECT_DOUBLE_EQ(best, j["chosen"]["with_plan"]["energy_j"].get<double>());
  EXPECT_NE(testing::Slurp(out / "envelope.svg").find("<svg"), std::string::npos);
  const std::string candidates = testing::Slurp(out / "candidates.csv");
  EXPECT_NE(candidates.find(",solved,"), std::string::npos);
  EXPECT_EQ(std::count(candidates.begin(), candidates.end(), '\n'), 1 + j["candidates"].get<int>());

  // The table says the same in words.
  const Result text = Tune("");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("= clocks "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("headroom"), std::string::npos) << text.out;
  EXPECT_NE(text.err.find("tune: [1/"), std::string::npos) << text.err;  // progress
}

// The memory line says what it assumes and the flags that change it; the
// answer comes with the Megatron-LM arguments that run it as assumed. (The
// demo job's "53.0 of 80 GiB" held only with the distributed optimizer and
// sequence parallelism, and said neither.)
TEST_F(TuneCommandTest, TheMemoryAssumptionsAndMegatronsArgumentsAreNamed) {
  const Result text = Tune("");
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("assumes     the distributed optimizer, sequence parallelism (TP > "
                          "1), recompute none (--no-distributed-optimizer, "
                          "--no-sequence-parallel, --recompute change them)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("megatron    --tensor-model-parallel-size "), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("--global-batch-size 32 "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("--use-distributed-optimizer"), std::string::npos) << text.out;

  const Result with = Tune("--json"), without = Tune("--json --no-distributed-optimizer");
  ASSERT_EQ(without.code, 0) << without.err;
  const nlohmann::json a = nlohmann::json::parse(with.out), b = nlohmann::json::parse(without.out);
  EXPECT_EQ(b["memory_assumes"]["distributed_optimizer"], false);
  const std::vector<std::string> args = b["chosen"]["megatron_args"];
  EXPECT_EQ(std::count(args.begin(), args.end(), "--use-distributed-optimizer"), 0);
  // The same configuration needs more memory unsharded.
  if (a["chosen"]["tp"] == b["chosen"]["tp"] && a["chosen"]["pp"] == b["chosen"]["pp"] &&
      a["chosen"]["microbatch_size"] == b["chosen"]["microbatch_size"] &&
      a["chosen"]["schedule"] == b["chosen"]["schedule"]) {
    EXPECT_GT(b["chosen"]["peak_memory_gib"].get<double>(),
              a["chosen"]["peak_memory_gib"].get<double>());
  }
}

TEST_F(TuneCommandTest, BadFlagsNameTheFlag) {
  struct Case {
    std::string flags, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"--keep tp,cp", "--keep"},
           {"--memory-margin 0.95", "--memory-margin"},
           {"--chunks 2", "--chunks"},
           {"--schedule interleaved", "--chunks"},
           {"--slowdown -0.1", "--slowdown"},
       }) {
    const Result r = Tune(c.flags);
    EXPECT_EQ(r.code, 2) << c.flags << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.flags << "\n" << r.err;
  }
  const Result gpus = Run("tune --model gpt3-1.3b --gpu a100-sxm --gpus 12 --tp 2 --pp 4");
  EXPECT_EQ(gpus.code, 2);
  EXPECT_NE(gpus.err.find("--gpus must be a multiple"), std::string::npos) << gpus.err;
}

TEST_F(TuneCommandTest, CtrlCKeepsWhatIsSolved) {
  // GPT-3 175B on 1,024 A100-SXM: each solve takes seconds, so the signal
  // comes while the second candidate is being solved.
  const fs::path out = root_ / "out";
  const pid_t pid = testing::StartCli({"tune", "--model", "gpt3-175b", "--gpu", "a100-sxm",
                                       "--gpus", "1024", "--keep", "tp,dp", "--out", out.string()},
                                      root_ / "stdout.txt", root_ / "stderr.txt");
  auto err = [&] { return testing::Slurp(root_ / "stderr.txt"); };
  auto solving = [&] {
    const std::string e = err();
    const std::size_t first = e.find("solving");
    return first != std::string::npos && e.find("solving", first + 1) != std::string::npos;
  };
  ASSERT_TRUE(testing::WaitUntil(solving, 120)) << err();
  ::kill(pid, SIGINT);
  const int status = testing::WaitStatus(pid, 60);
  EXPECT_EQ(testing::ShellCode(status), 128 + SIGINT) << err();
  EXPECT_NE(err().find("the outputs completed before it were kept"), std::string::npos) << err();
  const nlohmann::json j = nlohmann::json::parse(testing::Slurp(out / "summary.json"));
  EXPECT_TRUE(j["cancelled"].get<bool>());
  EXPECT_GE(j["by_status"]["solved"].get<int>(), 1);
  EXPECT_GT(j["by_status"]["not-reached"].get<int>(), 0);
  EXPECT_NE(testing::Slurp(root_ / "stdout.txt").find("Cancelled"), std::string::npos);
}

}  // namespace
}  // namespace joulepipe::cli
