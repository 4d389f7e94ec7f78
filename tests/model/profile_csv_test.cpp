// Profile CSV reader: real Perseus profiles, layout tolerance, and one test
// per rejected input, each checking that the message locates the problem.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/profile.hpp"

namespace joulepipe::model {
namespace {

const std::string kRealProfile =
    std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv";

// 'text', as messages quote offending values.
std::string Quoted(const char* text) {
  std::string out = "'";
  out += text;
  out += '\'';
  return out;
}

// A valid profile: `stages` stages, forward and backward, clocks 1410 and 1395.
std::string SmallCsv(int stages) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int s = 0; s < stages; ++s) {
    for (const char* kind : {"forward", "backward"}) {
      csv += std::to_string(s) + "," + kind + ",1410,0.05,24.0\n";
      csv += std::to_string(s) + "," + kind + ",1395,0.051,23.5\n";
    }
  }
  return csv;
}

// Parses `csv` expecting an InputError whose message contains every needle.
void ExpectError(const std::string& csv, std::initializer_list<std::string> needles) {
  try {
    ParseProfileCsv(csv, "P.csv");
    ADD_FAILURE() << "no error for:\n" << csv;
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << message;
    }
  }
}

void ExpectValidateError(const Profile& profile, int stages,
                         std::initializer_list<std::string> needles) {
  try {
    profile.Validate(stages, "P.csv");
    ADD_FAILURE() << "Validate(" << stages << ") passed";
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << message;
    }
  }
}

// ---- Instruction names -------------------------------------------------------

TEST(InstructionTest, KindNamesRoundTrip) {
  for (Kind kind : {Kind::kForward, Kind::kBackward}) {
    Kind parsed = kind == Kind::kForward ? Kind::kBackward : Kind::kForward;
    ASSERT_TRUE(ParseKind(KindName(kind), &parsed));
    EXPECT_EQ(parsed, kind);
  }
  EXPECT_EQ(KindName(Kind::kForward), "forward");
  EXPECT_EQ(KindName(Kind::kBackward), "backward");
  Kind kind;
  EXPECT_FALSE(ParseKind("Forward", &kind));
  EXPECT_FALSE(ParseKind("fwd", &kind));
  EXPECT_FALSE(ParseKind("", &kind));
}

TEST(InstructionTest, DescribeNamesEveryCoordinate) {
  EXPECT_EQ(Describe({2, 1, 5, Kind::kBackward}), "stage 2 chunk 1 backward microbatch 5");
  EXPECT_EQ(Describe({0, 0, 3, Kind::kForward}), "stage 0 chunk 0 forward microbatch 3");
}

// ---- Real files --------------------------------------------------------------

TEST(ProfileCsvTest, ReadsRealPerseusProfile) {
  const Profile profile = ReadProfileCsv(kRealProfile);
  EXPECT_EQ(profile.num_stages(), 8);
  EXPECT_NO_THROW(profile.Validate(8, kRealProfile));
  int rows = 0;
  for (int s = 0; s < 8; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const std::vector<ClockPoint>& points = profile.Points(s, kind);
      ASSERT_EQ(points.size(), 38u) << "stage " << s << " " << KindName(kind);
      EXPECT_EQ(points.front().mhz, 1410);
      EXPECT_EQ(points.back().mhz, 855);
      EXPECT_EQ(profile.MaxClock(s, kind).mhz, 1410);
      for (size_t i = 1; i < points.size(); ++i) EXPECT_GT(points[i - 1].mhz, points[i].mhz);
      rows += static_cast<int>(points.size());
    }
  }
  EXPECT_EQ(rows, 608);
  // First data row of the file, read back to the last bit.
  const ClockPoint* first = profile.Find(0, Kind::kForward, 1410);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->time_s, 0.05016166687011708);
  EXPECT_EQ(first->energy_j, 23.80547200000007);
}

TEST(ProfileCsvTest, ReadsAllBundledProfiles) {
  const std::string dir = std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".csv") continue;
    const Profile profile = ReadProfileCsv(entry.path().string());
    EXPECT_NO_THROW(profile.Validate(8, entry.path().string())) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 1);
}

TEST(ProfileCsvTest, ParsesThousandRowsQuickly) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int s = 0; s < 10; ++s) {
    for (const char* kind : {"forward", "backward"}) {
      for (int mhz = 2000; mhz > 1950; --mhz) {
        csv += std::to_string(s) + "," + kind + "," + std::to_string(mhz) +
               ",0.05016166687011708,23.80547200000007\n";
      }
    }
  }
  constexpr int kRepeats = 20;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRepeats; ++i) {
    const Profile profile = ParseProfileCsv(csv, "gen.csv");
    ASSERT_EQ(profile.Points(9, Kind::kBackward).size(), 50u);
  }
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed.count() / kRepeats, 10.0) << "1,000-row profile took too long";
}

// ---- Layout tolerance ----------------------------------------------------------

TEST(ProfileCsvTest, AcceptsAnyColumnOrderAndIgnoresExtraColumns) {
  const Profile profile = ParseProfileCsv(
      "rank,energy,time,instruction,dp_rank,frequency,pp_rank,stage,tp_rank\n"
      "0,24.0,0.05,forward,0,1410,0,0,0\n"
      "0,44.0,0.09,backward,0,1410,0,0,0\n",
      "P.csv");
  const ClockPoint* point = profile.Find(0, Kind::kBackward, 1410);
  ASSERT_NE(point, nullptr);
  EXPECT_EQ(point->time_s, 0.09);
  EXPECT_EQ(point->energy_j, 44.0);
  EXPECT_NO_THROW(profile.Validate(1, "P.csv"));
}

TEST(ProfileCsvTest, ToleratesBomCrlfSpacesAndBlankLines) {
  const Profile profile = ParseProfileCsv(
      "\xEF\xBB\xBF stage , instruction,frequency ,time,energy\r\n"
      " 0 , forward , 1410 , 0.05 , 24.0 \r\n"
      "0,backward,1410.0,0.09,44\r\n"
      "\r\n"
      "   \n"
      "\n",
      "P.csv");
  EXPECT_EQ(profile.num_stages(), 1);
  EXPECT_NE(profile.Find(0, Kind::kForward, 1410), nullptr);
  EXPECT_NE(profile.Find(0, Kind::kBackward, 1410), nullptr);  // "1410.0" is an integer
}

TEST(ProfileCsvTest, KeepsPointsSortedByClockDescending) {
  const Profile profile = ParseProfileCsv(
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1200,0.06,20\n"
      "0,forward,1410,0.05,24\n"
      "0,forward,900,0.08,18\n"
      "0,forward,1300,0.055,22\n",
      "P.csv");
  const std::vector<ClockPoint>& points = profile.Points(0, Kind::kForward);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].mhz, 1410);
  EXPECT_EQ(points[1].mhz, 1300);
  EXPECT_EQ(points[2].mhz, 1200);
  EXPECT_EQ(points[3].mhz, 900);
  EXPECT_EQ(profile.Find(0, Kind::kForward, 1250), nullptr);
  EXPECT_TRUE(profile.Points(0, Kind::kBackward).empty());
  EXPECT_TRUE(profile.Points(5, Kind::kForward).empty());
}

// ---- Rejected files ----------------------------------------------------------

TEST(ProfileCsvErrorTest, EmptyFile) {
  ExpectError("", {"P.csv", "empty", "stage,instruction,frequency,time,energy"});
  ExpectError("\xEF\xBB\xBF\r\n\n  \n", {"P.csv", "empty"});
}

TEST(ProfileCsvErrorTest, HeaderOnly) {
  ExpectError("stage,instruction,frequency,time,energy\r\n\r\n",
              {"P.csv", "no data rows", "line 1"});
}

TEST(ProfileCsvErrorTest, MissingColumn) {
  ExpectError(
      "stage,instruction,frequency,time\n0,forward,1410,0.05\n",
      {"P.csv line 1", "missing required column 'energy'", "stage,instruction,frequency,time"});
  ExpectError("stage,kind,frequency,time,energy\n0,forward,1410,0.05,1\n",
              {"line 1", "'instruction'", "stage,kind,frequency,time,energy"});
}

TEST(ProfileCsvErrorTest, DuplicateColumn) {
  ExpectError("stage,instruction,frequency,time,energy,time\n0,forward,1410,0.05,1,2\n",
              {"line 1", "'time'", "twice"});
}

TEST(ProfileCsvErrorTest, WrongFieldCount) {
  ExpectError(
      "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n0,backward,1410,0.09\n",
      {"P.csv line 3", "expected 5", "found 4", "0,backward,1410,0.09"});
  ExpectError("stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24,7\n",
              {"line 2", "expected 5", "found 6"});
}

TEST(ProfileCsvErrorTest, EmptyField) {
  ExpectError("stage,instruction,frequency,time,energy\n0,forward,1410, ,24\n",
              {"P.csv line 2", "column 'time'", "empty"});
  ExpectError("stage,instruction,frequency,time,energy\n,forward,1410,0.05,24\n",
              {"line 2", "column 'stage'", "empty"});
}

TEST(ProfileCsvErrorTest, BadTime) {
  const std::string header = "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n";
  for (const char* bad :
       {"abc", "0.05s", "nan", "NaN", "inf", "-inf", "-0.5", "0", "0.0", "1e400"}) {
    SCOPED_TRACE(bad);
    ExpectError(header + "0,backward,1410," + bad + ",44\n",
                {"P.csv line 3", "column 'time'", Quoted(bad)});
  }
}

TEST(ProfileCsvErrorTest, BadEnergy) {
  const std::string header = "stage,instruction,frequency,time,energy\n";
  for (const char* bad : {"x", "nan", "inf", "-3", "0", "24,5"}) {
    SCOPED_TRACE(bad);
    if (std::string(bad) == "24,5") {  // a decimal comma splits the field
      ExpectError(header + "0,forward,1410,0.05," + bad + "\n", {"line 2", "found 6"});
      continue;
    }
    ExpectError(header + "0,forward,1410,0.05," + bad + "\n",
                {"P.csv line 2", "column 'energy'", Quoted(bad)});
  }
}

TEST(ProfileCsvErrorTest, BadFrequency) {
  const std::string header = "stage,instruction,frequency,time,energy\n";
  for (const char* bad : {"1410.5", "0", "-1410", "fast", "1410MHz", "nan", "99999999999"}) {
    SCOPED_TRACE(bad);
    ExpectError(header + "0,forward," + bad + ",0.05,24\n",
                {"P.csv line 2", "column 'frequency'", Quoted(bad)});
  }
}

TEST(ProfileCsvErrorTest, BadStage) {
  const std::string header = "stage,instruction,frequency,time,energy\n";
  for (const char* bad : {"-1", "1.5", "x", "one"}) {
    SCOPED_TRACE(bad);
    ExpectError(header + bad + ",forward,1410,0.05,24\n",
                {"P.csv line 2", "column 'stage'", Quoted(bad)});
  }
}

TEST(ProfileCsvErrorTest, BadInstruction) {
  ExpectError("stage,instruction,frequency,time,energy\n0,fwd,1410,0.05,24\n",
              {"P.csv line 2", "column 'instruction'", "'fwd'", "'forward' or 'backward'"});
}

TEST(ProfileCsvErrorTest, DuplicateRowNamesBothLines) {
  ExpectError(
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1410,0.05,24\n"
      "0,backward,1410,0.09,44\n"
      "\n"
      "0,forward,1410.0,0.06,25\n",
      {"P.csv line 5", "duplicate", "stage 0 forward at 1410 MHz", "line 2"});
}

TEST(ProfileCsvErrorTest, UnreadableFile) {
  const std::string missing = std::string(JOULEPIPE_SOURCE_DIR) + "/no/such/profile.csv";
  try {
    ReadProfileCsv(missing);
    ADD_FAILURE() << "read a missing file";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read profile '" + missing + "': No such file or directory");
  }
  try {
    ReadProfileCsv(JOULEPIPE_SOURCE_DIR);  // a directory
    ADD_FAILURE() << "read a directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read profile"), std::string::npos) << e.what();
  }
}

// ---- Validate --------------------------------------------------------------------

TEST(ProfileValidateTest, AcceptsExactStages) {
  EXPECT_NO_THROW(ParseProfileCsv(SmallCsv(4), "P.csv").Validate(4, "P.csv"));
}

TEST(ProfileValidateTest, TooFewStages) {
  const Profile profile = ParseProfileCsv(SmallCsv(7), "P.csv");
  ExpectValidateError(
      profile, 8,
      {"P.csv: profile has stages 0..6 but Spec::stages is 8", "set Spec::stages to 7"});
}

TEST(ProfileValidateTest, TooManyStages) {
  const Profile profile = ParseProfileCsv(SmallCsv(9), "P.csv");
  ExpectValidateError(profile, 8, {"P.csv: profile has stages 0..8 but Spec::stages is 8"});
}

TEST(ProfileValidateTest, CountErrorsNameSpecStagesNeverAFlag) {
  const Profile profile = ParseProfileCsv(SmallCsv(7), "P.csv");
  for (int stages : {0, -3, 6, 8}) {
    SCOPED_TRACE(stages);
    try {
      profile.Validate(stages, "P.csv");
      ADD_FAILURE() << "Validate passed";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "Spec::stages");
      EXPECT_NE(std::string(e.what()).find("Spec::stages"), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
    }
  }
  ExpectValidateError(profile, 0, {"Spec::stages must be at least 1 (got 0)"});
}

TEST(ProfileValidateTest, NamesAGap) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  for (int s : {0, 1, 2, 4, 5, 6, 7}) {
    csv += std::to_string(s) + ",forward,1410,0.05,24\n";
    csv += std::to_string(s) + ",backward,1410,0.09,44\n";
  }
  const Profile profile = ParseProfileCsv(csv, "P.csv");
  ExpectValidateError(profile, 8, {"P.csv", "0..2, 4..7", "stage 3 is missing"});
}

TEST(ProfileValidateTest, EveryStageNeedsBothKinds) {
  const Profile profile = ParseProfileCsv(
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1410,0.05,24\n0,backward,1410,0.09,44\n"
      "1,forward,1410,0.05,24\n",
      "P.csv");
  ExpectValidateError(profile, 2, {"P.csv", "stage 1 has no backward rows"});
}

// ---- Profile::Add -----------------------------------------------------------------

TEST(ProfileAddTest, RejectsBadPointsAndDuplicates) {
  Profile profile;
  profile.Add(0, Kind::kForward, {1410, 0.05, 24.0}, "here");
  EXPECT_THROW(profile.Add(0, Kind::kForward, {1410, 0.06, 25.0}, "here"), InputError);
  EXPECT_THROW(profile.Add(0, Kind::kForward, {1395, 0.0, 25.0}), InputError);
  EXPECT_THROW(profile.Add(0, Kind::kForward, {1395, 0.05, -1.0}), InputError);
  EXPECT_THROW(profile.Add(0, Kind::kForward, {1395, std::nan(""), 1.0}), InputError);
  EXPECT_THROW(profile.Add(0, Kind::kForward, {0, 0.05, 1.0}), InputError);
  EXPECT_THROW(profile.Add(-1, Kind::kForward, {1395, 0.05, 1.0}), InputError);
  try {
    profile.Add(0, Kind::kForward, {1410, 0.06, 25.0}, "P.csv line 9");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("P.csv line 9"), std::string::npos) << e.what();
  }
  EXPECT_EQ(profile.num_stages(), 1);
  EXPECT_EQ(Profile().num_stages(), 0);
}

}  // namespace
}  // namespace joulepipe::model
