// `joulepipe simulate` end to end: the JSON contract, the saving with a
// straggler on a measured profile, agreement with `joulepipe evaluate` for a
// single pipeline, the timeline file, and flag errors (exit 2, naming the flag).
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

using testing::Quote;
using testing::Result;
using testing::Slurp;

const std::string kProfile =
    std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv";

class SimulateCommandTest : public testing::ScratchDirTest {
 protected:
  SimulateCommandTest() : ScratchDirTest("simulate") {}

  // A small job on the measured GPT-3 A100-SXM profile; `extra` appends flags.
  Result Simulate(const std::string& extra) const {
    return Run("simulate --profile " + Quote(kProfile) +
               " --p-block 83.64 --stages 8 --microbatches 4 " + extra);
  }
};

TEST_F(SimulateCommandTest, JsonHasTheRequiredKeysAndSavesEnergyWithAStraggler) {
  const Result r = Simulate("--pipelines 4 --tp 2 --straggler-slowdown 1.2 --iterations 3 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* policy : {"baseline", "joulepipe"}) {
    ASSERT_TRUE(j.contains(policy)) << r.out;
    EXPECT_TRUE(j[policy]["time_s"].is_number());
    EXPECT_TRUE(j[policy]["energy_j"].is_number());
  }
  ASSERT_TRUE(j["saving_pct"].is_number());
  const double tb = j["baseline"]["time_s"], tj = j["joulepipe"]["time_s"];
  const double eb = j["baseline"]["energy_j"], ej = j["joulepipe"]["energy_j"];
  EXPECT_GT(j["saving_pct"].get<double>(), 10.0);
  EXPECT_NEAR(j["saving_pct"].get<double>(), 100 * (1 - ej / eb), 1e-9);
  EXPECT_LE(tj, tb * (1 + 1e-12));
  EXPECT_EQ(j["gpus"], 4 * 8 * 2);
  EXPECT_EQ(j["per_pipeline"].size(), 4u);
  EXPECT_EQ(j["per_iteration"].size(), 3u);
  EXPECT_TRUE(j["per_pipeline"][0]["straggler"].get<bool>());
  EXPECT_NE(std::string(j["figures"]).find("simulated"), std::string::npos);
}

// The operating-point flags choose what every pipeline runs while healthy;
// budgets are the whole job's, and host power is counted and reported.
TEST_F(SimulateCommandTest, OperatingPointsAreTheWholeJobs) {
  const Result same = Simulate("--pipelines 4 --tp 2 --iterations 2 --json");
  const Result node = Simulate(
      "--pipelines 4 --tp 2 --iterations 2 --least-energy "
      "--host-power 150 --json");
  ASSERT_EQ(same.code, 0) << same.err;
  ASSERT_EQ(node.code, 0) << node.err;
  const nlohmann::json a = nlohmann::json::parse(same.out), b = nlohmann::json::parse(node.out);
  EXPECT_EQ(a["energy_scope"], "GPU energy");
  EXPECT_EQ(b["energy_scope"], "GPU + host energy (host 150 W per GPU)");
  EXPECT_EQ(b["inputs"]["goal"], "least-energy");
  EXPECT_GT(b["joulepipe"]["time_s"].get<double>(), a["joulepipe"]["time_s"].get<double>());
  const double host_w = 150.0 * 4 * 8 * 2;
  EXPECT_NEAR(
      b["with_host"]["baseline_energy_j"].get<double>(),
      b["baseline"]["energy_j"].get<double>() + host_w * b["baseline"]["time_s"].get<double>(),
      1e-6);
  // A power budget of the whole job between the baseline's and the
  // least-energy plan's powers: met, and by a slower plan than the baseline.
  const double pb = a["baseline"]["energy_j"].get<double>() / a["baseline"]["time_s"].get<double>();
  const Result power = Simulate("--pipelines 4 --tp 2 --iterations 2 --json --power-budget " +
                                std::to_string(0.8 * pb));
  ASSERT_EQ(power.code, 0) << power.err;
  const nlohmann::json c = nlohmann::json::parse(power.out);
  EXPECT_GT(c["plans"]["intrinsic"]["time_s"].get<double>(), a["plans"]["max_clock"]["time_s"]);
  EXPECT_LE(c["plans"]["intrinsic"]["energy_j"].get<double>() /
                c["plans"]["intrinsic"]["time_s"].get<double>() * 4 * 2,
            0.8 * pb);
  const Result refused = Simulate("--pipelines 4 --iterations 2 --power-budget 1");
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("--power-budget = 1 W"), std::string::npos) << refused.err;
}

TEST_F(SimulateCommandTest, MeasuredDetectionSwitchesAfterTheWindowBothWays) {
  const Result r = Simulate(
      "--pipelines 3 --straggler-slowdown 1.2 --straggler-from 2 --straggler-for 3 "
      "--iterations 9 --detection measured --detection-window 2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["inputs"]["detection"], "measured");
  // Slow in 2..4: switched for 4..6 (two slow iterations seen, then two
  // recovered ones), T' back to T from 7.
  const nlohmann::json& it = j["per_iteration"];
  const double t = it[0]["target_s"];
  for (int i = 0; i < 9; ++i) {
    const bool switched = it[i]["target_s"].get<double>() > t * 1.1;
    EXPECT_EQ(switched, i >= 4 && i <= 6) << "iteration " << i << ": " << it[i];
  }
  const Result human = Simulate(
      "--pipelines 3 --straggler-slowdown 1.2 --straggler-from 2 --iterations 4 "
      "--detection measured");
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("detection     measured: the coordinator's detector"), std::string::npos)
      << human.out;
}

TEST_F(SimulateCommandTest, HumanSummaryShowsBothPoliciesAndTheMethodology) {
  const Result r = Simulate("--pipelines 3 --straggler-slowdown 1.3 --iterations 1");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* text :
       {"baseline", "joulepipe", "saving", "iteration time", "energy/iteration",
        "24 = 3 pipelines x 8 stages x TP 1", "simulated from the profile (not measured)"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
}

TEST_F(SimulateCommandTest, SinglePipelineEqualsEvaluateOfThePlannedPlan) {
  const std::string out = (root_ / "plan-out").string();
  const Result plan =
      Run("plan --profile " + Quote(kProfile) +
          " --schedule 1f1b --stages 8 --microbatches 4 --p-block 83.64 --resolution-ms 5 --out " +
          Quote(out));
  ASSERT_EQ(plan.code, 0) << plan.err;
  const Result evaluate = Run("evaluate --profile " + Quote(kProfile) + " --plan " +
                              Quote(out + "/chosen.json") + " --p-block 83.64 --json");
  ASSERT_EQ(evaluate.code, 0) << evaluate.err;
  const Result sim = Simulate("--pipelines 1 --iterations 2 --resolution-ms 5 --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  const nlohmann::json e = nlohmann::json::parse(evaluate.out);
  const nlohmann::json s = nlohmann::json::parse(sim.out);
  const double energy = e["energy_j"], time = e["time_s"];
  EXPECT_LE(std::abs(s["joulepipe"]["energy_j"].get<double>() - energy) / energy, 1e-9);
  EXPECT_LE(std::abs(s["joulepipe"]["time_s"].get<double>() - time) / time, 1e-9);
}

TEST_F(SimulateCommandTest, TimelineIsWrittenAsChromeTraceJson) {
  const std::string trace = (root_ / "trace.json").string();
  const Result r = Simulate(
      "--pipelines 2 --straggler-slowdown 1.2 --allreduce-ms 50 "
      "--iterations 2 --timeline " +
      Quote(trace));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("timeline"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(Slurp(trace));
  int instructions = 0;
  // Metadata events ("ph": "M") have no "cat": value(), not operator[] (on a
  // const object, a missing key is undefined behaviour; it crashed in CI).
  for (const auto& e : j["traceEvents"]) instructions += e.value("cat", "") == "instruction";
  // First iteration, both policies, 2 pipelines of 64 instructions.
  EXPECT_EQ(instructions, 2 * 2 * 64);
}

TEST_F(SimulateCommandTest, BadFlagsExitTwoNamingTheFlag) {
  const struct {
    const char* flags;
    const char* names;
  } cases[] = {
      {"--pipelines 0", "--pipelines"},
      {"--pipelines 2 --straggler-slowdown 0.9", "--straggler-slowdown"},
      {"--pipelines 2 --straggler-slowdown 1.2 --straggler-pipeline 2", "--straggler-pipeline"},
      {"--pipelines 2 --tp 0", "--tp"},
      {"--pipelines 2 --iterations 0", "--iterations"},
      {"--pipelines 2 --chunks 2", "--chunks"},
      {"--pipelines 2 --schedule zigzag", "--schedule"},
      {"--pipelines 2 --clock-variability 0.5", "--clock-variability"},
      {"--pipelines 2 --stall-probability 1.5", "--stall-probability"},
      {"--pipelines 2 --stall-ms -1", "--stall-ms"},
      {"--pipelines 2 --p2p-latency-us -3", "--p2p-latency-us"},
      {"--pipelines 2 --allreduce-ms nan", "--allreduce-ms"},
      {"--pipelines 2 --detection-lag -1", "--detection-lag"},
      {"--pipelines 2 --detection measured --detection-window 0", "--detection-window"},
      {"--pipelines 2 --detection measured --detection-threshold 1", "--detection-threshold"},
      {"--pipelines 2 --detection psychic", "--detection"},
      {"--pipelines 2 --straggler-slowdown 1.2 --straggler-for 5 --straggler-period 3",
       "--straggler-for"},
      {"--pipelines 2 --resolution-ms 0", "--resolution-ms"},
      {"--pipelines 2 --resolution-ms 0.000001", "--resolution-ms"},  // too fine a grid
      {"--pipelines 2 --p-block -1", "--p-block"},
      {"--pipelines 2 --timeline-iterations 0 --timeline x.json", "--timeline-iterations"},
  };
  for (const auto& c : cases) {
    const Result r = Simulate(c.flags);
    EXPECT_EQ(r.code, 2) << c.flags << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.flags << "\n" << r.err;
    EXPECT_EQ(r.err.find("::"), std::string::npos) << "a library field: " << r.err;
  }
  const Result stages = Simulate("--pipelines 2 --stages 6");
  EXPECT_EQ(stages.code, 2);
  EXPECT_NE(stages.err.find("--stages"), std::string::npos) << stages.err;
  const Result missing =
      Run("simulate --profile " + Quote(kProfile) + " --stages 8 --microbatches 4");
  EXPECT_EQ(missing.code, 2);
}

TEST_F(SimulateCommandTest, PBlockComesFromTheProfileWhenTheFlagIsAbsent) {
  // The measured profile has no metadata: P_block must be given.
  const Result bare = Run("simulate --profile " + Quote(kProfile) +
                          " --stages 8 --microbatches 4 --pipelines 2 --iterations 1");
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.err.find("--p-block"), std::string::npos) << bare.err;
  EXPECT_EQ(bare.err.find("::"), std::string::npos) << bare.err;

  // The same profile with a '# p_block_w:' line runs without the flag and
  // gives the figures of --p-block 83.64.
  const std::string with_metadata = (root_ / "measured.csv").string();
  testing::Spit(with_metadata, "# p_block_w: 83.64\n# source: measured\n" + Slurp(kProfile));
  const std::string shape = " --stages 8 --microbatches 4 --pipelines 2 --iterations 1 --json";
  const Result from_profile = Run("simulate --profile " + Quote(with_metadata) + shape);
  ASSERT_EQ(from_profile.code, 0) << from_profile.err;
  const Result from_flag = Simulate("--pipelines 2 --iterations 1 --json");
  ASSERT_EQ(from_flag.code, 0) << from_flag.err;
  const nlohmann::json a = nlohmann::json::parse(from_profile.out);
  const nlohmann::json b = nlohmann::json::parse(from_flag.out);
  EXPECT_EQ(a["inputs"]["p_block_from"], "profile");
  EXPECT_EQ(b["inputs"]["p_block_from"], "--p-block");
  EXPECT_EQ(a["joulepipe"]["energy_j"], b["joulepipe"]["energy_j"]);
  EXPECT_EQ(a["baseline"]["energy_j"], b["baseline"]["energy_j"]);
  const Result human = Run("simulate --profile " + Quote(with_metadata) +
                           " --stages 8 --microbatches 4 --pipelines 2 --iterations 1");
  EXPECT_NE(human.out.find("83.64 W from the profile"), std::string::npos) << human.out;
}

TEST_F(SimulateCommandTest, HelpTeachesThePoliciesAndTheAccounting) {
  const Result r = Run("simulate --help");
  ASSERT_EQ(r.code, 0);
  for (const char* text : {"baseline", "joulepipe", "P_block", "--straggler-slowdown",
                           "--detection-lag", "--timeline", "Example"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace joulepipe::cli
