// Clocks while waiting through the CLI: `plan --wait-model` re-prices the
// frontier and writes the lowered waits into the plans, `evaluate
// --wait-model` prices a plan's waits the same way, and every output says
// whether the wait model is calibrated.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::Slurp;
using testing::Spit;

// A synthetic calibration (not a measurement): 25 W less at 510 MHz.
constexpr char kCalibrated[] = R"({"version": 1, "kind": "wait_model",
  "gpu": "NVIDIA A100-SXM4-80GB", "load": "spin", "switch_latency_s": 0.005, "margin_s": 0.001,
  "points": [{"frequency": 1410, "blocked_w": 95}, {"frequency": 1005, "blocked_w": 80},
             {"frequency": 510, "blocked_w": 70}, {"frequency": 210, "blocked_w": 72}]})";

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class WaitModelCommandTest : public ScratchDirTest {
 protected:
  WaitModelCommandTest() : ScratchDirTest("waits") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    profile_ = fs::path(JOULEPIPE_SOURCE_DIR) / "data/profiles/gpt3-175b+a100_sxm_bf16.csv";
    Spit(root_ / "w.json", kCalibrated);
  }

  Result Plan(const std::string& out, const std::string& extra = "") const {
    return Run("plan --profile " + Quote(profile_) +
               " --schedule 1f1b --stages 8 --microbatches 12 --p-block 83.64 --max-plans 4 " +
               extra + " --out " + Quote(root_ / out));
  }
  Result Evaluate(const fs::path& plan, const std::string& extra = "") const {
    return Run("evaluate --profile " + Quote(profile_) + " --plan " + Quote(plan) +
               " --p-block 83.64 --json " + extra);
  }

  fs::path profile_;
};

TEST_F(WaitModelCommandTest, CalibratedWaitsSaveMoreAndTravelWithThePlan) {
  const Result flat = Plan("flat");
  ASSERT_EQ(flat.code, 0) << flat.err;
  const Result r = Plan("waits", "--wait-model " + Quote(root_ / "w.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wait model  calibrated ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("with waits"), std::string::npos) << r.out;
  EXPECT_NE(flat.out.find("wait model  uncalibrated"), std::string::npos) << flat.out;

  const json summary = json::parse(Slurp(root_ / "waits" / "summary.json"));
  const json flat_summary = json::parse(Slurp(root_ / "flat" / "summary.json"));
  const json& chosen = summary["chosen"];
  EXPECT_LT(chosen["energy_with_lowered_waits_j"].get<double>(),
            flat_summary["chosen"]["energy_j"].get<double>());
  EXPECT_LE(chosen["time_s"].get<double>(), summary["deadline_s"].get<double>());
  EXPECT_GT(chosen["lowered_waits"].get<int>(), 0);
  EXPECT_LT(summary["baseline"]["energy_with_lowered_waits_j"].get<double>(),
            summary["baseline"]["energy_j"].get<double>());
  EXPECT_NE(flat_summary["inputs"]["wait_model"].get<std::string>().find("uncalibrated"),
            std::string::npos);

  // The chosen plan lowers exactly the waits the summary counts, at 510 MHz
  // (the fill before each later stage's first instruction among them: the
  // first stage's head wait is the one entry at 0); the flat plan lowers none.
  const std::string plan = Slurp(root_ / "waits" / "chosen.json");
  EXPECT_EQ(Count(plan, "\"wait_frequency\": 510"), chosen["lowered_waits"].get<int>());
  EXPECT_EQ(Count(plan,
                  "\"head_waits\": [{\"wait_frequency\": 0, \"wait_restore_s\": 0.0}, "
                  "{\"wait_frequency\": 510"),
            1);
  EXPECT_EQ(Count(plan, "wait_restore_s"), chosen["lowered_waits"].get<int>() + 1);
  EXPECT_EQ(Count(Slurp(root_ / "flat" / "chosen.json"), "wait_frequency"), 0);

  // evaluate prices the same plan to the same figure, and flags the lowered
  // waits when asked to price them flat.
  const Result priced =
      Evaluate(root_ / "waits" / "chosen.json", "--wait-model " + Quote(root_ / "w.json"));
  ASSERT_EQ(priced.code, 0) << priced.err;
  const json figures = json::parse(priced.out);
  EXPECT_NEAR(figures["energy_j"].get<double>(),
              chosen["energy_with_lowered_waits_j"].get<double>(),
              1e-9 * figures["energy_j"].get<double>());
  EXPECT_NEAR(figures["lowered_wait_s"].get<double>(), chosen["lowered_wait_s"].get<double>(),
              1e-12);
  const Result unpriced = Evaluate(root_ / "waits" / "chosen.json");
  ASSERT_EQ(unpriced.code, 0) << unpriced.err;
  EXPECT_NEAR(json::parse(unpriced.out)["energy_j"].get<double>(), chosen["energy_j"].get<double>(),
              1e-9 * chosen["energy_j"].get<double>());
  EXPECT_NE(unpriced.err.find("--wait-model"), std::string::npos) << unpriced.err;
}

// A calibration in which no clock draws less than the highest saves nothing:
// every figure is the flat one.
TEST_F(WaitModelCommandTest, ACalibrationWithoutSavingChangesNothing) {
  Spit(root_ / "none.json", R"({"version":1,"switch_latency_s":0.005,
    "points":[{"frequency":1410,"blocked_w":80},{"frequency":510,"blocked_w":80}]})");
  ASSERT_EQ(Plan("flat").code, 0);
  const Result r = Plan("none", "--wait-model " + Quote(root_ / "none.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  const json a = json::parse(Slurp(root_ / "flat" / "summary.json"))["chosen"];
  const json b = json::parse(Slurp(root_ / "none" / "summary.json"))["chosen"];
  // The same plan, replayed rather than solved: equal to rounding.
  EXPECT_NEAR(b["energy_with_lowered_waits_j"].get<double>(), a["energy_j"].get<double>(),
              1e-12 * a["energy_j"].get<double>());
  EXPECT_EQ(b["lowered_waits"].get<int>(), 0);
  EXPECT_EQ(Slurp(root_ / "flat" / "chosen.json"), Slurp(root_ / "none" / "chosen.json"));
}

TEST_F(WaitModelCommandTest, BadWaitModelsAreRefusedNamingTheField) {
  Spit(root_ / "bad.json", R"({"version":1,"switch_latency_s":5,"points":[]})");
  Result r = Plan("out", "--wait-model " + Quote(root_ / "bad.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.json: switch_latency_s must be seconds in 0..1"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root_ / "out"));
  r = Plan("out", "--wait-model " + Quote(root_ / "missing.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  r = Plan("out", "--lever power-limit --wait-model " + Quote(root_ / "w.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--wait-model applies to --lever clocks only"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root_ / "out"));
}

// simulate --wait-model: the joulepipe policy lowers its plans' waits (the
// straggler wait of the others included, as far as their plans lower it);
// the baseline, the job without joulepipe, is unchanged.
TEST_F(WaitModelCommandTest, SimulateLowersThePlansWaitsAndSaysSo) {
  auto simulate = [&](const std::string& extra) {
    return Run("simulate --profile " + Quote(profile_) +
               " --p-block 83.64 --pipelines 4 --stages 8 --microbatches 12 --iterations 3 "
               "--straggler-pipeline 1 --straggler-slowdown 1.2 --allreduce-ms 50 " +
               extra);
  };
  const Result flat = simulate("--json");
  const Result waits = simulate("--json --wait-model " + Quote(root_ / "w.json"));
  ASSERT_EQ(flat.code, 0) << flat.err;
  ASSERT_EQ(waits.code, 0) << waits.err;
  const json a = json::parse(flat.out), b = json::parse(waits.out);
  EXPECT_EQ(a["baseline"]["energy_j"], b["baseline"]["energy_j"]);
  EXPECT_LT(b["joulepipe"]["energy_j"].get<double>(), a["joulepipe"]["energy_j"].get<double>());
  EXPECT_EQ(a["joulepipe"]["time_s"], b["joulepipe"]["time_s"]);
  EXPECT_EQ(a["joulepipe"]["lowered_wait_s"].get<double>(), 0);
  const double lowered = b["joulepipe"]["lowered_wait_s"].get<double>();
  EXPECT_GT(lowered, 0);
  // 25 W less (95 W at 1410 MHz, 70 W at 510 MHz) for every lowered second.
  EXPECT_NEAR(a["joulepipe"]["energy_j"].get<double>() - b["joulepipe"]["energy_j"].get<double>(),
              25 * lowered, 1e-6 * a["joulepipe"]["energy_j"].get<double>());
  EXPECT_NE(a["inputs"]["wait_model"].get<std::string>().find("uncalibrated"), std::string::npos);
  const Result text = simulate("--wait-model " + Quote(root_ / "w.json"));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("  wait model    calibrated ("), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  lowered waits "), std::string::npos) << text.out;
}

}  // namespace
}  // namespace joulepipe::cli
