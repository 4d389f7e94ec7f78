// `joulepipe evaluate`, run as a separate process: the report, the JSON
// output, and plans or profiles that do not fit (exit 2, the field named).
#include <filesystem>
#include <initializer_list>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::Slurp;
using testing::Spit;

// Replaces the first `from` in `text` by `to`; fails the test if absent.
std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not in the plan";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// One plan of the measured GPT-3 profile (8 stages, 1F1B, 4 microbatches) is
// made once per test; each test then evaluates variants of it.
class EvaluateCommandTest : public ScratchDirTest {
 protected:
  EvaluateCommandTest() : ScratchDirTest("evaluate") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    profile_ = fs::path(JOULEPIPE_SOURCE_DIR) / "data/profiles/gpt3-175b+a100_sxm_bf16.csv";
    const Result r = Run("plan --profile " + Quote(profile_) +
                         " --schedule 1f1b --stages 8 --microbatches 4 --p-block 83.64"
                         " --max-plans 3 --out " +
                         Quote(root_ / "out"));
    ASSERT_EQ(r.code, 0) << r.err;
    chosen_ = Slurp(root_ / "out" / "chosen.json");
  }

  Result Evaluate(const fs::path& plan, const std::string& extra = "") const {
    return Run("evaluate --profile " + Quote(profile_) + " --plan " + Quote(plan) +
               " --p-block 83.64 " + extra);
  }

  // Writes `text` as a plan, evaluates it and expects exit 2 with a message
  // naming the file and every needle.
  void ExpectRejectedPlan(const std::string& text, std::initializer_list<std::string> needles) {
    const fs::path plan = root_ / "edited.json";
    Spit(plan, text);
    const Result r = Evaluate(plan);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("joulepipe: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(plan.string()), std::string::npos) << r.err;
    for (const std::string& needle : needles) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << "'" << needle << "' not in: " << r.err;
    }
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err.find("::"), std::string::npos) << "a library field: " << r.err;
  }

  fs::path profile_;
  std::string chosen_;
};

TEST_F(EvaluateCommandTest, ReportsTimeEnergyAndDifferenceToPrediction) {
  const Result r = Evaluate(root_ / "out" / "chosen.json");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle :
       {"time", "energy", "busy", "blocking", "predicted", "difference", "not measured"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in:\n" << r.out;
  }
}

TEST_F(EvaluateCommandTest, JsonIsOneObjectWithExactFigures) {
  const Result r = Evaluate(root_ / "out" / "chosen.json", "--json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "one line: " << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json plan = nlohmann::json::parse(chosen_);
  const double predicted_time = plan["predicted"]["time_s"];
  const double predicted_energy = plan["predicted"]["energy_j"];
  EXPECT_NEAR(j["time_s"].get<double>(), predicted_time, 1e-9 * predicted_time);
  EXPECT_NEAR(j["energy_j"].get<double>(), predicted_energy, 1e-9 * predicted_energy);
  EXPECT_NEAR(j["busy_energy_j"].get<double>() + j["blocking_energy_j"].get<double>(),
              j["energy_j"].get<double>(), 1e-9 * predicted_energy);
  EXPECT_GT(j["blocking_energy_j"].get<double>(), 0);
}

TEST_F(EvaluateCommandTest, PlanWithoutPredictionStillEvaluates) {
  const nlohmann::json plan = nlohmann::json::parse(chosen_);
  nlohmann::json stripped = plan;
  stripped.erase("predicted");
  const fs::path path = root_ / "bare.json";
  Spit(path, stripped.dump());
  const Result r = Evaluate(path);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("predicted"), std::string::npos);
}

TEST_F(EvaluateCommandTest, RejectsMicrobatchCountThatDisagreesWithTheLists) {
  ExpectRejectedPlan(Edit(chosen_, "\"num_microbatches\": 4", "\"num_microbatches\": 3"),
                     {"num_microbatches is 3", "stages[0][3].microbatch"});
  ExpectRejectedPlan(Edit(chosen_, "\"num_microbatches\": 4", "\"num_microbatches\": 8"),
                     {"num_microbatches is 8", "only up to 3"});
}

TEST_F(EvaluateCommandTest, RejectsOtherMismatches) {
  ExpectRejectedPlan(Edit(chosen_, "\"num_stages\": 8", "\"num_stages\": 7"),
                     {"num_stages is 7", "8 entries"});
  ExpectRejectedPlan(Edit(chosen_, "\"schedule\": \"1f1b\"", "\"schedule\": \"zigzag\""),
                     {"schedule 'zigzag'"});
  // GPipe runs all forwards first; stage 5 of 1F1B (two warm-up forwards)
  // runs its first backward after three forwards.
  ExpectRejectedPlan(Edit(chosen_, "\"schedule\": \"1f1b\"", "\"schedule\": \"gpipe\""),
                     {"stage 5 position 3", "gpipe schedule runs"});
  ExpectRejectedPlan(Edit(chosen_, "\"frequency\": 1410", "\"frequency\": 1411"),
                     {"1411 MHz", "profiled clock"});
  ExpectRejectedPlan(Edit(chosen_, "\"frequency\": 1410", "\"frequency\": \"fast\""),
                     {"frequency"});
  ExpectRejectedPlan("{\"version\": 1, ", {"not valid JSON"});
}

TEST_F(EvaluateCommandTest, RejectsProfileOfAnotherPipeline) {
  const fs::path small = root_ / "four_stages.csv";
  std::istringstream lines(Slurp(profile_));
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    const char stage = line.empty() ? 'x' : line[0];
    if (line.rfind("stage", 0) == 0 || (stage >= '0' && stage <= '3')) kept += line + "\n";
  }
  Spit(small, kept);
  const Result r = Run("evaluate --profile " + Quote(small) + " --plan " +
                       Quote(root_ / "out" / "chosen.json") + " --p-block 83.64");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(small.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("num_stages 8"), std::string::npos) << r.err;

  const Result bad_power = Run("evaluate --profile " + Quote(profile_) + " --plan " +
                               Quote(root_ / "out" / "chosen.json") + " --p-block -3");
  EXPECT_EQ(bad_power.code, 2);
  EXPECT_NE(bad_power.err.find("--p-block"), std::string::npos) << bad_power.err;
}

}  // namespace
}  // namespace joulepipe::cli
