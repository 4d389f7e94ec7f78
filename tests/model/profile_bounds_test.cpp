// Hardening of the profile reader (docs/limits.md, "Numbers and ranges"):
// rows outside the physical bounds are refused by the reader (naming the
// file, line and column) and by Profile::Add (naming the ClockPoint field);
// every row remembers its line; and files that do not end, or are far too
// large, are refused quickly instead of read forever.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"

namespace joulepipe::model {
namespace {

namespace fs = std::filesystem;

const std::string kHeader = "stage,instruction,frequency,time,energy\n";

// The message of the InputError `action` throws; fails the test if none.
template <typename Action>
std::string ErrorOf(Action&& action) {
  try {
    action();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

void ExpectContains(const std::string& text, std::initializer_list<std::string> needles) {
  for (const std::string& needle : needles) {
    EXPECT_NE(text.find(needle), std::string::npos) << "lacks \"" << needle << "\": " << text;
  }
}

// ---- Rows outside the physical bounds --------------------------------------------

TEST(ProfileBoundsTest, ReaderRefusesAClockAboveTenGigahertz) {
  EXPECT_NO_THROW(ParseProfileCsv(kHeader + "0,forward,10000,0.05,24\n", "P.csv"));
  const std::string message =
      ErrorOf([] { ParseProfileCsv(kHeader + "0,forward,1410000,0.05,24\n", "P.csv"); });
  ExpectContains(message, {"P.csv line 2", "column 'frequency'", "'1410000'", "above 10000 MHz",
                           "not in kHz"});
}

TEST(ProfileBoundsTest, ReaderRefusesAnInstructionLongerThanAnHour) {
  EXPECT_NO_THROW(ParseProfileCsv(kHeader + "0,forward,1410,3600,1000\n", "P.csv"));
  // Times the planner once took minutes and gigabytes over, or planned with
  // infinities: 1e4 s and more for one forward.
  for (const char* time : {"3600.5", "1e4", "1e5", "1e9", "1e12", "1e300"}) {
    SCOPED_TRACE(time);
    const std::string message = ErrorOf([&] {
      ParseProfileCsv(kHeader + "0,forward,1410,0.05,24\n0,backward,1410," + time + ",44\n",
                      "P.csv");
    });
    ExpectContains(message, {"P.csv line 3", "column 'time'", "'" + std::string(time) + "'",
                             "more than an hour", "seconds"});
  }
}

TEST(ProfileBoundsTest, ReaderRefusesAPowerNoGpuDraws) {
  // 5000 W exactly is allowed; 0.05 s at 250.5 J is 5010 W.
  EXPECT_NO_THROW(ParseProfileCsv(kHeader + "0,forward,1410,0.05,250\n", "P.csv"));
  const std::string message =
      ErrorOf([] { ParseProfileCsv(kHeader + "0,forward,1410,0.05,250.5\n", "P.csv"); });
  ExpectContains(message, {"P.csv line 2", "column 'energy'", "'250.5'", "5010 W", "at most 5000 W",
                           "ONE GPU"});
}

TEST(ProfileBoundsTest, AddRefusesTheSameRowsNamingTheField) {
  Profile profile;
  const std::string where = "simulated stage 0";
  ExpectContains(ErrorOf([&] { profile.Add(0, Kind::kForward, {20000, 0.05, 24}, where); }),
                 {"simulated stage 0", "ClockPoint::mhz", "1..10000 MHz"});
  ExpectContains(ErrorOf([&] { profile.Add(0, Kind::kForward, {1410, 7200, 24}, where); }),
                 {"ClockPoint::time_s", "at most an hour"});
  ExpectContains(ErrorOf([&] { profile.Add(0, Kind::kForward, {1410, 0.01, 60}, where); }),
                 {"ClockPoint::energy_j", "5000 W"});
  EXPECT_EQ(profile.Points(0, Kind::kForward).size(), 0u);
  profile.Add(0, Kind::kForward, {1410, 0.01, 50}, where);  // 5000 W: the bound itself
  EXPECT_EQ(profile.Points(0, Kind::kForward).size(), 1u);
}

TEST(ProfileBoundsTest, EveryBundledProfileIsWithinTheBounds) {
  for (const char* name :
       {"gpt3-175b+a100_sxm_bf16", "bloom+a100_sxm_bf16", "gpt3-175b+a40_bf16", "bloom+a40_bf16"}) {
    SCOPED_TRACE(name);
    EXPECT_NO_THROW(
        ReadProfileCsv(std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + name + ".csv"));
  }
}

// ---- Each point remembers its line -------------------------------------------------

TEST(ProfileBoundsTest, ReaderRecordsEachRowsLine) {
  const Profile profile = ParseProfileCsv(
      "# joulepipe profile\n"          // 1
      "# p_block_w: 80\n"              // 2
      "\n"                             // 3
          + kHeader +                  // 4
          "0,forward,1410,0.05,24\n"   // 5
          "# a comment\n"              // 6
          "0,forward,1200,0.055,20\n"  // 7
          "\n"                         // 8
          "0,backward,1410,0.1,48\n",  // 9
      "P.csv");
  ASSERT_NE(profile.Find(0, Kind::kForward, 1410), nullptr);
  EXPECT_EQ(profile.Find(0, Kind::kForward, 1410)->line, 5);
  EXPECT_EQ(profile.Find(0, Kind::kForward, 1200)->line, 7);
  EXPECT_EQ(profile.Find(0, Kind::kBackward, 1410)->line, 9);
  // Points made in code come from no file.
  EXPECT_EQ(ClockPoint(1410, 0.05, 24).line, 0);
  // The writer does not write lines, so a round trip keeps the numbers only.
  const Profile again = ParseProfileCsv(ProfileToCsv(profile), "again.csv");
  EXPECT_EQ(again.Find(0, Kind::kForward, 1200)->time_s, 0.055);
}

// ---- Files that never end, or are far too large ---------------------------------------

class ScratchFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("joulepipe-profile-bounds-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ScratchFileTest, DevZeroIsRefusedQuicklyNotReadForever) {
  const auto started = std::chrono::steady_clock::now();
  const std::string message = ErrorOf([] { ReadProfileCsv("/dev/zero"); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ExpectContains(message, {"profile '/dev/zero'", "not a regular file", "more than 256 MiB",
                           "without ending"});
  EXPECT_LT(seconds, 20.0);  // reads 256 MiB at most (well under a second on a laptop)
}

TEST_F(ScratchFileTest, AHugeRegularFileIsRefusedBeforeItIsRead) {
  const fs::path huge = dir_ / "huge.csv";
  {
    std::ofstream(huge) << kHeader;
  }
  fs::resize_file(huge, (std::uintmax_t{300} << 20));  // sparse: takes no disk
  const auto started = std::chrono::steady_clock::now();
  const std::string message = ErrorOf([&] { ReadProfileCsv(huge.string()); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ExpectContains(message, {"huge.csv' is 300 MiB", "more than the 256 MiB a profile may be"});
  EXPECT_LT(seconds, 1.0);  // refused from its size, not read
}

TEST_F(ScratchFileTest, APipeThatEndsIsReadLikeAFile) {
  const fs::path fifo = dir_ / "profile.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(fifo);
    out << kHeader << "0,forward,1410,0.05,24\n0,backward,1410,0.1,48\n";
  });
  const Profile profile = ReadProfileCsv(fifo.string());
  writer.join();
  EXPECT_EQ(profile.num_stages(), 1);
  EXPECT_EQ(profile.Find(0, Kind::kBackward, 1410)->line, 3);
}

}  // namespace
// Issue 41, item 2: control bytes in a quoted field are shown escaped, so a
// profile cannot cut a message or drive the terminal that shows it. Before,
// the reader echoed the field's bytes as they were.
TEST(ProfileBoundsTest, ControlBytesInAFieldAreShownEscaped) {
  const std::string message =
      ErrorOf([] { ParseProfileCsv(kHeader + "0,forward,1410,\x1b[2J0.05\r\x07,24\n", "P.csv"); });
  EXPECT_NE(message.find("'\\u001b[2J0.05\\r\\u0007' is not a number"), std::string::npos)
      << message;
  for (char c : message) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << message;
}

}  // namespace joulepipe::model
