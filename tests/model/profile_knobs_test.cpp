// Knob columns in the profile CSV and knob settings in plan JSON (issue 15,
// item 5): what is read, what is written back, and what is rejected.
#include <string>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"

namespace joulepipe::model {
namespace {

// One stage; at 1410 MHz two overlap settings, at 1200 MHz one row without.
const char* kKnobCsv =
    "stage,instruction,frequency,time,energy,knob.overlap,knob.comm_sms\n"
    "0,forward,1410,0.050,24.0,1,12\n"
    "0,forward,1410,0.048,25.0,2,\n"
    "0,backward,1410,0.100,48.0,1,12\n"
    "0,forward,1200,0.060,21.0,,\n"
    "0,backward,1200,0.120,42.0,,\n";

std::string ErrorOf(const std::string& csv) {
  try {
    ParseProfileCsv(csv, "p.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ProfileKnobsTest, ReadsKnobColumnsInColumnOrderAndSkipsEmptyFields) {
  const Profile profile = ParseProfileCsv(kKnobCsv, "p.csv");
  ASSERT_TRUE(profile.has_knobs());
  const auto& forward = profile.Points(0, Kind::kForward);
  ASSERT_EQ(forward.size(), 3u);
  // At one clock the fastest comes first.
  EXPECT_EQ(forward[0].knobs, "overlap=2");
  EXPECT_EQ(forward[1].knobs, "overlap=1;comm_sms=12");
  EXPECT_EQ(forward[2].knobs, "");
  EXPECT_EQ(forward[2].knob, 0);
  // Find with knob 0 is the fastest point at the clock; with an index, that one.
  EXPECT_EQ(profile.Find(0, Kind::kForward, 1410)->knobs, "overlap=2");
  const int index = profile.KnobIndex("overlap=1;comm_sms=12");
  ASSERT_GT(index, 0);
  EXPECT_EQ(profile.Find(0, Kind::kForward, 1410, index)->time_s, 0.050);
  EXPECT_EQ(profile.Find(0, Kind::kForward, 1200, index), nullptr);
  EXPECT_EQ(profile.MaxClock(0, Kind::kForward).knobs, "overlap=2");
  EXPECT_EQ(profile.KnobIndex("overlap=9"), -1);
}

TEST(ProfileKnobsTest, WriterRoundTripsKnobs) {
  const Profile profile = ParseProfileCsv(kKnobCsv, "p.csv");
  const std::string csv = ProfileToCsv(profile);
  EXPECT_NE(csv.find(",knob.overlap,knob.comm_sms\n"), std::string::npos) << csv;
  const Profile back = ParseProfileCsv(csv, "back.csv");
  for (Kind kind : {Kind::kForward, Kind::kBackward}) {
    const auto& a = profile.Points(0, kind);
    const auto& b = back.Points(0, kind);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].mhz, b[i].mhz);
      EXPECT_EQ(a[i].knobs, b[i].knobs);
      EXPECT_EQ(a[i].time_s, b[i].time_s);
      EXPECT_EQ(a[i].energy_j, b[i].energy_j);
    }
  }
}

TEST(ProfileKnobsTest, ProfileWithoutKnobsWritesNoKnobColumns) {
  const Profile profile = ParseProfileCsv(
      "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n0,backward,1410,0.1,48\n",
      "p.csv");
  EXPECT_FALSE(profile.has_knobs());
  EXPECT_EQ(ProfileToCsv(profile).find("knob."), std::string::npos);
}

TEST(ProfileKnobsTest, RejectsDuplicateRowWithSameKnobsButNotDifferentKnobs) {
  const std::string base = "stage,instruction,frequency,time,energy,knob.overlap\n";
  EXPECT_EQ(ErrorOf(base + "0,forward,1410,0.05,24,1\n0,forward,1410,0.04,25,2\n"
                           "0,backward,1410,0.1,48,1\n"),
            "");
  const std::string message =
      ErrorOf(base + "0,forward,1410,0.05,24,1\n0,forward,1410,0.04,25,1\n");
  EXPECT_NE(message.find("duplicate row"), std::string::npos) << message;
  EXPECT_NE(message.find("with knobs overlap=1"), std::string::npos) << message;
  EXPECT_NE(message.find("line 2"), std::string::npos) << message;
}

TEST(ProfileKnobsTest, RejectsBadKnobNamesAndValues) {
  std::string message = ErrorOf("stage,instruction,frequency,time,energy,knob.\n");
  EXPECT_NE(message.find("knob column"), std::string::npos) << message;
  message = ErrorOf(
      "stage,instruction,frequency,time,energy,knob.a,knob.a\n0,forward,1410,0.05,24,1,1\n");
  EXPECT_NE(message.find("appears twice"), std::string::npos) << message;
  message =
      ErrorOf("stage,instruction,frequency,time,energy,knob.overlap\n0,forward,1410,0.05,24,a b\n");
  EXPECT_NE(message.find("knob.overlap"), std::string::npos) << message;
  EXPECT_NE(message.find("not a knob value"), std::string::npos) << message;
}

TEST(ProfileKnobsTest, KnobsProblemNamesWhatIsWrong) {
  EXPECT_EQ(KnobsProblem(""), "");
  EXPECT_EQ(KnobsProblem("overlap=2;comm_sms=12"), "");
  EXPECT_NE(KnobsProblem("overlap"), "");
  EXPECT_NE(KnobsProblem("overlap=2;"), "");
  EXPECT_NE(KnobsProblem("a=1;a=2").find("twice"), std::string::npos);
}

TEST(ProfileKnobsTest, AddRejectsInvalidKnobText) {
  Profile profile;
  ClockPoint point;
  point.mhz = 1410;
  point.time_s = 0.05;
  point.energy_j = 24;
  point.knobs = "overlap";
  EXPECT_THROW(profile.Add(0, Kind::kForward, point, "test"), InputError);
}

Plan OneInstructionPlan(const std::string& knobs) {
  Plan plan;
  plan.schedule = "1f1b";
  plan.num_stages = 1;
  plan.num_microbatches = 1;
  plan.num_chunks = 1;
  PlannedInstruction forward;
  forward.instruction = {0, 0, 0, Kind::kForward};
  forward.mhz = 1410;
  forward.knobs = knobs;
  PlannedInstruction backward = forward;
  backward.instruction = {0, 0, 0, Kind::kBackward};
  backward.knobs = "";
  plan.stages = {{forward, backward}};
  return plan;
}

TEST(PlanKnobsTest, RoundTripsKnobsAndOmitsThemWhenEmpty) {
  const std::string text = PlanToJson(OneInstructionPlan("overlap=2;comm_sms=12"));
  EXPECT_NE(text.find("\"knobs\": \"overlap=2;comm_sms=12\""), std::string::npos) << text;
  const Plan back = PlanFromJson(text, "plan.json");
  ASSERT_EQ(back.stages.size(), 1u);
  ASSERT_EQ(back.stages[0].size(), 2u);
  EXPECT_EQ(back.stages[0][0].knobs, "overlap=2;comm_sms=12");
  EXPECT_EQ(back.stages[0][1].knobs, "");
  EXPECT_EQ(PlanToJson(OneInstructionPlan("")).find("knobs"), std::string::npos);
}

TEST(PlanKnobsTest, RejectsBadKnobsNamingTheField) {
  std::string text = PlanToJson(OneInstructionPlan("overlap=2"));
  text.replace(text.find("overlap=2"), 9, "overlap 2");
  try {
    PlanFromJson(text, "plan.json");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(".knobs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace joulepipe::model
