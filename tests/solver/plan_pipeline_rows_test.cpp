// The plan call's hardening (docs/limits.md, "Numbers and ranges"): one
// implausible profile row is refused by name (file, line, clock, the row it
// disagrees with, the rule) before it can collapse the frontier or blow up
// the grid; the grid guard measures the span the solver really plans over
// (dominated clocks dropped); and the request's numbers have ranges.
#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../test_support/profiles.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/schedule/clock_plans.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::solver {
namespace {

using model::CheckProfileRows;
using model::ImplausibleRow;
using model::ImplausibleRows;
using model::Kind;
using model::LeaveOutImplausibleRows;
using model::NoRowFasterThanTheTopClock;
using model::testing::Point;

const char* const kRealProfiles[] = {"gpt3-175b+a100_sxm_bf16", "bloom+a100_sxm_bf16",
                                     "gpt3-175b+a40_bf16", "bloom+a40_bf16"};

std::string RealProfilePath(const char* name) {
  return std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + name + ".csv";
}

// The message of the InputError `action` throws; fails the test if none.
template <typename Action>
std::string ErrorOf(Action&& action) {
  try {
    action();
  } catch (const model::InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

void ExpectContains(const std::string& text, std::initializer_list<std::string> needles) {
  for (const std::string& needle : needles) {
    EXPECT_NE(text.find(needle), std::string::npos) << "lacks \"" << needle << "\": " << text;
  }
  EXPECT_EQ(text.find("--"), std::string::npos) << "names a flag: " << text;
}

// One stage, one kind, as a CSV: clocks 1400..800 MHz every 100, time
// t0 * (0.4 + 0.6 * 1400 / f) (60 % of the work at the SM clock), power
// 300 W at the top falling to ~ 170 W. Row k (0 = 1400 MHz) is on line k + 2.
// `override_time` / `override_energy` replace row `row`'s figures when > 0.
std::string LadderCsv(int row = -1, double override_time = 0, double override_energy = 0) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int k = 0; k < 7; ++k) {
    const int mhz = 1400 - 100 * k;
    double time = 0.1 * (0.4 + 0.6 * 1400.0 / mhz);
    double energy = time * (170 + 130 * (mhz - 800) / 600.0);
    if (k == row && override_time > 0) time = override_time;
    if (k == row && override_energy > 0) energy = override_energy;
    for (const char* kind : {"forward", "backward"}) {
      csv += "0," + std::string(kind) + "," + std::to_string(mhz) + "," + std::to_string(time) +
             "," + std::to_string(energy) + "\n";
    }
  }
  return csv;
}

// Line of row k's forward in LadderCsv.
int LineOf(int k) {
  return 2 + 2 * k;
}

TEST(ProfileRows, EveryBundledProfilePasses) {
  for (const char* name : kRealProfiles) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(CheckProfileRows(model::ReadProfileCsv(RealProfilePath(name)), name));
  }
  EXPECT_NO_THROW(CheckProfileRows(model::ParseProfileCsv(LadderCsv(), "L.csv"), "L.csv"));
}

TEST(ProfileRows, ALowClockFarSlowerThanTheClockRatioAllowsIsNamed) {
  // 1200 MHz (row 2) takes 10 s instead of ~0.11 s.
  const model::Profile profile = model::ParseProfileCsv(LadderCsv(2, 10.0), "L.csv");
  ExpectContains(ErrorOf([&] { CheckProfileRows(profile, "L.csv"); }),
                 {"L.csv line " + std::to_string(LineOf(2)) + ": stage 0 forward at 1200 MHz",
                  "takes 10 s", "at 1400 MHz (line 2)", "times as long",
                  "from 1400 to 1200 MHz makes an instruction at most 1.17 times as slow",
                  "re-measure this clock or delete the row"});
}

TEST(ProfileRows, ALowClockFasterThanTheTopOneIsNamed) {
  const model::Profile profile = model::ParseProfileCsv(LadderCsv(4, 0.05), "L.csv");
  ExpectContains(ErrorOf([&] { CheckProfileRows(profile, "L.csv"); }),
                 {"line " + std::to_string(LineOf(4)), "at 1000 MHz", "only 1/",
                  "a lower clock does not make an instruction faster"});
}

TEST(ProfileRows, AnOddTopClockIsBlamedNotTheRowsThatAgree) {
  // The highest clock is the outlier; the six others agree with one another.
  const model::Profile profile = model::ParseProfileCsv(LadderCsv(0, 5.0), "L.csv");
  const std::string message = ErrorOf([&] { CheckProfileRows(profile, "L.csv"); });
  ExpectContains(message, {"L.csv line 2: stage 0 forward at 1400 MHz", "takes 5 s",
                           "a higher clock does not make an instruction slower"});
}

// A profile measured inside a job cannot be re-measured by hand: the rows
// the check refuses are left out instead, each said in words about the job
// (no file line), and what is left passes the check.
TEST(ProfileRows, LeftOutForAJobsOwnMeasurementEachSaid) {
  const model::Profile clean = model::ParseProfileCsv(LadderCsv(), "L.csv");
  std::vector<std::string> notes;
  const model::Profile same = LeaveOutImplausibleRows(clean, &notes);
  EXPECT_TRUE(notes.empty());
  EXPECT_EQ(same.num_rows(), clean.num_rows());

  const model::Profile slow = model::ParseProfileCsv(LadderCsv(2, 10.0), "L.csv");
  const model::Profile kept = LeaveOutImplausibleRows(slow, &notes);
  EXPECT_NO_THROW(CheckProfileRows(kept, "kept"));
  EXPECT_EQ(kept.num_rows(), slow.num_rows() - 2);  // 1200 MHz, forward and backward
  EXPECT_EQ(kept.Find(0, Kind::kForward, 1200), nullptr);
  EXPECT_NE(kept.Find(0, Kind::kForward, 1100), nullptr);
  ASSERT_EQ(notes.size(), 2u);
  ExpectContains(notes[0], {"stage 0 forward at 1200 MHz was measured at 10 s", "at 1400 MHz",
                            "left out of the plan"});
  EXPECT_EQ(notes[0].find("line"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("stage 0 backward at 1200 MHz"), std::string::npos) << notes[1];

  // An odd top clock goes, and the next one is the highest left.
  notes.clear();
  const model::Profile top =
      LeaveOutImplausibleRows(model::ParseProfileCsv(LadderCsv(0, 5.0), "L.csv"), &notes);
  EXPECT_EQ(top.MaxClock(0, Kind::kForward).mhz, 1300);
  EXPECT_EQ(notes.size(), 2u);
  EXPECT_NO_THROW(CheckProfileRows(top, "top"));
}

// A lower clock measured faster than the highest one (noise, throttling) in
// a profile joulepipe measured: planned at the highest clock's time, said
// once per instruction, so no plan is faster than the baseline and no
// saving beats the bound. Imported measurements stay as they are.
TEST(ProfileRows, NoRowOfAMeasuredProfileIsFasterThanItsTopClock) {
  model::Profile fast = model::ParseProfileCsv(LadderCsv(3, 0.09), "L.csv");  // 1100 MHz
  EXPECT_NO_THROW(CheckProfileRows(fast, "L.csv"));  // within the noise allowance
  std::vector<std::string> notes;
  EXPECT_EQ(NoRowFasterThanTheTopClock(fast, &notes).Find(0, Kind::kForward, 1100)->time_s, 0.09);
  EXPECT_TRUE(notes.empty());  // not measured by joulepipe: as it is

  fast.metadata.source = "measured";
  const model::Profile planned = NoRowFasterThanTheTopClock(fast, &notes);
  EXPECT_EQ(planned.Find(0, Kind::kForward, 1100)->time_s, 0.1);
  EXPECT_EQ(planned.Find(0, Kind::kForward, 1100)->energy_j,
            fast.Find(0, Kind::kForward, 1100)->energy_j);
  ASSERT_EQ(notes.size(), 2u);  // forward and backward
  ExpectContains(notes[0], {"stage 0 forward: 1 lower clock (1100 MHz) measured faster than its "
                            "highest clock, 1400 MHz (by up to 10.00 %)",
                            "planned as taking as long as at 1400 MHz"});

  PlanRequest request;
  request.spec = {schedule::Kind::k1F1B, 1, 4, 1};
  request.p_block_w = 60;
  request.objective.goal = model::Goal::kLeastEnergy;
  for (const model::Profile* p : {&planned}) {
    const PipelinePlan plan = PlanPipeline(*p, request);
    for (const FrontierPoint& q : plan.frontier.points) {
      EXPECT_GE(q.time_s, plan.baseline.time_s * (1 - 1e-12));
      if (q.time_s <= plan.baseline.time_s * (1 + 1e-12)) {
        EXPECT_GE(q.energy_j, plan.bound_energy_j * (1 - 1e-9));
      }
    }
  }
}

// Issue 61, 2: a profile of many odd rows is said in a bounded number of
// notes (one per row made a service's status of one job 172.6 MB).
TEST(ProfileRows, ManyOddRowsAreSaidInBoundedNotes) {
  std::string csv = "# source: measured\nstage,instruction,frequency,time,energy\n";
  for (int s = 0; s < 20; ++s) {
    for (int k = 0; k < 10; ++k) {
      // Every other clock 25x the power of the others; every lower clock
      // 2 % faster than the highest (noise the rule plans away).
      const double t = k == 0 ? 0.01 : 0.0098;
      const double power = k % 2 == 0 ? 100 : 2500;
      for (const char* kind : {"forward", "backward"}) {
        csv += std::to_string(s) + "," + kind + "," + std::to_string(1400 - 10 * k) + "," +
               std::to_string(t) + "," + std::to_string(t * power) + "\n";
      }
    }
  }
  const model::Profile profile = model::ParseProfileCsv(csv, "odd.csv");
  EXPECT_EQ(ImplausibleRows(profile).size(), 200u);  // 20 stages x 2 kinds x 5 clocks
  const std::vector<ImplausibleRow> described = ImplausibleRows(profile, 3);
  ASSERT_EQ(described.size(), 200u);
  EXPECT_FALSE(described[2].why.empty());
  EXPECT_TRUE(described[3].why.empty());

  const model::RowRuleResult rule = model::PlannableRows(profile, "odd.csv");
  EXPECT_EQ(rule.profile.num_rows(), 200);
  // kMaxRowNotes rows left out and one count; kMaxRowNotes instructions
  // planned at their top clock's time and one count.
  ASSERT_EQ(rule.notes.size(), 2 * model::kMaxRowNotes + 2);
  ExpectContains(rule.notes[model::kMaxRowNotes],
                 {"192 more rows were left out of the plan the same way",
                  "the last stage 19 "
                  "backward at 1310 MHz",
                  "200 of 400 rows are left"});
  ExpectContains(rule.notes.back(), {"in 32 more stage instructions, 128 lower-clock rows"});
}

TEST(ProfileRows, AnEnergyImplyingAnImplausiblePowerIsNamed) {
  // 1300 MHz (row 1) at 1 mJ: a few hundredths of a watt against ~280 W.
  const model::Profile profile = model::ParseProfileCsv(LadderCsv(1, 0, 0.001), "L.csv");
  ExpectContains(ErrorOf([&] { CheckProfileRows(profile, "L.csv"); }),
                 {"line " + std::to_string(LineOf(1)), "at 1300 MHz", "mean power of",
                  "differ in power by at most 20x"});
}

TEST(ProfileRows, TheMarginsAreTheDocumentedOnes) {
  // Two clocks 1000 and 500 MHz: the low one may take up to 2 x 1.5 = 3 times
  // as long, and no less than 1 / 1.5 of the time; powers within 20x.
  auto pair = [](double low_time, double low_energy) {
    model::Profile p;
    p.Add(0, Kind::kForward, Point(1000, 1.0, 200));
    p.Add(0, Kind::kForward, Point(500, low_time, low_energy));
    p.Add(0, Kind::kBackward, Point(1000, 1.0, 200));
    return p;
  };
  EXPECT_NO_THROW(CheckProfileRows(pair(2.99, 100), "P"));
  EXPECT_THROW(CheckProfileRows(pair(3.01, 100), "P"), model::InputError);
  EXPECT_NO_THROW(CheckProfileRows(pair(0.67, 100), "P"));
  EXPECT_THROW(CheckProfileRows(pair(0.66, 100), "P"), model::InputError);
  EXPECT_NO_THROW(CheckProfileRows(pair(2.0, 2.0 * 10.1), "P"));  // 10.1 W against 200 W
  EXPECT_THROW(CheckProfileRows(pair(2.0, 2.0 * 9.9), "P"), model::InputError);
  // Rows made in code have no line: the message says none.
  const std::string message = ErrorOf([&] { CheckProfileRows(pair(3.01, 100), "P"); });
  EXPECT_EQ(message.find("line"), std::string::npos) << message;
  ExpectContains(message, {"P: stage 0 forward at 500 MHz takes 3.01 s"});
}

TEST(ProfileRows, ThePlanCallRefusesTheRowBeforeAnythingElse) {
  // The case: one row of a real profile, slow beyond reason.
  const model::Profile real = model::ReadProfileCsv(RealProfilePath("gpt3-175b+a40_bf16"));
  model::Profile broken;
  broken.metadata = real.metadata;
  for (int s = 0; s < real.num_stages(); ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      for (model::ClockPoint p : real.Points(s, kind)) {
        if (s == 3 && kind == Kind::kBackward && p.mhz == 1200) p.time_s = 1000;
        broken.Add(s, kind, p);
      }
    }
  }
  PlanRequest request;
  request.spec.kind = schedule::Kind::k1F1B;
  request.spec.stages = 8;
  request.spec.microbatches = 24;
  request.p_block_w = 70.38;
  request.profile_name = "a40.csv";
  ExpectContains(ErrorOf([&] { PreparePipelinePlan(broken, request); }),
                 {"a40.csv line ", ": stage 3 backward at 1200 MHz takes 1000 s", "times as long"});
  EXPECT_NO_THROW(PreparePipelinePlan(real, request));
}

// ---- The grid spans the useful plans only -------------------------------------------

// Two stages, clocks 1410 / 1200 / 1000 and a dominated 700 MHz: slower than
// 1000 MHz and dearer in effective energy (e - P_block t), so no plan uses it.
model::Profile WithDominatedClock(bool dominated_clock) {
  model::Profile profile;
  for (int s = 0; s < 2; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const double t = (kind == Kind::kForward ? 1.0 : 2.0) * (1 + 0.2 * s);
      profile.Add(s, kind, Point(1410, t, 300 * t));
      profile.Add(s, kind, Point(1200, 1.12 * t, 250 * 1.12 * t));
      profile.Add(s, kind, Point(1000, 1.3 * t, 210 * 1.3 * t));
      if (dominated_clock) profile.Add(s, kind, Point(700, 2.5 * t, 220 * 2.5 * t));
    }
  }
  return profile;
}

PlanRequest GridRequest(double resolution_s) {
  PlanRequest request;
  request.spec.kind = schedule::Kind::k1F1B;
  request.spec.stages = 2;
  request.spec.microbatches = 4;
  request.p_block_w = 60;
  request.resolution_s = resolution_s;
  return request;
}

TEST(GridGuard, ADominatedSlowClockDoesNotWidenTheGridNorChangeTheFrontier) {
  const model::Profile with = WithDominatedClock(true), without = WithDominatedClock(false);
  // The lowest clocks would span ~ 20 s more than the useful plans: at 0.15 ms
  // the old guard (all-lowest-clock span) refused; the real span fits.
  const PlanRequest request = GridRequest(1.5e-4);
  const PipelinePlan a = PlanPipeline(with, request);
  const PipelinePlan b = PlanPipeline(without, request);
  EXPECT_EQ(a.slowest_s, b.slowest_s);
  const double all_lowest =
      EvaluateClocks(a.schedule, with, 60, schedule::UniformClocks(a.schedule, with, false)).time_s;
  EXPECT_GT((all_lowest - a.baseline.time_s) / request.resolution_s, kMaxGridDeadlines);
  EXPECT_LE((a.slowest_s - a.baseline.time_s) / request.resolution_s, kMaxGridDeadlines);
  // The slowest useful plan is where the solver's relaxation ends.
  ASSERT_FALSE(a.frontier.bound.empty());
  EXPECT_NEAR(a.slowest_s, a.frontier.bound.back().time_s, 1e-9 * a.slowest_s);
  ASSERT_EQ(a.frontier.points.size(), b.frontier.points.size());
  for (std::size_t i = 0; i < a.frontier.points.size(); ++i) {
    EXPECT_EQ(a.frontier.points[i].time_s, b.frontier.points[i].time_s) << i;
    EXPECT_EQ(a.frontier.points[i].energy_j, b.frontier.points[i].energy_j) << i;
  }
}

TEST(GridGuard, TheMessageGivesTheRealSpanAndTheWidestInstruction) {
  const std::string message =
      ErrorOf([] { PreparePipelinePlan(WithDominatedClock(true), GridRequest(1e-7)); });
  ExpectContains(message, {"the useful plans take from", "(the least-energy ones)",
                           "PlanRequest::resolution_s of 0.0001 ms", "ms or more",
                           "the widest instruction is stage", "at 1000 MHz, its least-energy"});
  EXPECT_EQ(message.find("700 MHz"), std::string::npos) << message;
}

// ---- The request's ranges -------------------------------------------------------------

TEST(PlanRequestRanges, EachNumberHasAPlausibleRange) {
  auto refused = [](auto change, const std::string& field, const std::string& range) {
    PlanRequest r = GridRequest(1e-3);
    change(r);
    try {
      CheckPlanRequest(r);
      ADD_FAILURE() << field << " accepted";
    } catch (const model::InputError& e) {
      EXPECT_EQ(e.field(), field) << e.what();
      ExpectContains(e.what(), {field, range});
    }
  };
  refused([](PlanRequest& r) { r.spec.stages = 1025; }, "Spec::stages", "1..1024 (got 1025)");
  refused([](PlanRequest& r) { r.spec.microbatches = 100001; }, "Spec::microbatches", "1..100000");
  refused([](PlanRequest& r) { r.slowdown = 1e308; }, "PlanRequest::slowdown", "0..99");
  refused([](PlanRequest& r) { r.resolution_s = 3601; }, "PlanRequest::resolution_s",
          "at most an hour");
  refused([](PlanRequest& r) { r.extra_deadline_factors = {1.2, 101}; },
          "PlanRequest::extra_deadline_factors", "at most 100");
  PlanRequest ok = GridRequest(3600);
  ok.spec.stages = 1024;
  ok.slowdown = 99;
  ok.extra_deadline_factors = {100};
  EXPECT_NO_THROW(CheckPlanRequest(ok));
}

}  // namespace
}  // namespace joulepipe::solver
