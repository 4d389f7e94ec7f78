// `joulepipe profile --simulate`, run as a separate process: the issue's
// example writes a profile that `plan` accepts; the CSV reads back exactly;
// bad models, GPUs and layer splits exit 2 naming what to change and leave
// no file behind; --help teaches the ids, the format and the next command.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "cli_test_support.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::Quote;
using testing::Result;
using testing::ScratchDirTest;
using testing::Slurp;

class ProfileCommandTest : public ScratchDirTest {
 protected:
  ProfileCommandTest() : ScratchDirTest("profile") {}

  // Expects exit 2, "joulepipe: error: " and every needle on stderr, nothing
  // on stdout and nothing written in the scratch dir.
  void ExpectRejected(const std::string& args, std::initializer_list<std::string> needles) {
    const Result r = Run(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("joulepipe: error: ", 0), 0u) << r.err;
    for (const std::string& needle : needles) {
      EXPECT_NE(r.err.find(needle), std::string::npos) << "'" << needle << "' not in: " << r.err;
    }
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_TRUE(Entries().empty());
  }
};

TEST_F(ProfileCommandTest, IssueExampleWritesAProfileThatPlanAccepts) {
  const fs::path csv = root_ / "P.csv";
  const Result r =
      Run("profile --simulate --model llama3-70b --gpu h100-sxm --tp 8 --pp 8 "
          "--microbatch-size 1 --seq 8192 --out " +
          Quote(csv));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle :
       {"Simulated profile", "not measured", "per GPU", "llama3-70b", "h100-sxm", "TP 8 x PP 8",
        "+embedding", "+head+loss", "MFU", "P_block", "joulepipe plan --profile"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in:\n" << r.out;
  }
  const std::string text = Slurp(csv);
  EXPECT_EQ(text.rfind("# joulepipe profile\n# gpu: ", 0), 0u) << text.substr(0, 300);
  EXPECT_NE(text.find("\n# source: simulated\n"), std::string::npos);
  EXPECT_NE(text.find("\nstage,instruction,frequency,time,energy\n"), std::string::npos);
  const model::Profile profile = model::ReadProfileCsv(csv.string());
  profile.Validate(8, csv.string());
  const physics::GpuSpec& gpu = physics::FindGpu("h100-sxm");
  EXPECT_EQ(profile.MaxClock(0, model::Kind::kForward).mhz, gpu.max_sm_mhz);
  EXPECT_GT(profile.Points(0, model::Kind::kForward).size(), 10u);
  // The last stage (LM head and loss over 128K logits) is the slowest.
  EXPECT_GT(profile.MaxClock(7, model::Kind::kForward).time_s,
            profile.MaxClock(3, model::Kind::kForward).time_s);

  const Result plan = Run("plan --profile " + Quote(csv) +
                          " --schedule 1f1b --stages 8 --microbatches 16 --p-block " +
                          std::to_string(gpu.p_block_w) +
                          " --resolution-ms 50 --max-plans 3 --out " + Quote(root_ / "plan"));
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("saving"), std::string::npos) << plan.out;
}

TEST_F(ProfileCommandTest, WithoutOutTheCsvGoesToStdoutAndTheSummaryToStderr) {
  const Result r =
      Run("profile --simulate --model gpt3-1.3b --gpu a100-sxm --tp 2 --pp 4 --dp 2 "
          "--recompute full --min-mhz 1200 --microbatches 8");
  ASSERT_EQ(r.code, 0) << r.err;
  const model::Profile profile = model::ParseProfileCsv(r.out, "stdout");
  profile.Validate(4, "stdout");
  EXPECT_EQ(profile.Points(2, model::Kind::kBackward).back().mhz, 1200);
  for (const char* needle : {"recompute full", "DP sync", "iteration", "6,6,6,6 (even)"}) {
    EXPECT_NE(r.err.find(needle), std::string::npos) << needle << " not in:\n" << r.err;
  }
  EXPECT_TRUE(Entries().empty());
}

// The profile says what it is: the metadata lines come first (the catalog
// GPU's name and P_block, source simulated, date, version), and the summary's
// next step no longer asks for --p-block.
// The summary states the memory estimate, and warns when the job cannot fit.
TEST_F(ProfileCommandTest, TheSummaryEstimatesMemoryAndWarnsWhenItDoesNotFit) {
  const auto csv = root_ / "m.csv";
  const Result fits =
      Run("profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 "
          "--dp 16 --microbatches 96 --out " +
          Quote(csv));
  ASSERT_EQ(fits.code, 0) << fits.err;
  EXPECT_NE(fits.out.find("memory       27.3 of 80 GiB per GPU at the peak (stage 0: model "
                          "state 17.7 GiB, activations 9.6 GiB for 8 microbatches in flight)"),
            std::string::npos)
      << fits.out;
  EXPECT_EQ(fits.out.find("does not fit"), std::string::npos) << fits.out;
  const Result too_big =
      Run("profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 --pp 2 "
          "--out " +
          Quote(root_ / "big.csv"));
  ASSERT_EQ(too_big.code, 0) << too_big.err;
  EXPECT_NE(too_big.out.find("warning      does not fit with a 10% margin"), std::string::npos)
      << too_big.out;
}

TEST_F(ProfileCommandTest, TheCsvStartsWithMetadataThatReadsBack) {
  const fs::path csv = root_ / "P.csv";
  const Result r =
      Run("profile --simulate --model gpt3-1.3b --gpu a100-sxm --tp 1 --pp 2 --out " + Quote(csv));
  ASSERT_EQ(r.code, 0) << r.err;
  const physics::GpuSpec& gpu = physics::FindGpu("a100-sxm");
  const std::string text = Slurp(csv);
  const std::string head = "# joulepipe profile\n# gpu: " + gpu.name + "\n# p_block_w: ";
  ASSERT_EQ(text.rfind(head, 0), 0u) << text.substr(0, 300);
  const size_t source = text.find("\n# source: simulated\n# date: ");
  const size_t header = text.find("\nstage,instruction,frequency,time,energy\n");
  ASSERT_NE(source, std::string::npos) << text.substr(0, 300);
  ASSERT_NE(header, std::string::npos);
  EXPECT_LT(source, header);
  EXPECT_NE(text.find("# joulepipe_version: "), std::string::npos);
  EXPECT_EQ(text.find('#', header), std::string::npos);   // no '#' among the rows
  EXPECT_EQ(text.find(",simulated"), std::string::npos);  // no per-row source column

  const model::Profile profile = model::ReadProfileCsv(csv.string());
  EXPECT_EQ(profile.metadata.gpu, gpu.name);
  ASSERT_TRUE(profile.metadata.p_block_w.has_value());
  EXPECT_EQ(*profile.metadata.p_block_w, gpu.p_block_w);
  EXPECT_EQ(profile.metadata.source, "simulated");
  EXPECT_EQ(profile.metadata.date.substr(0, 2), "20");
  EXPECT_FALSE(profile.metadata.joulepipe_version.empty());
  profile.Validate(2, csv.string());

  const size_t next = r.out.find("next\n");
  ASSERT_NE(next, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("joulepipe plan --profile", next), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--p-block", next), std::string::npos) << r.out;

  // `plan` reads the file (P_block given here too until plan takes it from
  // the profile).
  const Result plan = Run("plan --profile " + Quote(csv) +
                          " --schedule 1f1b --stages 2 --microbatches 4 --p-block " +
                          std::to_string(gpu.p_block_w) +
                          " --resolution-ms 50 --max-plans 3 --out " + Quote(root_ / "plan"));
  ASSERT_EQ(plan.code, 0) << plan.err;
}

TEST_F(ProfileCommandTest, MeasuredProfilingIsNotAvailableYet) {
  ExpectRejected(
      "profile --model gpt3-175b --gpu a100-sxm --tp 8 --pp 8 --out " + Quote(root_ / "P.csv"),
      {"not available yet", "--simulate"});
}

TEST_F(ProfileCommandTest, UnknownModelOrGpuListsTheKnownIds) {
  ExpectRejected("profile --simulate --model gpt5 --gpu h100-sxm --tp 8 --pp 8 --out " +
                     Quote(root_ / "P.csv"),
                 {"unknown model 'gpt5'", "gpt3-175b", "llama3-405b", "bloom-176b"});
  ExpectRejected("profile --simulate --model gpt3-175b --gpu b200 --tp 8 --pp 8 --out " +
                     Quote(root_ / "P.csv"),
                 {"b200", "h100-sxm", "a100-sxm4-80gb"});
  ExpectRejected("profile --simulate --gpu h100-sxm --tp 8 --pp 8", {"--model is required"});
}

TEST_F(ProfileCommandTest, LayerSplitAndParallelismErrorsNameTheFlag) {
  const std::string base = "profile --simulate --model gpt3-175b --gpu a100-sxm --tp 8 ";
  const std::string out = " --out " + Quote(root_ / "P.csv");
  ExpectRejected(base + "--pp 4 --layer-split 24,24,24,25" + out,
                 {"--layer-split sums to 97", "96"});
  ExpectRejected(base + "--pp 4 --layer-split 48,48" + out, {"2 entries", "--pp is 4"});
  ExpectRejected(base + "--pp 4 --layer-split 24,x,24,24" + out, {"--layer-split entry 2"});
  ExpectRejected(base + "--pp 5" + out, {"96 layers", "--pp 5", "--layer-split balanced"});
  ExpectRejected(base + "--pp 8 --seq 4096" + out, {"--seq 4096", "2048"});
  ExpectRejected(base + "--pp 8 --recompute selective" + out, {"--recompute 'selective'"});
  ExpectRejected(base + "--pp 8 --power-limit 900" + out, {"--power-limit 900"});
  ExpectRejected("profile --simulate --model llama3-70b --gpu h100-sxm --tp 16 --pp 8" + out,
                 {"--tp 16", "key/value heads"});
  // An explicit or balanced split is accepted where the even one is not.
  const Result balanced = Run(base + "--pp 5 --layer-split balanced" + out);
  ASSERT_EQ(balanced.code, 0) << balanced.err;
  EXPECT_NE(balanced.out.find("(balanced)"), std::string::npos) << balanced.out;
}

// Merak places a pipeline's stages side by side, so on 4-GPU nodes a TP 2 x
// PP 4 job's TP pairs lie in different nodes and their all-reduces share
// the node's network: every instruction gets slower, and the summary says so.
TEST_F(ProfileCommandTest, TpPairsAcrossNodesShareTheNodesNetwork) {
  const std::string base =
      "profile --simulate --model gpt3-6.7b --gpu a40 --tp 2 --pp 4 --microbatch-size 4 "
      "--seq 1024 --gpus-per-node 4 ";
  const fs::path inside_csv = root_ / "inside.csv", across_csv = root_ / "across.csv";
  const Result inside = Run(base + "--out " + Quote(inside_csv));
  ASSERT_EQ(inside.code, 0) << inside.err;
  EXPECT_EQ(inside.out.find("placement"), std::string::npos) << inside.out;
  const Result across =
      Run(base + "--rank-order pp-first --node-network-gbps 25 --out " + Quote(across_csv));
  ASSERT_EQ(across.code, 0) << across.err;
  EXPECT_NE(across.out.find("ranks pp-first: the TP all-reduces leave the node, at 6.25 GB/s "
                            "per GPU (25 GB/s per node"),
            std::string::npos)
      << across.out;
  const model::Profile a = model::ReadProfileCsv(inside_csv.string());
  const model::Profile b = model::ReadProfileCsv(across_csv.string());
  for (int s = 0; s < 4; ++s) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      EXPECT_GT(b.MaxClock(s, kind).time_s, 1.2 * a.MaxClock(s, kind).time_s) << s;
    }
  }
  fs::remove(inside_csv);
  fs::remove(across_csv);
  const std::string out = "--out " + Quote(root_ / "P.csv");
  ExpectRejected(base + "--rank-order pp-first " + out,
                 {"leave the 4-GPU nodes", "--node-network-gbps", "--gpus-per-node"});
  ExpectRejected(base + "--rank-order depth-first " + out, {"--rank-order 'depth-first'"});
  ExpectRejected(base + "--node-network-gbps -3 " + out, {"--node-network-gbps must be"});
}

TEST_F(ProfileCommandTest, HelpTeachesIdsFormatAndTheNextCommand) {
  const Result r = Run("profile --help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle :
       {"--simulate", "llama3-70b", "gpt3-1.3b", "bloom-176b", "h100-sxm", "a100-sxm4-80gb",
        "stage,instruction,frequency,time,energy", "--layer-split", "balanced",
        "joulepipe profile --simulate --model llama3-70b --gpu h100-sxm --tp 8 --pp 8",
        "joulepipe plan --profile P.csv"}) {
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in:\n" << r.out;
  }
}

}  // namespace
}  // namespace joulepipe::cli
