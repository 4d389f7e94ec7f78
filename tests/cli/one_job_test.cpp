// One job, one answer (issue 44, item 2): `site` and `tune` given the demo's
// job (GPT-3 175B on 1,024 A100-SXM, TP 8 x PP 8 x DP 16, 1F1B, global
// batch 1,536 x 2,048) agree on its iteration time and energy within 1 %;
// `demo`, which runs the measured stage slice, says its figures are the
// slice's and names the command for the whole job. (Before, the demo's
// "183.2 MWh" read as GPT-3 175B's, which `tune` put at 248.9.)
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

using testing::Result;

class OneJobTest : public testing::ScratchDirTest {
 protected:
  OneJobTest() : ScratchDirTest("one-job") {}
};

TEST_F(OneJobTest, SiteAndTuneAgreeOnTheDemosJobAndTheDemoSaysItIsTheSlice) {
  const std::string job = "--model gpt3-175b --gpu a100-sxm --gpus 1024 --tp 8 --pp 8 ";
  const Result site = Run("site " + job + "--tokens 300e9 --json");
  ASSERT_EQ(site.code, 0) << site.err;
  const Result tune = Run("tune " + job + "--keep tp,pp,dp,mbs,schedule --json");
  ASSERT_EQ(tune.code, 0) << tune.err;
  const nlohmann::json s = nlohmann::json::parse(site.out)["healthy"]["baseline"];
  const nlohmann::json t = nlohmann::json::parse(tune.out)["current"]["full_clocks"];
  const double site_s = s["iteration_s"], tune_s = t["time_s"];
  const double site_j = s["gpu_energy_per_iteration_j"], tune_j = t["energy_j"];
  EXPECT_NEAR(site_s / tune_s, 1, 0.01) << site_s << " s vs " << tune_s << " s";
  EXPECT_NEAR(site_j / tune_j, 1, 0.01) << site_j << " J vs " << tune_j << " J";

  const Result demo = Run("demo --no-files --out " + testing::Quote(root_ / "demo"));
  ASSERT_EQ(demo.code, 0) << demo.err;
  EXPECT_NE(demo.out.find("Projected full run of the measured slice"), std::string::npos)
      << demo.out;
  EXPECT_NE(demo.out.find("joulepipe site --model gpt3-175b --gpu a100-sxm --gpus 1024"),
            std::string::npos)
      << demo.out;
}

}  // namespace
}  // namespace joulepipe::cli
