#include "joulepipe/runtime/profiler.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/profile_rows.hpp"

namespace joulepipe::runtime {
namespace {

using model::Kind;

// Energy per instruction as a function of clock: lowest at `best_mhz`.
double BowlEnergy(int mhz, int best_mhz) {
  return 1.0 + 1e-5 * (mhz - best_mhz) * (mhz - best_mhz);
}

// Drives `p` like the agent for one iteration of `per_kind` forwards and
// backwards; `energy(kind, mhz, i)` gives each sample's energy.
void Iteration(InSituProfiler& p, int per_kind,
               const std::function<double(Kind, int, int)>& energy) {
  for (int i = 0; i < per_kind; ++i) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      p.OnWait(0.002, 0.002 * 80.0);
      const int mhz = p.ClockFor(kind);
      const double t = 0.01 * 1410.0 / mhz * (kind == Kind::kBackward ? 2 : 1);
      p.OnInstruction(kind, mhz, t, energy(kind, mhz, i), /*approximate=*/true);
    }
  }
  p.OnStepEnd();
}

TEST(CandidateClocksTest, FromMaxDownToTheFloorWithStride) {
  std::vector<int> supported;
  for (int f = 1410; f >= 210; f -= 15) supported.push_back(f);
  const std::vector<int> all = CandidateClocks(supported);
  EXPECT_EQ(all.front(), 1410);
  EXPECT_GE(all.back(), 846);
  EXPECT_LT(all.back(), 861);
  EXPECT_EQ(all[1], 1395);
  const std::vector<int> coarse = CandidateClocks(supported, 0.6, 30);
  EXPECT_EQ(coarse[1], 1380);
  EXPECT_EQ(CandidateClocks(supported, 0.6, 0, 1200).back(), 1200);
  EXPECT_TRUE(CandidateClocks({}).empty());
}

TEST(InSituProfilerTest, RejectsBadOptions) {
  EXPECT_THROW(InSituProfiler(ProfilerOptions{}), model::InputError);
  ProfilerOptions o;
  o.clocks = {1200, 1410};
  EXPECT_THROW(InSituProfiler{o}, model::InputError);
  o.clocks = {1410, 1200};
  o.trim = 0.5;
  EXPECT_THROW(InSituProfiler{o}, model::InputError);
}

TEST(InSituProfilerTest, SweepsHighToLowAndStopsAfterConsecutiveRises) {
  ProfilerOptions o;
  o.stage = 2;
  for (int f = 1410; f >= 810; f -= 60) o.clocks.push_back(f);  // 11 clocks
  o.stop_after_rises = 3;
  InSituProfiler p(o);
  // Warm-up at max.
  EXPECT_EQ(p.ClockFor(Kind::kForward), 1410);
  Iteration(p, 4, [](Kind, int mhz, int) { return BowlEnergy(mhz, 1170); });
  EXPECT_TRUE(p.Report().rows.empty());
  std::vector<int> seen;
  for (int it = 0; it < 30 && !p.done(); ++it) {
    seen.push_back(p.ClockFor(Kind::kForward));
    Iteration(p, 4, [](Kind, int mhz, int) { return BowlEnergy(mhz, 1170); });
  }
  ASSERT_TRUE(p.done());
  // 1410 .. 1170 (minimum) then three rises: 1110, 1050, 990.
  EXPECT_EQ(seen, (std::vector<int>{1410, 1350, 1290, 1230, 1170, 1110, 1050, 990}));
  EXPECT_EQ(p.ClockFor(Kind::kForward), 1410);  // stopped kinds run at max
  const ProfileReport r = p.Report();
  ASSERT_EQ(r.rows.size(), 16u);
  EXPECT_EQ(r.rows[0].stage, 2);
  EXPECT_EQ(r.rows[0].kind, Kind::kForward);
  EXPECT_EQ(r.rows[0].mhz, 1410);
  EXPECT_EQ(r.rows[0].samples, 3);  // the first after the change is dropped
  EXPECT_TRUE(r.rows[0].approximate);
  EXPECT_NEAR(r.rows[0].time_s, 0.01, 1e-12);
  EXPECT_EQ(r.rows[8].kind, Kind::kBackward);
  EXPECT_NEAR(r.rows[8].time_s, 0.02, 1e-12);
  EXPECT_NEAR(r.p_block_w, 80.0, 1e-9);
  EXPECT_EQ(r.iterations, 9);
}

// How long a sweep takes (issue 56, 4): at its start the fewest and the most
// iterations, then the fewest still needed as it goes, 0 once done.
TEST(InSituProfilerTest, SaysHowManyIterationsTheSweepTakesAndHasLeft) {
  ProfilerOptions o;
  for (int f = 1410; f >= 1230; f -= 60) o.clocks.push_back(f);  // 4 clocks
  o.stop_after_rises = 0;                                        // every clock
  const SweepLength length = SweepIterations(o);
  EXPECT_EQ(length.least, 5);  // the warm-up and one per clock
  EXPECT_EQ(length.most, 13);  // every clock repeated twice
  InSituProfiler p(o);
  EXPECT_EQ(p.IterationsLeft(), length.least);
  std::vector<int> left;
  for (int it = 0; it < 20 && !p.done(); ++it) {
    Iteration(p, 4, [](Kind, int, int) { return 1.0; });  // noiseless: no repeat
    left.push_back(p.IterationsLeft());
  }
  ASSERT_TRUE(p.done());
  EXPECT_EQ(left, (std::vector<int>{4, 3, 2, 1, 0}));
}

TEST(InSituProfilerTest, RobustToOutliersAndReportsSpread) {
  ProfilerOptions o;
  o.clocks = {1410};
  o.warmup_iterations = 0;
  o.drop_first_after_change = false;
  InSituProfiler p(o);
  // 10 samples per kind at ~1 J, one 10x outlier.
  Iteration(p, 10, [](Kind, int, int i) { return i == 3 ? 10.0 : 1.0 + 0.01 * (i % 3 - 1); });
  ASSERT_TRUE(p.done());
  const ProfileReport r = p.Report();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_NEAR(r.rows[0].energy_j, 1.0, 0.005);
  EXPECT_GT(r.rows[0].energy_spread, 0);
  EXPECT_LT(r.rows[0].energy_spread, 0.02);
  EXPECT_GT(r.max_confidence, 0);
  EXPECT_EQ(r.approximate_rows, 2);
}

TEST(InSituProfilerTest, RepeatsANoisyClockForMoreSamples) {
  ProfilerOptions o;
  o.clocks = {1410, 1200};
  o.warmup_iterations = 0;
  o.drop_first_after_change = false;
  o.repeat_above = 0.02;
  o.max_repeats = 2;
  InSituProfiler p(o);
  // +-30 % noise: the 1410 MHz row is repeated twice, then kept.
  const auto noisy = [](Kind, int, int i) { return 1.0 + 0.3 * ((i % 3) - 1); };
  Iteration(p, 6, noisy);
  EXPECT_EQ(p.ClockFor(Kind::kForward), 1410);
  Iteration(p, 6, noisy);
  EXPECT_EQ(p.ClockFor(Kind::kForward), 1410);
  Iteration(p, 6, noisy);
  EXPECT_EQ(p.ClockFor(Kind::kForward), 1200);
  const ProfileReport r = p.Report();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].samples, 18);
  EXPECT_GT(r.max_confidence, 0.02);
  // A quiet clock is not repeated.
  Iteration(p, 6, [](Kind, int, int) { return 1.0; });
  EXPECT_TRUE(p.done());
}

TEST(InSituProfilerTest, IgnoresSamplesAtOtherClocksAndShortWaits) {
  ProfilerOptions o;
  o.clocks = {1410, 1200};
  o.warmup_iterations = 0;
  o.drop_first_after_change = false;
  InSituProfiler p(o);
  p.OnWait(1e-5, 1.0);                                      // too short
  p.OnInstruction(Kind::kForward, 1000, 0.01, 3.0, false);  // not the wanted clock
  p.OnInstruction(Kind::kForward, 1410, 0.01, 3.0, false);
  p.OnInstruction(Kind::kBackward, 1410, 0.02, 6.0, false);
  p.OnStepEnd();
  const ProfileReport r = p.Report();
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(r.rows[0].energy_j, 3.0);
  EXPECT_EQ(r.p_block_samples, 0);
  EXPECT_EQ(p.ClockFor(Kind::kForward), 1200);
}

TEST(InSituProfilerTest, MergeWritesACsvThePlannerReads) {
  std::vector<ProfileReport> reports;
  for (int stage = 0; stage < 2; ++stage) {
    ProfilerOptions o;
    o.stage = stage;
    o.clocks = {1410, 1200};
    o.warmup_iterations = 0;
    o.gpu = "NVIDIA A100-SXM4-80GB";
    InSituProfiler p(o);
    for (int it = 0; it < 3; ++it)
      Iteration(p, 3, [stage](Kind, int mhz, int) { return (stage + 1) * mhz / 1000.0; });
    reports.push_back(p.Report());
  }
  reports[1].p_block_w = 90;
  // A data-parallel replica of stage 1 with other figures: averaged.
  ProfileReport replica = reports[1];
  for (ProfileRow& row : replica.rows) row.energy_j *= 2;
  replica.p_block_w = 100;
  reports.push_back(replica);

  const ProfileReport merged = MergeReports(reports);
  ASSERT_EQ(merged.rows.size(), 8u);
  EXPECT_DOUBLE_EQ(merged.p_block_w, 90);  // median of 80, 90, 100
  EXPECT_NEAR(merged.rows[4].energy_j, 1.5 * reports[1].rows[0].energy_j, 1e-9);

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("joulepipe-profile-" + std::to_string(::getpid()) + ".csv"))
                               .string();
  WriteProfileCsv(path, merged);
  const model::Profile read = model::ReadProfileCsv(path);
  std::filesystem::remove(path);
  read.Validate(2, path);
  const model::ClockPoint* point = read.Find(1, Kind::kBackward, 1200);
  ASSERT_NE(point, nullptr);
  const model::Profile direct = ToProfile(merged);
  EXPECT_NEAR(point->energy_j, direct.Find(1, Kind::kBackward, 1200)->energy_j, 1e-6);
  EXPECT_NEAR(point->time_s, direct.Find(1, Kind::kBackward, 1200)->time_s, 1e-9);
  EXPECT_NE(ProfileCsv(merged).find("samples,time_spread,energy_spread,confidence,approximate"),
            std::string::npos);
}

// The CSV says what it is: measured, on which GPU, with the measured P_block
// (so `plan` needs no flag for it), when and by which joulepipe; and it keeps
// every row's statistics exactly.
TEST(InSituProfilerTest, CsvCarriesPBlockSourceGpuAndStatistics) {
  ProfilerOptions o;
  o.clocks = {1410, 1200};
  o.warmup_iterations = 0;
  o.gpu = "NVIDIA H100 80GB HBM3";
  InSituProfiler p(o);
  for (int it = 0; it < 3; ++it) {
    Iteration(p, 3, [](Kind, int mhz, int i) { return mhz / 1000.0 + 0.01 * (i % 3); });
  }
  const ProfileReport report = MergeReports({p.Report()});
  ASSERT_EQ(report.rows.size(), 4u);
  ASSERT_GT(report.p_block_samples, 0);
  EXPECT_NEAR(report.p_block_w, 80.0, 1e-9);  // Iteration's waits: 0.16 J in 2 ms
  EXPECT_EQ(report.gpu, "NVIDIA H100 80GB HBM3");

  const std::string text = ProfileCsv(report);
  EXPECT_EQ(text.rfind("# joulepipe profile\n# gpu: NVIDIA H100 80GB HBM3\n# p_block_w: ", 0), 0u)
      << text;
  EXPECT_NE(text.find("\n# source: measured\n# date: 20"), std::string::npos) << text;
  EXPECT_NE(text.find("\n# joulepipe_version: " + std::string(JOULEPIPE_VERSION) + "\n"),
            std::string::npos)
      << text;

  const model::Profile read = model::ParseProfileCsv(text, "in-situ.csv");
  EXPECT_EQ(read.metadata.source, "measured");
  EXPECT_EQ(read.metadata.gpu, "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(read.metadata.p_block_w.has_value());
  EXPECT_EQ(*read.metadata.p_block_w, report.p_block_w);  // exactly
  EXPECT_EQ(read.metadata.date.size(), 20u);              // 2025-03-01T14:05:09Z
  for (const ProfileRow& row : report.rows) {
    const model::ClockPoint* point = read.Find(row.stage, row.kind, row.mhz);
    ASSERT_NE(point, nullptr);
    EXPECT_EQ(point->time_s, row.time_s);
    EXPECT_EQ(point->energy_j, row.energy_j);
    EXPECT_EQ(point->samples, row.samples);
    EXPECT_EQ(point->time_spread, row.time_spread);
    EXPECT_EQ(point->energy_spread, row.energy_spread);
    EXPECT_EQ(point->confidence, row.confidence);
    EXPECT_EQ(point->approximate, row.approximate);
  }
}

TEST(InSituProfilerTest, WithoutQualifyingWaitsTheProfileHasNoPBlock) {
  ProfilerOptions o;
  o.clocks = {1410};
  o.warmup_iterations = 0;
  o.drop_first_after_change = false;
  InSituProfiler p(o);
  p.OnInstruction(Kind::kForward, 1410, 0.01, 3.0, false);
  p.OnInstruction(Kind::kBackward, 1410, 0.02, 6.0, false);
  p.OnStepEnd();
  const ProfileReport report = p.Report();
  EXPECT_EQ(report.p_block_samples, 0);
  const model::Profile profile = ToProfile(report);
  EXPECT_FALSE(profile.metadata.p_block_w.has_value());
  EXPECT_TRUE(profile.metadata.gpu.empty());
  EXPECT_EQ(profile.metadata.source, "measured");
  const std::string text = ProfileCsv(report);
  EXPECT_EQ(text.find("p_block_w"), std::string::npos) << text;
  EXPECT_EQ(text.find("# gpu:"), std::string::npos) << text;
  EXPECT_FALSE(model::ParseProfileCsv(text, "P.csv").metadata.p_block_w.has_value());
}

TEST(InSituProfilerTest, MergedReportNamesEveryDistinctGpu) {
  ProfileReport a, b, c, d;
  a.gpu = "NVIDIA A100-SXM4-80GB";
  b.gpu = "NVIDIA A100-SXM4-80GB";
  c.gpu = "NVIDIA H100 80GB HBM3";
  // d: a rank that did not know its GPU
  EXPECT_EQ(MergeReports({a, b, d}).gpu, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(MergeReports({a, d, c, b}).gpu, "NVIDIA A100-SXM4-80GB, NVIDIA H100 80GB HBM3");
  EXPECT_EQ(MergeReports({d}).gpu, "");
}

}  // namespace
}  // namespace joulepipe::runtime

namespace joulepipe::runtime {
namespace {

// Issue 40, 6: a GPU throttled by its power cap runs every request at or
// above 1365 MHz at 1365 MHz. The rows are named by the clock that ran, the
// requests that ran at one clock are one row, and the report says so: no
// plan can ask for a clock the GPU does not run.
TEST(InSituProfilerTest, RequestsAThrottledGpuDidNotRunAreOneRowAtTheClockItRan) {
  ProfilerOptions o;
  o.clocks = {1410, 1395, 1380, 1365, 1350, 1335};
  o.stop_after_rises = 0;
  o.gpu = "NVIDIA A100-SXM4-80GB";
  InSituProfiler p(o);
  for (int it = 0; it < 12 && !p.done(); ++it) {
    for (int i = 0; i < 4; ++i) {
      for (Kind kind : {Kind::kForward, Kind::kBackward}) {
        p.OnWait(0.002, 0.002 * 80.0);
        const int mhz = p.ClockFor(kind);
        const int ran = std::min(mhz, 1365);
        const double t = 0.01 * 1410.0 / ran;
        p.OnInstruction(kind, mhz, t, t * 390, /*approximate=*/false, ran);
      }
    }
    p.OnStepEnd();
  }
  ASSERT_TRUE(p.done());
  const ProfileReport r = p.Report();
  std::vector<int> forward;
  for (const ProfileRow& row : r.rows) {
    if (row.kind == Kind::kForward) forward.push_back(row.mhz);
  }
  EXPECT_EQ(forward, (std::vector<int>{1365, 1350, 1335}));
  const ProfileRow& top = r.rows.front();
  EXPECT_EQ(top.mhz, 1365);
  EXPECT_EQ(top.requested_mhz, (std::vector<int>{1410, 1395, 1380, 1365}));
  ASSERT_EQ(r.notes.size(), 2u);  // forward and backward
  EXPECT_NE(r.notes[0].find("stage 0 forward: 4 clocks from 1410 to 1365 MHz requested, the GPU "
                            "ran 1365 MHz"),
            std::string::npos)
      << r.notes[0];
  // The profile a plan is made from names only clocks the GPU ran.
  const model::Profile profile = ToProfile(r);
  EXPECT_EQ(profile.MaxClock(0, Kind::kForward).mhz, 1365);
  // Replicas of the stage merge the same way, and the notes travel.
  const ProfileReport merged = MergeReports({r, r});
  EXPECT_EQ(merged.rows.size(), r.rows.size());
  EXPECT_EQ(merged.notes, r.notes);
}

// A throttled GPU runs several requests at one clock; their energies differ
// by noise alone. Rising that way must not end the sweep before a lower
// clock ran (it did, in 1 of 3 runs of test_pytorch_api's throttled case).
TEST(InSituProfilerTest, RequestsThatRanAtTheSameClockAreNoRises) {
  ProfilerOptions o;
  o.clocks = {1410, 1395, 1380, 1365, 1350, 1335};
  o.stop_after_rises = 2;
  InSituProfiler p(o);
  for (int it = 0; it < 14 && !p.done(); ++it) {
    for (int i = 0; i < 4; ++i) {
      for (Kind kind : {Kind::kForward, Kind::kBackward}) {
        const int mhz = p.ClockFor(kind);
        const int ran = std::min(mhz, 1365);
        const double t = 0.01 * 1410.0 / ran;
        // Each request at 1365 costs a little more than the last (noise);
        // below it energy falls again.
        const double noise = mhz >= 1365 ? 1 + 1e-3 * (1410 - mhz) : 1.0;
        p.OnInstruction(kind, mhz, t, t * 390 * noise * ran / 1365.0, false, ran);
      }
    }
    p.OnStepEnd();
  }
  std::vector<int> forward;
  for (const ProfileRow& row : p.Report().rows) {
    if (row.kind == Kind::kForward) forward.push_back(row.mhz);
  }
  // Every clock below the throttled ones was measured.
  EXPECT_EQ(forward, (std::vector<int>{1365, 1350, 1335}));
}

// A clock whose samples were all disturbed (here: 3x as long, as when a
// clock switch or another process lands in them) would be left out by the
// planner; the profiler measures it again with more samples before it is
// done, the new row replaces the old one, and the notes say so. Before, the
// row went to the planner as measured (issue 40: "planning failed ... line
// 24 ... re-measure this clock or delete the row").
std::vector<int> SweepWithOneDisturbedClock(InSituProfiler& p, int disturbed_mhz,
                                            int disturbed_visits, int* iterations) {
  std::vector<int> visits;  // forward clocks, one per iteration after warm-up
  int seen = 0;
  for (*iterations = 0; *iterations < 40 && !p.done(); ++*iterations) {
    const int fwd = p.ClockFor(Kind::kForward);
    if (*iterations > 0) visits.push_back(fwd);
    const bool disturbed = fwd == disturbed_mhz && *iterations > 0 && seen++ < disturbed_visits;
    for (int i = 0; i < 4; ++i) {
      for (Kind kind : {Kind::kForward, Kind::kBackward}) {
        const int mhz = p.ClockFor(kind);
        double t = 0.01 * 1410.0 / mhz;
        if (kind == Kind::kForward && disturbed) t *= 3;
        p.OnInstruction(kind, mhz, t, t * 300 * mhz / 1410.0, false, mhz);
      }
    }
    p.OnStepEnd();
  }
  return visits;
}

// Four clocks, every one visited (no early stop).
ProfilerOptions FourClocks() {
  ProfilerOptions o;
  o.clocks = {1410, 1350, 1290, 1230};
  o.stop_after_rises = 0;
  return o;
}

TEST(InSituProfilerTest, AnImplausibleRowIsMeasuredAgainBeforeItIsDone) {
  InSituProfiler p(FourClocks());
  int iterations = 0;
  // Only the first visit of 1350 MHz is disturbed.
  const std::vector<int> visits = SweepWithOneDisturbedClock(p, 1350, 1, &iterations);
  ASSERT_TRUE(p.done());
  // The sweep, then 1350 MHz again for three iterations.
  EXPECT_EQ(visits, (std::vector<int>{1410, 1350, 1290, 1230, 1350, 1350, 1350}));
  const ProfileReport r = p.Report();
  ASSERT_EQ(r.rows.size(), 8u);
  const ProfileRow& again = r.rows[1];
  ASSERT_EQ(again.mhz, 1350);
  EXPECT_NEAR(again.time_s, 0.01 * 1410.0 / 1350, 1e-12);  // the new samples only
  EXPECT_EQ(again.samples, 11);  // 3 iterations x 4, less the first after the change
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("stage 0 forward at 1350 MHz was measured at"), std::string::npos)
      << r.notes[0];
  EXPECT_NE(r.notes[0].find("measured again over 3 iterations"), std::string::npos) << r.notes[0];
  EXPECT_TRUE(model::ImplausibleRows(ToProfile(r)).empty());
}

TEST(InSituProfilerTest, ARowStillImplausibleAfterItsReMeasureIsKeptForThePlannerToLeaveOut) {
  InSituProfiler p(FourClocks());
  int iterations = 0;
  const std::vector<int> visits = SweepWithOneDisturbedClock(p, 1350, 99, &iterations);
  ASSERT_TRUE(p.done());  // once only: it does not loop
  EXPECT_EQ(visits.size(), 7u);
  const std::vector<model::ImplausibleRow> odd = model::ImplausibleRows(ToProfile(p.Report()));
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0].mhz, 1350);
}

TEST(InSituProfilerTest, NoReMeasureWhenItIsSwitchedOff) {
  ProfilerOptions o = FourClocks();
  o.remeasure_iterations = 0;
  InSituProfiler p(o);
  int iterations = 0;
  EXPECT_EQ(SweepWithOneDisturbedClock(p, 1350, 1, &iterations).size(), 4u);
  EXPECT_TRUE(p.done());
  EXPECT_TRUE(p.Report().notes.empty());
}

// Issue 57, 1: the P_block a job plans with when none of its waits was long
// enough to measure it is the library's (it was the Python session's).
TEST(UnmeasuredPBlock, TheCataloguesFigureOnlyWhenNoWaitMeasuredIt) {
  ProfileReport merged;
  const std::optional<PBlockFallback> a100 = UnmeasuredPBlock(merged, "NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(a100.has_value());
  EXPECT_GT(a100->watts, 0);
  EXPECT_NE(a100->note.find("the catalogue's figure for NVIDIA A100-SXM4-80GB"), std::string::npos)
      << a100->note;
  EXPECT_NE(a100->note.find("P_block; a pipeline of one stage has no bubbles"), std::string::npos);
  EXPECT_FALSE(UnmeasuredPBlock(merged, "a GPU no catalogue knows").has_value());
  merged.p_block_samples = 3;
  merged.p_block_w = 91;
  EXPECT_FALSE(UnmeasuredPBlock(merged, "NVIDIA A100-SXM4-80GB").has_value());
}

}  // namespace
}  // namespace joulepipe::runtime
