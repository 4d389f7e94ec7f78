// `joulepipe site` end to end on a small job: the accounting identities of
// the JSON, joulepipe's same-speed run, a binding facility budget, and flag
// errors naming the flag.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

using testing::Result;

class SiteCommandTest : public testing::ScratchDirTest {
 protected:
  SiteCommandTest() : ScratchDirTest("site") {}

  // GPT-3 XL on 16 A100-SXM (TP 1 x PP 4 x DP 4), 1B tokens.
  Result Site(const std::string& extra) const {
    return Run(
        "site --model gpt3-1.3b --gpu a100-sxm --gpus 16 --tp 1 --pp 4 --global-batch 32 "
        "--tokens 1e9 " +
        extra);
  }
};

TEST_F(SiteCommandTest, FiguresFollowTheAccountingAndJoulepipeKeepsTheSpeed) {
  const Result r = Site("--host-power 100 --pue 1.25 --straggler-slowdown 1.2 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["figures"].get<std::string>().find("simulated"), std::string::npos);
  EXPECT_EQ(j["gpus"], 16);
  EXPECT_EQ(j["iterations"].get<double>(), std::ceil(1e9 / (32 * 2048.0)));
  for (const char* scenario : {"healthy", "straggler"}) {
    for (const char* policy : {"baseline", "joulepipe"}) {
      const nlohmann::json& f = j[scenario][policy];
      const double duration = f["duration_s"], it = f["it_energy_mwh"];
      EXPECT_NEAR(duration, j["iterations"].get<double>() * f["iteration_s"].get<double>(),
                  1e-6 * duration);
      EXPECT_NEAR(it, f["gpu_energy_mwh"].get<double>() + 100.0 * 16 * duration / 3.6e9, 1e-9 * it);
      EXPECT_NEAR(f["facility_energy_mwh"].get<double>(), 1.25 * it, 1e-9 * it);
      EXPECT_NEAR(f["average_facility_mw"].get<double>(),
                  f["facility_energy_mwh"].get<double>() * 3600 / duration, 1e-9);
      EXPECT_NEAR(f["cost"].get<double>(), f["facility_energy_mwh"].get<double>() * 1e3 * 0.08,
                  1e-9);
      EXPECT_GE(f["peak_facility_mw"].get<double>(), f["average_facility_mw"].get<double>());
    }
    const nlohmann::json& b = j[scenario]["baseline"];
    const nlohmann::json& q = j[scenario]["joulepipe"];
    EXPECT_LE(q["iteration_s"].get<double>(), b["iteration_s"].get<double>() * (1 + 1e-9));
    EXPECT_LT(q["gpu_energy_mwh"].get<double>(), b["gpu_energy_mwh"].get<double>());
  }
  // The others wait for the straggler: joulepipe saves more there.
  auto saving = [&](const char* scenario) {
    return 1 - j[scenario]["joulepipe"]["gpu_energy_mwh"].get<double>() /
                   j[scenario]["baseline"]["gpu_energy_mwh"].get<double>();
  };
  EXPECT_GT(saving("straggler"), saving("healthy"));
}

TEST_F(SiteCommandTest, ABindingBudgetSlowsTheRunAndJoulepipePowersMoreGpus) {
  const Result free = Site("--host-power 100 --json");
  ASSERT_EQ(free.code, 0) << free.err;
  const double base_mw =
      nlohmann::json::parse(free.out)["healthy"]["baseline"]["average_facility_mw"];
  // 10 % under what the 16 GPUs draw at full clocks.
  const Result r =
      Site("--host-power 100 --json --power-budget-mw " + std::to_string(0.9 * base_mw));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json b = nlohmann::json::parse(r.out)["budget"];
  ASSERT_TRUE(b["fits"].get<bool>()) << r.out;
  EXPECT_GT(b["slowdown"].get<double>(), 0);
  EXPECT_LE(b["run"]["average_facility_mw"].get<double>(), 0.9 * base_mw);
  EXPECT_LT(b["gpus_by_average_power"]["baseline"].get<int>(), 16);
  EXPECT_GE(b["gpus_by_average_power"]["joulepipe"].get<int>(),
            b["gpus_by_average_power"]["baseline"].get<int>());
  // As one job of the same global batch (32 sequences of 1 = 32 microbatches,
  // pipelines of 4 GPUs): a data-parallel size that divides it, at most the
  // facility's capacity. (The capacity alone once gave 160 pipelines for a
  // batch of 1,536.)
  for (const char* policy : {"baseline", "joulepipe"}) {
    for (const char* by : {"average", "peak"}) {
      const int capacity = b[std::string("gpus_by_") + by + "_power"][policy];
      const int job = b[std::string("job_gpus_by_") + by + "_power"][policy];
      EXPECT_LE(job, capacity);
      EXPECT_EQ(job % 4, 0);
      if (job > 0) {
        EXPECT_EQ(32 % (job / 4), 0) << policy << " " << by << ": " << job;
      }
    }
  }
  // The table says the same in words.
  const Result text = Site("--host-power 100 --power-budget-mw " + std::to_string(0.9 * base_mw));
  EXPECT_NE(text.out.find("as one job of this global batch"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fastest within it:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("IT energy (GPU + host)"), std::string::npos) << text.out;
}

// A Hugging Face model run eagerly moves attention scores through HBM: the
// same job takes longer, and the figures say which framework.
TEST_F(SiteCommandTest, TheFrameworkProfileChangesTheIterationTime) {
  const Result fused = Site("--json");
  const Result eager = Site("--framework hf-eager --json");
  ASSERT_EQ(fused.code, 0) << fused.err;
  ASSERT_EQ(eager.code, 0) << eager.err;
  const double a = nlohmann::json::parse(fused.out)["healthy"]["baseline"]["iteration_s"];
  const double b = nlohmann::json::parse(eager.out)["healthy"]["baseline"]["iteration_s"];
  EXPECT_GT(b, 1.1 * a);
  EXPECT_NE(eager.out.find("hf-eager"), std::string::npos);
}

// The job's memory estimate is part of the projection, and a job that
// cannot fit says so (physics/memory.hpp).
TEST_F(SiteCommandTest, TheProjectionStatesMemoryAndWarnsWhenTheJobCannotFit) {
  const Result fits = Site("");
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_NE(fits.out.find("  memory      "), std::string::npos) << fits.out;
  EXPECT_NE(fits.out.find(" of 80 GiB per GPU at the peak (stage 0)"), std::string::npos)
      << fits.out;
  EXPECT_EQ(fits.out.find("does not fit"), std::string::npos) << fits.out;
  const Result too_big =
      Run("site --model gpt3-175b --gpu a100-sxm --gpus 8 --tp 8 --pp 1 --global-batch 8 "
          "--tokens 1e8 --json");
  ASSERT_EQ(too_big.code, 0) << too_big.err;
  const std::string job = nlohmann::json::parse(too_big.out)["job"];
  EXPECT_NE(job.find("this job does not fit in GPU memory with a 10% margin"), std::string::npos)
      << job;
}

// The cost names its currency: USD unless --currency says otherwise, in the
// table and in the JSON (issue 44: "cost (0.08 per kWh) 39.0 k" named none).
TEST_F(SiteCommandTest, TheCostNamesItsCurrency) {
  const Result usd = Site("");
  ASSERT_EQ(usd.code, 0) << usd.err;
  EXPECT_NE(usd.out.find("cost (0.08 USD per kWh)"), std::string::npos) << usd.out;
  const Result eur = Site("--currency EUR --price-per-kwh 0.2 --json");
  ASSERT_EQ(eur.code, 0) << eur.err;
  EXPECT_EQ(nlohmann::json::parse(eur.out)["inputs"]["currency"], "EUR");
  const Result text = Site("--currency EUR");
  EXPECT_NE(text.out.find(" EUR "), std::string::npos) << text.out;
  const Result bad = Site("--currency 'US D'");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--currency must be 1-8 characters"), std::string::npos) << bad.err;
}

// What the grid sees (issue 45): N jobs in phase swing N times one job;
// at random phases no more than that; a site ramp limit is met, in phase, by
// the firmware floor and by joulepipe's plan + floor, joulepipe for less
// facility energy, its floor's energy counted.
TEST_F(SiteCommandTest, GridFiguresScaleWithTheJobsAndARampLimitIsMet) {
  const Result one = Site("--host-power 100 --grid --json");
  ASSERT_EQ(one.code, 0) << one.err;
  const nlohmann::json g1 = nlohmann::json::parse(one.out)["grid"];
  const Result four = Site("--host-power 100 --grid --jobs 4 --json");
  ASSERT_EQ(four.code, 0) << four.err;
  const nlohmann::json g4 = nlohmann::json::parse(four.out)["grid"];
  EXPECT_EQ(g4["jobs"], 4);
  for (const char* policy : {"baseline", "joulepipe"}) {
    SCOPED_TRACE(policy);
    const double swing = g1[policy]["aligned"]["swing_w"].get<double>();
    EXPECT_GT(swing, 0);
    EXPECT_NEAR(g4[policy]["aligned"]["swing_w"].get<double>(), 4 * swing, 1e-6 * swing);
    EXPECT_NEAR(g4[policy]["aligned"]["peak_w"].get<double>(),
                4 * g1[policy]["aligned"]["peak_w"].get<double>(), 1e-3);
    EXPECT_LE(g4[policy]["random"]["swing_w"].get<double>(), 4 * swing * (1 + 1e-9));
    // The trough includes the host's 100 W per GPU of every job.
    EXPECT_GE(g4[policy]["aligned"]["trough_w"].get<double>(), 4 * 16 * 100.0);
  }
  const double ramp = g4["baseline"]["aligned"]["ramp_w_per_s"].get<double>();
  const Result shaped = Site("--host-power 100 --jobs 4 --json --max-ramp-mw-per-s " +
                             std::to_string(ramp / 5 / 1e6));
  ASSERT_EQ(shaped.code, 0) << shaped.err;
  const nlohmann::json j = nlohmann::json::parse(shaped.out);
  const nlohmann::json& g = j["grid"];
  for (const char* how : {"firmware", "chosen"}) {
    SCOPED_TRACE(how);
    EXPECT_TRUE(g[how]["meets"].get<bool>());
    EXPECT_LE(g[how]["site"]["aligned"]["ramp_w_per_s"].get<double>(), ramp / 5 * (1 + 1e-6));
  }
  EXPECT_GT(g["firmware"]["floor_w"].get<double>(), 0);
  EXPECT_GT(g["firmware"]["run"]["facility_energy_mwh"].get<double>(),
            j["healthy"]["baseline"]["facility_energy_mwh"].get<double>());
  EXPECT_LT(g["chosen"]["run"]["facility_energy_mwh"].get<double>(),
            g["firmware"]["run"]["facility_energy_mwh"].get<double>());
  const Result text = Site("--jobs 4 --max-ramp-mw-per-s " + std::to_string(ramp / 5 / 1e6));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("what the grid sees: 4 jobs of 16 GPUs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("of which for the grid"), std::string::npos) << text.out;
  const Result bad = Site("--grid --jobs 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--jobs must be 1..10000"), std::string::npos) << bad.err;
}

TEST_F(SiteCommandTest, BadFlagsNameTheFlag) {
  const std::string job = "site --gpu a100-sxm --tp 1 --pp 4 --tokens 1e9 ";
  const Result gpus = Run(job + "--model gpt3-1.3b --global-batch 32 --gpus 18");
  EXPECT_EQ(gpus.code, 2);
  EXPECT_NE(gpus.err.find("--gpus must be a multiple of --tp x --pp = 4"), std::string::npos)
      << gpus.err;
  const Result pue = Site("--pue 0.5");
  EXPECT_EQ(pue.code, 2);
  EXPECT_NE(pue.err.find("--pue must be 1..3"), std::string::npos) << pue.err;
  const Result batch = Run(job + "--model gpt3-1.3b --gpus 16 --global-batch 30");
  EXPECT_EQ(batch.code, 2);
  EXPECT_NE(batch.err.find("--global-batch 30 must be a multiple"), std::string::npos) << batch.err;
  const Result framework = Site("--framework deepspeed");
  EXPECT_EQ(framework.code, 2);
  EXPECT_NE(framework.err.find("--framework 'deepspeed' is not one of megatron, hf-eager"),
            std::string::npos)
      << framework.err;
  const Result model = Run(job + "--model nope --gpus 16");
  EXPECT_EQ(model.code, 2);
  EXPECT_NE(model.err.find("gpt3-175b"), std::string::npos) << model.err;
}

}  // namespace
}  // namespace joulepipe::cli
