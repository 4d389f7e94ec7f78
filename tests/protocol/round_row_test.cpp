#include "joulepipe/protocol/round_row.hpp"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::protocol {
namespace {

TEST(RoundRow, EveryMemberTravelsInItsOwnSlot) {
  RoundRow row;
  row.iteration = 123456789;
  row.pipeline_time_s = 0.0375;
  row.profile_shared = true;
  row.running_version = 3;
  row.announced_version = 4;
  row.planning_failed = true;
  row.sweep_iterations_left = 17;
  const auto floats = RoundRowToFloats(row);
  EXPECT_EQ(floats.size(), kRoundRowFloats);
  EXPECT_EQ(floats[0], 123456789);  // the wire form's order: never reordered
  EXPECT_EQ(floats[6], 17);
  const RoundRow back = RoundRowFromFloats(floats);
  EXPECT_EQ(back.iteration, row.iteration);
  EXPECT_EQ(back.pipeline_time_s, row.pipeline_time_s);
  EXPECT_TRUE(back.profile_shared);
  EXPECT_EQ(back.running_version, 3);
  EXPECT_EQ(back.announced_version, 4);
  EXPECT_TRUE(back.planning_failed);
  EXPECT_EQ(back.sweep_iterations_left, 17);
  // A default row (what a rank without news sends) reads back as one.
  const RoundRow zero = RoundRowFromFloats(RoundRowToFloats(RoundRow{}));
  EXPECT_EQ(zero.iteration, 0);
  EXPECT_FALSE(zero.profile_shared || zero.planning_failed);
}

TEST(RoundRow, ARowOfAnotherShapeIsRefusedByItsMember) {
  const std::vector<double> six(6, 0.0);
  try {
    RoundRowFromFloats(six);
    FAIL() << "a row of 6 numbers was read";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "RoundRow");
    EXPECT_NE(std::string(e.what()).find("has 6 numbers; 7 were expected"), std::string::npos);
  }
  struct Case {
    std::size_t slot;
    double value;
    const char* field;
  };
  for (const Case& c :
       {Case{2, 0.5, "RoundRow::profile_shared"}, Case{5, 2, "RoundRow::planning_failed"},
        Case{3, -1, "RoundRow::running_version"}, Case{0, NAN, "RoundRow::iteration"},
        Case{1, -0.5, "RoundRow::pipeline_time_s"}, Case{1, INFINITY, "RoundRow::pipeline_time_s"},
        Case{6, 1e12, "RoundRow::sweep_iterations_left"}}) {
    auto floats = RoundRowToFloats(RoundRow{});
    floats[c.slot] = c.value;
    try {
      RoundRowFromFloats(floats);
      ADD_FAILURE() << c.field << " = " << c.value << " was read";
    } catch (const model::InputError& e) {
      EXPECT_EQ(e.field(), c.field);
    }
  }
}

}  // namespace
}  // namespace joulepipe::protocol
