// `joulepipe report` end to end: a plan directory (+ a simulation) becomes
// one HTML file with the figures; inputs that do not belong together, and an
// existing --out, are refused naming the flag.
#include <string>

#include <gtest/gtest.h>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Quote;
using testing::Result;
using testing::Slurp;

const std::string kProfile =
    std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv";

class ReportCommandTest : public testing::ScratchDirTest {
 protected:
  ReportCommandTest() : ScratchDirTest("report") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    plan_ = root_ / "plan";
    const Result r =
        Run("plan --profile " + Quote(kProfile) +
            " --schedule 1f1b --stages 8 --microbatches 8 --p-block 83.64 --out " + Quote(plan_));
    ASSERT_EQ(r.code, 0) << r.err;
  }

  fs::path plan_;
};

TEST_F(ReportCommandTest, WritesOneSelfContainedPageWithEveryFigure) {
  const fs::path run = root_ / "run.json";
  const Result sim = Run("simulate --profile " + Quote(kProfile) +
                         " --p-block 83.64 --stages 8 --microbatches 8 --pipelines 2 "
                         "--straggler-slowdown 1.2 --iterations 2 --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  testing::Spit(run, sim.out);
  const fs::path out = root_ / "report.html";
  const Result r = Run("report --frontier " + Quote(plan_) + " --sim " + Quote(run) +
                       " --host-power 150 --out " + Quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = Slurp(out);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // Frontier, two timelines, the stage bars.
  std::size_t svgs = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos;
       at = html.find("<svg", at + 1)) {
    ++svgs;
  }
  EXPECT_EQ(svgs, 4u);
  for (const char* needle : {"least node energy", "least GPU + host energy (host 150 W per GPU)",
                             "5% slowdown", "straggler response", "How these figures were made",
                             "source: imported", "blocked (waiting)", "Energy per stage",
                             "whole job, 16 GPUs (simulated)", "class=\"instruction\""}) {
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
  }
  // 8 stages x 8 microbatches x 2 kinds, in each of the two timelines.
  std::size_t bars = 0;
  for (std::size_t at = html.find("class=\"instruction\""); at != std::string::npos;
       at = html.find("class=\"instruction\"", at + 1)) {
    ++bars;
  }
  EXPECT_EQ(bars, 2u * 8 * 8 * 2);
  // Not replaced unless asked.
  const Result again = Run("report --frontier " + Quote(plan_) + " --out " + Quote(out));
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("exists; pass --force"), std::string::npos) << again.err;
  EXPECT_EQ(Slurp(out), html);
  EXPECT_EQ(Run("report --frontier " + Quote(plan_) + " --force --out " + Quote(out)).code, 0);
}

// A simulation with a waveform (`simulate --grid`) adds "What the grid
// sees": the job's power at its start with the grid plan's floors, and its
// spectrum; a malformed waveform is refused naming the file and the field.
TEST_F(ReportCommandTest, AWaveformAddsWhatTheGridSees) {
  const fs::path run = root_ / "run.json";
  const Result sim = Run("simulate --profile " + Quote(kProfile) +
                         " --p-block 83.64 --stages 8 --microbatches 8 --pipelines 2 "
                         "--allreduce-ms 200 --iterations 3 --grid --min-power-fraction 0.5 "
                         "--grid-frontier --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  testing::Spit(run, sim.out);
  const fs::path out = root_ / "report.html";
  const Result r =
      Run("report --frontier " + Quote(plan_) + " --sim " + Quote(run) + " --out " + Quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = Slurp(out);
  for (const char* needle :
       {"What the grid sees", "The job&apos;s power at its start and over its first iteration",
        "Oscillation spectrum", "grid plan: firmware floor", "band RMS", "0.1 Hz",
        "the energy-smoothness frontier"}) {
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
  }
  std::string broken = sim.out;
  const std::size_t at = broken.find("\"joulepipe_w\":[");
  ASSERT_NE(at, std::string::npos);
  broken.replace(at, std::string("\"joulepipe_w\":[").size(), "\"joulepipe_w\":[\"x\",");
  testing::Spit(run, broken);
  const Result bad = Run("report --frontier " + Quote(plan_) + " --sim " + Quote(run) +
                         " --force --out " + Quote(out));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("waveform.joulepipe_w holds something that is not a number"),
            std::string::npos)
      << bad.err;
}

TEST_F(ReportCommandTest, RefusesInputsThatDoNotBelongTogether) {
  const fs::path out = root_ / "r.html";
  const Result none = Run("report --frontier " + Quote(root_ / "nothing") + " --out " + Quote(out));
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("--frontier"), std::string::npos) << none.err;
  // Another pipeline's run.
  const Result sim = Run("simulate --profile " + Quote(kProfile) +
                         " --p-block 83.64 --stages 8 --microbatches 16 --pipelines 2 "
                         "--iterations 1 --json");
  ASSERT_EQ(sim.code, 0) << sim.err;
  testing::Spit(root_ / "other.json", sim.out);
  const Result other = Run("report --frontier " + Quote(plan_) + " --sim " +
                           Quote(root_ / "other.json") + " --out " + Quote(out));
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("not this plan's 1f1b 8 x 8"), std::string::npos) << other.err;
  // Another profile than the frontier's.
  const std::string a40 =
      std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a40_bf16.csv";
  const Result profile = Run("report --frontier " + Quote(plan_) + " --profile " + Quote(a40) +
                             " --out " + Quote(out));
  EXPECT_EQ(profile.code, 2);
  EXPECT_NE(profile.err.find("give the profile the frontier was planned on"), std::string::npos)
      << profile.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace joulepipe::cli
