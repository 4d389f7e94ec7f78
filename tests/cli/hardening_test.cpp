// Issue 10 "Hardening" on the command line: absurd numbers, empty values,
// implausible profile rows and endless inputs are refused with exit 2 and a
// message that names the flag (or the file and line), says what is wrong and
// how to fix it, in plain words: never CLI11's or the C++ library's own text.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_support.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/workload.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Quote;
using testing::Result;
using testing::Slurp;
using testing::Spit;

const std::string kA40 =
    std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a40_bf16.csv";

// Texts that only libraries write: none may reach a user.
const char* const kLibraryTexts[] = {"Could not convert",
                                     "The following argument",
                                     "A subcommand",
                                     "Run with --help",
                                     "required but received",
                                     "stod",
                                     "stoi",
                                     "[json.exception",
                                     "std::",
                                     "basic_string",
                                     "terminate",
                                     "what()"};

class HardeningTest : public testing::ScratchDirTest {
 protected:
  HardeningTest() : ScratchDirTest("hardening") {}

  // Runs `args`, expects exit 2 with one "joulepipe: error: " line holding
  // every needle and no library text, and nothing written.
  void ExpectRefused(const std::string& args, std::initializer_list<std::string> needles) {
    SCOPED_TRACE(args);
    const Result r = Run(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("joulepipe: error: ", 0), 0u) << r.err;
    for (const std::string& needle : needles) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << "'" << needle << "' not in: " << r.err;
    }
    for (const char* text : kLibraryTexts) {
      EXPECT_EQ(r.err.find(text), std::string::npos) << "library text '" << text << "': " << r.err;
    }
    for (const std::string& name : Entries()) {  // inputs only: no output, no staging
      EXPECT_EQ(name.substr(name.size() > 4 ? name.size() - 4 : 0), ".csv") << name;
    }
  }

  std::string Simulate(const std::string& extra) const {
    return "simulate --profile " + Quote(kA40) +
           " --p-block 70.38 --stages 8 --microbatches 24 --iterations 1 " + extra;
  }
  // `plan` with the schedule and --out; `extra` gives --stages and the rest.
  std::string PlanWith(const std::string& profile, const std::string& extra) const {
    return "plan --profile " + Quote(profile) + " --schedule 1f1b --microbatches 24 --out " +
           Quote(root_ / "out") + " " + extra;
  }
  std::string Plan(const std::string& profile, const std::string& extra = "") const {
    return PlanWith(profile, "--stages 8 --p-block 70.38 " + extra);
  }

  // The value flags `command --help` lists: the flag and what follows it
  // (its type name, "=default" included), from the lines `flag_line`
  // matches (group 1: the flag, group 2: the type). "--json Excludes:
  // --csv" is a flag without a value, left out.
  struct HelpFlag {
    std::string flag, type;
  };
  std::vector<HelpFlag> HelpFlags(const std::string& command, const std::regex& flag_line) {
    const Result help = Run(command + " --help");
    EXPECT_EQ(help.code, 0) << command;
    std::vector<HelpFlag> out;
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, flag_line) || m[2].str().back() == ':') continue;
      out.push_back({m[1], m[2]});
    }
    return out;
  }
};

// ---- Item 7: commands and flags in plain words -----------------------------------

TEST_F(HardeningTest, AnUnknownCommandIsNamedWithTheCommandsThereAre) {
  const std::string commands =
      "the commands are demo, plan, evaluate, simulate, report, site, tune, profile, gpus, "
      "measure, "
      "power, calibrate-wait, serve";
  ExpectRefused("frobnicate", {"unknown command 'frobnicate'", commands, "joulepipe --help"});
  ExpectRefused("", {"no command given", commands, "joulepipe demo"});
  ExpectRefused("--frobnicate", {"unknown flag '--frobnicate' before the command", commands});
}

TEST_F(HardeningTest, ZeroIsAValueNotAnAbsence) {
  const std::string profile = "profile --simulate --model gpt3-175b --gpu a100-sxm ";
  ExpectRefused(profile + "--tp 0 --pp 8", {"--tp must be 1..1024 (got 0)"});
  ExpectRefused(profile + "--tp 8 --pp 0", {"--pp must be 1..1024 (got 0)"});
  const Result r = Run(profile + "--tp 0 --pp 8");
  EXPECT_EQ(r.err.find("required"), std::string::npos) << r.err;
  ExpectRefused(profile + "--pp 8", {"--tp is required"});
}

TEST_F(HardeningTest, ParseErrorsSayWhatIsWrongWithWhichFlag) {
  ExpectRefused(PlanWith(kA40, "--stages abc"),
                {"--stages: 'abc' is not a number", "--stages takes S", "joulepipe plan --help"});
  ExpectRefused(PlanWith(kA40, "--stages 1.5"), {"--stages: '1.5' is not a whole number"});
  ExpectRefused(PlanWith(kA40, "--stages 99999999999999"), {"'99999999999999' is out of range"});
  ExpectRefused(Plan(kA40, "--frobnicate 3"), {"unknown flag --frobnicate for `joulepipe plan`"});
  ExpectRefused(Plan(kA40, "3"), {"unexpected argument 3 for `joulepipe plan`"});
  ExpectRefused(Plan(kA40, "--slowdown"), {"--slowdown needs a value after it"});
  ExpectRefused(Plan(kA40, "--stages 8"), {"--stages is given more than once; give it once"});
  ExpectRefused("evaluate --plan x.json", {"--profile is required", "joulepipe evaluate --help"});
}

// Every flag of every command that takes a value refuses an empty one (one
// check in app.cpp): `--p-block ""` used to read as 0 W, `--out ""` as no
// output. The flags are read from each command's --help, so a new flag is
// covered without changing this test.
TEST_F(HardeningTest, EveryValueFlagOfEveryCommandRefusesAnEmptyValue) {
  const std::regex flag_line(R"(^\s+(?:-\w, )?(--[a-z0-9-]+) ([A-Za-z{][^ ]*))");
  int checked = 0;
  std::set<std::string> commands;
  for (const char* command :
       {"demo", "plan", "evaluate", "simulate", "profile", "gpus", "measure", "power", "serve"}) {
    for (const auto& [flag, type] : HelpFlags(command, flag_line)) {
      SCOPED_TRACE(std::string(command) + " " + flag);
      const Result r = Run(std::string(command) + " " + flag + " ''");
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find("joulepipe: error: " + flag + ": the value is empty; give "),
                std::string::npos)
          << r.err;
      ++checked;
      commands.insert(command);
    }
  }
  EXPECT_GE(checked, 40);          // every command's value flags
  EXPECT_EQ(commands.size(), 8u);  // all but gpus, which has only --json
  EXPECT_TRUE(Entries().empty());
  // The same on a full command line: nothing is planned, nothing written.
  ExpectRefused(PlanWith(kA40, "--stages 8 --p-block ''"),
                {"--p-block: the value is empty; give WATTS"});
  ExpectRefused(Plan(kA40, "--slowdown ''"), {"--slowdown: the value is empty"});
}

// One number form (issue 41, item 2): CLI11 read `profile --tp 0x2` as 2
// and `plan --microbatches 010` as 8, silently. Every flag that takes
// numbers (its type name is not a file, directory, id, list of words or a
// choice) refuses another base or a leading zero, naming the decimal; read
// from each command's --help like the empty-value check above.
TEST_F(HardeningTest, EveryNumberFlagOfEveryCommandTakesDecimalOnly) {
  // A flag line: the flag, then its type name (up to "=default"); help's
  // example lines ("--schedule 1f1b", "--out plan-out") have no such name.
  const std::regex flag_line(
      R"(^\s+(?:-\w, )?(--[a-z0-9-]+) ([A-Z][A-Za-z0-9,.{}_-]*|0,1,\.\.\.))");
  const std::set<std::string> text_types = {"FILE", "DIR", "ID", "SOCKET", "ADDR", "LIST", "TEXT"};
  int checked = 0;
  for (const char* command : {"demo", "plan", "evaluate", "simulate", "profile", "measure", "power",
                              "serve", "tune", "site", "report", "calibrate-wait"}) {
    for (const auto& [flag, type] : HelpFlags(command, flag_line)) {
      if (text_types.count(type) ||
          type.find_first_of(".{abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
        continue;
      }
      SCOPED_TRACE(std::string(command) + " " + flag + " " + type);
      const Result r = Run(std::string(command) + " " + flag + " 0x10");
      EXPECT_EQ(r.code, 2) << r.err;
      // --seed has a reader of its own, which refuses it in its words.
      const std::string said = flag == "--seed" ? flag + ": '0x10' is not a seed"
                                                : flag +
                                                      ": '0x10' is hexadecimal; joulepipe "
                                                      "reads numbers in decimal only: write 16";
      EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
      ++checked;
    }
  }
  EXPECT_GE(checked, 60);
  ExpectRefused("profile --simulate --model gpt3-1.3b --gpu a100-sxm --tp 0x2 --pp 2",
                {"--tp: '0x2' is hexadecimal", "write 2"});
  ExpectRefused(PlanWith(kA40, "--stages 8 --microbatches 010"),
                {"--microbatches: '010' has a leading zero"});
  EXPECT_TRUE(Entries().empty());  // nothing written
}

// Issue 41, item 2: no command replaces a directory another command wrote
// unless asked. Before, `plan --out demo-out` silently replaced the demo's
// output (any joulepipe output was fair game).
TEST_F(HardeningTest, PlanReplacesTheDemosOutputOnlyWithForce) {
  const std::string out = Quote(root_ / "out");
  ASSERT_EQ(Run("demo --out " + out).code, 0);
  const Result refused = Run(Plan(kA40));
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_NE(refused.err.find("it holds the output of `joulepipe demo`; pass --force to replace it"),
            std::string::npos)
      << refused.err;
  EXPECT_TRUE(std::filesystem::exists(root_ / "out" / "simulation.json"));
  const Result forced = Run(Plan(kA40, "--force"));
  EXPECT_EQ(forced.code, 0) << forced.err;
  EXPECT_FALSE(std::filesystem::exists(root_ / "out" / "simulation.json"));
  EXPECT_EQ(Run(Plan(kA40)).code, 0);  // its own output: replaced as before
}

TEST_F(HardeningTest, TheMeasuredCommandMayStillGetEmptyArguments) {
  // Positional arguments (what `measure` runs) are not flags: '' passes the
  // parser there (the command fails later for want of a GPU, not for '').
  const Result r = Run("measure --json -- /bin/echo ''");
  EXPECT_EQ(r.err.find("the value is empty"), std::string::npos) << r.err;
}

// ---- Item 6: overflow and absurd numbers -----------------------------------------

TEST_F(HardeningTest, AbsurdJobNumbersAreRefusedWithTheirRange) {
  ExpectRefused(Simulate("--pipelines 2 --tp 2000000000"),
                {"--tp must be 1..1024 (got 2000000000)"});
  ExpectRefused(Simulate("--pipelines 2000000000"), {"--pipelines must be 1..100000"});
  ExpectRefused(
      Simulate("--pipelines 100000 --tp 1024"),
      {"--pipelines 100000 x --stages 8 x --tp 1024 = 819200000 GPUs", "at most 10000000"});
  ExpectRefused(Simulate("--pipelines 2 --stall-probability 1 --stall-ms 1e308"),
                {"--stall-ms must be 0..3600000 ms (got 1e+308 ms)"});
  ExpectRefused(Simulate("--pipelines 2 --straggler-slowdown 1e308"),
                {"--straggler-slowdown must be a factor 1..100 (got 1e+308)"});
  ExpectRefused(Simulate("--pipelines 2 --allreduce-ms 1e300"),
                {"--allreduce-ms must be 0..3600000 ms (got 1e+300 ms)"});
  ExpectRefused(Simulate("--pipelines 2 --p2p-latency-us 2e6"),
                {"--p2p-latency-us must be 0..1000000 us"});
  ExpectRefused(Simulate("--pipelines 2 --straggler-slowdown 1.2 --straggler-from 2000000000"),
                {"--straggler-from must be 0..1000000000 iterations"});
  ExpectRefused(Simulate("--pipelines 2 --resolution-ms 1e308"),
                {"--resolution-ms must be a time > 0 and at most an hour"});
  ExpectRefused(PlanWith(kA40, "--stages 8 --p-block 1e308"),
                {"--p-block must be", "0..5000 (got 1e+308)"});
  ExpectRefused(Plan(kA40, "--slowdown 1e308"), {"--slowdown must be a fraction 0..99"});
  ExpectRefused("plan --profile " + Quote(kA40) +
                    " --schedule 1f1b --stages 2000 --microbatches 24 --out " + Quote(root_ / "o"),
                {"--stages must be 1..1024 (got 2000)"});
  ExpectRefused(
      "profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 "
      "--dp 2000000000",
      {"--dp must be 1..100000 (got 2000000000)"});
  ExpectRefused(
      "profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 16 "
      "--dp 100000",
      {"--tp 8 x --pp 16 x --dp 100000 = 12800000 GPUs"});
  ExpectRefused(
      "profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 --seq 2048 "
      "--microbatch-size 60000",
      {"--microbatch-size 60000 x --seq 2048 tokens", "more than an hour"});
  ExpectRefused(
      "profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 "
      "--dp-gbps 1e-300",
      {"--dp-gbps must be 0.001..10000 GB/s"});
}

TEST_F(HardeningTest, ASeedIsAWholeNumberThatFits64Bits) {
  // CLI11 alone read "-1" as 18446744073709551615 and saturated the rest.
  ExpectRefused(Simulate("--pipelines 2 --seed -1"),
                {"--seed: '-1' is not a seed; give a whole number 0..18446744073709551615"});
  ExpectRefused(Simulate("--pipelines 2 --seed 99999999999999999999"), {"is not a seed"});
  const Result r = Run(Simulate("--pipelines 2 --seed 18446744073709551615 --json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"seed\":18446744073709551615"), std::string::npos) << r.out;
}

TEST_F(HardeningTest, TheGpuCountIsPrintedInWideArithmetic) {
  const Result r = Run(Simulate("--pipelines 1000 --tp 1024"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("8192000 = 1000 pipelines x 8 stages x TP 1024"), std::string::npos)
      << r.out;
}

// ---- Item 2: one outlier row ------------------------------------------------------

// The A40 profile with line 20's time (stage 0 forward at 1605 MHz) replaced.
std::string WithTime(const std::string& time) {
  std::istringstream in(Slurp(kA40));
  std::string out;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (++n == 20) {
      std::vector<std::string> fields;
      std::stringstream row(line);
      for (std::string f; std::getline(row, f, ',');) fields.push_back(f);
      fields[3] = time;
      line = fields[0] + "," + fields[1] + "," + fields[2] + "," + fields[3] + "," + fields[4];
    }
    out += line + "\n";
  }
  return out;
}

TEST_F(HardeningTest, OneOutlierRowIsRefusedByFileAndLine) {
  // 1e4 s and more (once: a collapsed frontier, minutes and gigabytes, a
  // blamed --resolution-ms, or a one-point plan with null): over an hour.
  for (const char* time : {"1e4", "1e5", "1e6", "1e9", "1e12"}) {
    const fs::path csv = root_ / (std::string("t") + time + ".csv");
    Spit(csv, WithTime(time));
    ExpectRefused(Plan(csv.string()),
                  {csv.string() + " line 20, column 'time'", "more than an hour"});
    fs::remove(csv);
  }
  // Under an hour but far beyond what its clock allows: the cross-row check.
  const fs::path csv = root_ / "ten.csv";
  Spit(csv, WithTime("10"));
  const auto started = std::chrono::steady_clock::now();
  ExpectRefused(Plan(csv.string()),
                {csv.string() + " line 20: stage 0 forward at 1605 MHz takes 10 s",
                 "at 1740 MHz (line 2)", "re-measure this clock or delete the row"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
            10.0);
  fs::remove(csv);
}

TEST_F(HardeningTest, EndlessInputIsRefusedQuickly) {
  const auto started = std::chrono::steady_clock::now();
  ExpectRefused(Plan("/dev/zero"),
                {"profile '/dev/zero' is not a regular file", "more than 256 MiB without ending"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
            30.0);
}

// Every simulated profile joulepipe makes passes the plan call's row checks:
// each catalog model on each catalog GPU, down to the GPU's lowest clock.
TEST(SimulatedProfilesArePlausible, EveryModelOnEveryGpuDownToItsLowestClock) {
  int checked = 0;
  for (const physics::TransformerConfig& model : physics::TransformerCatalog()) {
    for (const physics::GpuSpec& gpu : physics::GpuCatalog()) {
      physics::WorkloadSpec spec;
      spec.model = model;
      spec.parallel.tp = gpu.nvlink_gbps > 0 ? 8 : 1;
      spec.parallel.pp = 4;
      spec.parallel.layer_split = physics::BalancedLayerSplit(spec, gpu);
      for (int min_mhz : {0, gpu.min_sm_mhz}) {
        physics::ProfileOptions options;
        options.min_mhz = min_mhz;
        SCOPED_TRACE(model.id + " on " + gpu.id + " from " + std::to_string(min_mhz) + " MHz");
        const model::Profile profile = physics::SimulateProfile(spec, gpu, options);
        EXPECT_NO_THROW(model::CheckProfileRows(profile, "simulated"));
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 2 * 9 * 6);
}

}  // namespace
}  // namespace joulepipe::cli
