// Wait models: the lowered-wait arithmetic, the calibrate-wait file's round
// trip, and the errors a hand-edited file gets (each naming its field).
#include "joulepipe/model/wait_model.hpp"

#include <string>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {
namespace {

std::string ErrorOf(const std::string& text) {
  try {
    WaitModelFromJson(text, "wait.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

WaitModel Calibrated() {
  WaitModel model = FlatWaitModel(80);
  model.points = {{1980, 120}, {1200, 95}, {600, 90}, {345, 92}};
  model.switch_latency_s = 0.004;
  model.margin_s = 0.001;
  return model;
}

TEST(WaitModel, UncalibratedSavesNothing) {
  const WaitModel flat = FlatWaitModel(80);
  EXPECT_FALSE(flat.calibrated());
  EXPECT_EQ(flat.wait_mhz(), 0);
  EXPECT_EQ(flat.LoweredS(10), 0);
  EXPECT_DOUBLE_EQ(flat.WaitEnergyJ(10), 800);
  EXPECT_NE(flat.Describe().find("uncalibrated"), std::string::npos);
}

TEST(WaitModel, LowersToTheLeastPowerClockWhenTheWaitIsLongEnough) {
  const WaitModel model = Calibrated();
  EXPECT_EQ(model.wait_mhz(), 600);  // 90 W, less than 345 MHz's 92 W
  EXPECT_DOUBLE_EQ(model.saving_w(), 30);
  EXPECT_DOUBLE_EQ(model.lowered_w(), 50);
  EXPECT_EQ(model.LoweredS(0.0089), 0);  // below 2L + margin = 9 ms
  EXPECT_DOUBLE_EQ(model.LoweredS(0.0091), 0.0091 - 0.005);
  EXPECT_DOUBLE_EQ(model.WaitEnergyJ(1.0), 80 - 30 * 0.995);
  EXPECT_DOUBLE_EQ(model.RestoreAfterS(1.0), 0.995);
  EXPECT_NE(model.Describe().find("600 MHz 90.0 W"), std::string::npos);
}

TEST(WaitModel, NoSavingWhenNoClockDrawsLess) {
  WaitModel model = Calibrated();
  model.points = {{1980, 90}, {600, 95}};
  EXPECT_EQ(model.wait_mhz(), 0);
  EXPECT_EQ(model.LoweredS(1), 0);
}

TEST(WaitModel, ASavingWithinMeasurementNoiseIsNone) {
  WaitModel model = Calibrated();
  model.points = {{1980, 90}, {600, 89.2}};  // 0.9 %: below kMinWaitSavingShare
  EXPECT_EQ(model.wait_mhz(), 0);
  EXPECT_EQ(model.saving_w(), 0);
  EXPECT_EQ(model.LoweredS(1), 0);
  model.points = {{1980, 90}, {600, 89.0}};  // 1.1 %
  EXPECT_EQ(model.wait_mhz(), 600);
  EXPECT_NEAR(model.saving_w(), 1.0, 1e-12);
}

TEST(WaitModel, JsonRoundTripSortsPoints) {
  WaitModel model = Calibrated();
  model.gpu = "NVIDIA H200";
  model.load = "spin";
  const WaitModel back = WaitModelFromJson(WaitModelToJson(model), "w.json");
  ASSERT_EQ(back.points.size(), 4u);
  EXPECT_EQ(back.points.front().mhz, 1980);
  EXPECT_EQ(back.gpu, "NVIDIA H200");
  EXPECT_EQ(back.load, "spin");
  EXPECT_DOUBLE_EQ(back.switch_latency_s, 0.004);
  EXPECT_EQ(back.source, "w.json");
  EXPECT_EQ(back.p_block_w, 0);
  const WaitModel unsorted = WaitModelFromJson(
      R"({"version":1,"switch_latency_s":0.01,"points":[{"frequency":600,"blocked_w":70},
          {"frequency":1410,"blocked_w":90}]})",
      "u.json");
  EXPECT_EQ(unsorted.points.front().mhz, 1410);
  EXPECT_DOUBLE_EQ(unsorted.margin_s, kDefaultWaitMarginS);
}

TEST(WaitModel, ErrorsNameTheField) {
  const std::string head = R"({"version":1,"switch_latency_s":0.004,"points":)";
  EXPECT_NE(ErrorOf("[1]").find("the top level must be a JSON object"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"version":2})").find("version must be 1"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"version":1,"kind":"plan"})").find("kind must be"), std::string::npos);
  EXPECT_NE(ErrorOf(R"({"version":1,"points":[]})").find("no field 'switch_latency_s'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"version":1,"switch_latency_s":4,"points":[]})")
                .find("switch_latency_s must be seconds in 0..1"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "[]}").find("points must be a non-empty array"), std::string::npos);
  EXPECT_NE(ErrorOf(head + R"([{"frequency":1.5,"blocked_w":1}]})").find("points[0].frequency"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"([{"frequency":900}]})").find("points[0] has no field 'blocked_w'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"([{"frequency":900,"blocked_w":-1}]})").find("points[0].blocked_w"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + R"([{"frequency":900,"blocked_w":1},{"frequency":900,"blocked_w":2}]})")
                .find("points[1].frequency repeats 900 MHz"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{").find("wait.json"), std::string::npos);
  EXPECT_NE(ErrorOf(head + "[]}").find("calibrate-wait"), std::string::npos);
}

}  // namespace
}  // namespace joulepipe::model
