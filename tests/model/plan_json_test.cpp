// Plan JSON: round trip, layout, the PointSolution literal, and the errors a
// hand-edited plan can produce (each naming the JSON path of the mistake).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"

namespace joulepipe::model {
namespace {

using nlohmann::json;

PlannedInstruction P(int stage, Kind kind, int microbatch, int mhz, int chunk = 0) {
  PlannedInstruction planned;
  planned.instruction = {stage, chunk, microbatch, kind};
  planned.mhz = mhz;
  return planned;
}

// 2 stages, 2 microbatches, 1F1B order.
Plan SmallPlan() {
  Plan plan;
  plan.schedule = "1f1b";
  plan.num_stages = 2;
  plan.num_microbatches = 2;
  plan.num_chunks = 1;
  plan.stages = {
      {P(0, Kind::kForward, 0, 1410), P(0, Kind::kForward, 1, 1395), P(0, Kind::kBackward, 0, 1380),
       P(0, Kind::kBackward, 1, 1410)},
      {P(1, Kind::kForward, 0, 1200), P(1, Kind::kBackward, 0, 1410), P(1, Kind::kForward, 1, 1215),
       P(1, Kind::kBackward, 1, 1410)},
  };
  plan.predicted = Prediction{1.2345678901234567, 1.0 / 3.0};
  return plan;
}

void ExpectSamePlan(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.schedule, b.schedule);
  EXPECT_EQ(a.num_stages, b.num_stages);
  EXPECT_EQ(a.num_microbatches, b.num_microbatches);
  EXPECT_EQ(a.num_chunks, b.num_chunks);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    ASSERT_EQ(a.stages[s].size(), b.stages[s].size()) << "stage " << s;
    for (size_t i = 0; i < a.stages[s].size(); ++i) {
      EXPECT_EQ(a.stages[s][i].instruction, b.stages[s][i].instruction) << s << "," << i;
      EXPECT_EQ(a.stages[s][i].mhz, b.stages[s][i].mhz) << s << "," << i;
    }
  }
  EXPECT_EQ(a.power_limits_w, b.power_limits_w);
  ASSERT_EQ(a.predicted.has_value(), b.predicted.has_value());
  if (a.predicted) {
    EXPECT_EQ(a.predicted->time_s, b.predicted->time_s);  // bit-exact
    EXPECT_EQ(a.predicted->energy_j, b.predicted->energy_j);
  }
}

// The small plan as a JSON document, for tests to break one field of.
json SmallJson() {
  return json::parse(PlanToJson(SmallPlan()));
}

void ExpectError(const std::string& text, std::initializer_list<std::string> needles) {
  try {
    PlanFromJson(text, "plan.json");
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("plan.json: ", 0), 0u) << message;
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << message;
    }
  }
}

void ExpectDocError(const json& doc, std::initializer_list<std::string> needles) {
  ExpectError(doc.dump(), needles);
}

TEST(PlanJsonTest, RoundTrip) {
  const Plan plan = SmallPlan();
  ExpectSamePlan(plan, PlanFromJson(PlanToJson(plan), "plan.json"));
}

TEST(PlanJsonTest, RoundTripWithoutPredictionAndWithChunks) {
  Plan plan;
  plan.schedule = "interleaved";
  plan.num_stages = 2;
  plan.num_microbatches = 2;
  plan.num_chunks = 2;
  plan.stages = {{P(0, Kind::kForward, 0, 1410, 0), P(0, Kind::kForward, 0, 1400, 1)},
                 {P(1, Kind::kForward, 1, 1395, 1), P(1, Kind::kBackward, 1, 1380, 1)}};
  const Plan back = PlanFromJson(PlanToJson(plan), "plan.json");
  ExpectSamePlan(plan, back);
  EXPECT_FALSE(back.predicted.has_value());
}

TEST(PlanJsonTest, OneInstructionPerLineAndValidJson) {
  const std::string text = PlanToJson(SmallPlan());
  const json doc = json::parse(text);  // valid JSON
  EXPECT_EQ(doc["version"], 1);
  EXPECT_EQ(doc["schedule"], "1f1b");
  EXPECT_EQ(doc["stages"][1][0]["frequency"], 1200);
  EXPECT_NE(text.find("\n      {\"instruction\": \"forward\", \"microbatch\": 0, \"chunk\": 0, "
                      "\"frequency\": 1410}"),
            std::string::npos)
      << text;
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_LT(lines, 30u) << text;  // compact: one line per instruction, not per field
}

TEST(PlanJsonTest, AcceptsOmittedChunkIntegralFloatsAndMissingPrediction) {
  const Plan plan = PlanFromJson(
      R"({"version": 1, "schedule": "gpipe", "num_stages": 1, "num_microbatches": 1,
          "stages": [[{"instruction": "forward", "microbatch": 0, "frequency": 1410.0},
                      {"instruction": "backward", "microbatch": 0, "frequency": 1395,
                       "comment": "unknown fields are ignored"}]]})",
      "plan.json");
  EXPECT_EQ(plan.num_chunks, 1);
  ASSERT_EQ(plan.stages.size(), 1u);
  ASSERT_EQ(plan.stages[0].size(), 2u);
  EXPECT_EQ(plan.stages[0][0].mhz, 1410);
  EXPECT_EQ(plan.stages[0][0].instruction.chunk, 0);
  EXPECT_EQ(plan.stages[0][1].instruction.kind, Kind::kBackward);
  EXPECT_EQ(plan.stages[0][1].instruction.stage, 0);
  EXPECT_FALSE(plan.predicted.has_value());
}

TEST(PlanJsonTest, PointSolutionLiteral) {
  Plan plan;
  plan.schedule = "1f1b";
  plan.num_stages = 2;
  plan.num_microbatches = 1;
  plan.stages = {{P(0, Kind::kForward, 0, 1410), P(0, Kind::kBackward, 0, 1395)},
                 {P(1, Kind::kForward, 0, 1410)}};
  EXPECT_EQ(PlanToPointSolution(plan),
            "[[('forward', 1410), ('backward', 1395)], [('forward', 1410)]]");
  EXPECT_EQ(PlanToPointSolution(SmallPlan()),
            "[[('forward', 1410), ('forward', 1395), ('backward', 1380), ('backward', 1410)], "
            "[('forward', 1200), ('backward', 1410), ('forward', 1215), ('backward', 1410)]]");
  EXPECT_EQ(PlanToPointSolution(Plan()), "[]");
}

TEST(PlanJsonTest, ReadPlanFile) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("joulepipe-plan-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       ".json");
  {
    std::ofstream out(path, std::ios::binary);
    out << PlanToJson(SmallPlan());
  }
  ExpectSamePlan(SmallPlan(), ReadPlanFile(path.string()));
  std::filesystem::remove(path);
  try {
    ReadPlanFile(path.string());
    ADD_FAILURE() << "read a missing file";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot read plan '" + path.string() + "': No such file or directory");
  }
}

// ---- Rejected plans -----------------------------------------------------------

TEST(PlanJsonErrorTest, InvalidJsonNamesLineAndColumn) {
  ExpectError("{\"version\": 1,, }", {"not valid JSON at line 1, column 15", "unexpected ','"});
  ExpectError("", {"not valid JSON", "the text is empty"});
  // Cut inside "predicted" on line 6.
  const std::string cut = PlanToJson(SmallPlan()).substr(0, 100);
  ExpectError(cut, {"not valid JSON at line 6, column 17", "unexpected end of input"});
}

TEST(PlanJsonErrorTest, TopLevelMustBeObject) {
  ExpectError("[1, 2]", {"must be a JSON object", "array"});
}

TEST(PlanJsonErrorTest, Version) {
  json doc = SmallJson();
  doc.erase("version");
  ExpectDocError(doc, {"no field 'version'"});
  doc["version"] = 2;
  ExpectDocError(doc, {"version 2 is not supported", "upgrade joulepipe"});
  doc["version"] = "1";
  ExpectDocError(doc, {"version must be an integer", "string \"1\""});
}

TEST(PlanJsonErrorTest, TopLevelFields) {
  for (const char* field : {"schedule", "num_stages", "num_microbatches", "stages"}) {
    json doc = SmallJson();
    doc.erase(field);
    ExpectDocError(doc, {"no field '" + std::string(field) + "'"});
  }
  json doc = SmallJson();
  doc["num_stages"] = "2";
  ExpectDocError(doc, {"num_stages must be an integer", "string \"2\""});
  doc = SmallJson();
  doc["num_microbatches"] = 0;
  ExpectDocError(doc, {"num_microbatches must be an integer >= 1", "0"});
  doc = SmallJson();
  doc["schedule"] = 7;
  ExpectDocError(doc, {"schedule must be a non-empty string", "number 7"});
  doc = SmallJson();
  doc["stages"] = json::object();
  ExpectDocError(doc, {"stages must be an array"});
}

TEST(PlanJsonErrorTest, NumStagesMustMatchStagesArray) {
  json doc = SmallJson();
  doc["num_stages"] = 3;
  ExpectDocError(doc, {"num_stages is 3", "'stages' has 2 entries"});
}

TEST(PlanJsonErrorTest, InstructionFields) {
  json doc = SmallJson();
  doc["stages"][1][3]["frequency"] = "1410";
  ExpectDocError(doc, {"stages[1][3].frequency must be an integer", "string \"1410\""});
  doc["stages"][1][3]["frequency"] = 1410.5;
  ExpectDocError(doc, {"stages[1][3].frequency must be an integer", "1410.5"});
  doc["stages"][1][3]["frequency"] = 0;
  ExpectDocError(doc, {"stages[1][3].frequency must be an integer >= 1"});
  doc["stages"][1][3].erase("frequency");
  ExpectDocError(doc, {"stages[1][3] has no field 'frequency'"});

  doc = SmallJson();
  doc["stages"][0][2]["instruction"] = "fwd";
  ExpectDocError(doc, {"stages[0][2].instruction", "\"forward\" or \"backward\"", "\"fwd\""});
  doc = SmallJson();
  doc["stages"][0][1]["microbatch"] = 2;
  ExpectDocError(doc, {"stages[0][1].microbatch is 2", "num_microbatches is 2"});
  doc["stages"][0][1]["microbatch"] = -1;
  ExpectDocError(doc, {"stages[0][1].microbatch must be an integer >= 0"});
  doc = SmallJson();
  doc["stages"][0][1]["chunk"] = 1;
  ExpectDocError(doc, {"stages[0][1].chunk is 1", "num_chunks is 1"});
  doc = SmallJson();
  doc["stages"][1][0] = true;
  ExpectDocError(doc, {"stages[1][0] must be an object", "boolean"});
  doc = SmallJson();
  doc["stages"][1] = 5;
  ExpectDocError(doc, {"stages[1] must be an array"});
}

TEST(PlanJsonErrorTest, Prediction) {
  json doc = SmallJson();
  doc["predicted"]["energy_j"] = "lots";
  ExpectDocError(doc, {"predicted.energy_j must be a finite number", "\"lots\""});
  doc["predicted"].erase("energy_j");
  ExpectDocError(doc, {"predicted has no field 'energy_j'"});
  doc["predicted"] = nullptr;  // a null prediction is no prediction
  EXPECT_FALSE(PlanFromJson(doc.dump(), "plan.json").predicted.has_value());
}

TEST(PlanJsonTest, PowerLimitPlanRoundTrips) {
  Plan plan = SmallPlan();
  plan.power_limits_w = {0, 212.5};
  const Plan back = PlanFromJson(PlanToJson(plan), "plan.json");
  ExpectSamePlan(plan, back);
  EXPECT_NE(PlanToJson(plan).find("\"power_limits_w\": [0.0,212.5]"), std::string::npos)
      << PlanToJson(plan);
  EXPECT_EQ(PlanToJson(SmallPlan()).find("power_limits_w"), std::string::npos);
}

TEST(PlanJsonErrorTest, PowerLimits) {
  json doc = SmallJson();
  doc["power_limits_w"] = {250};
  ExpectDocError(doc, {"power_limits_w must be an array of one power limit (W) per stage (2)"});
  doc["power_limits_w"] = {250, "x"};
  ExpectDocError(doc, {"power_limits_w[1] must be a finite number"});
  doc["power_limits_w"] = {250, 0.5};
  ExpectDocError(doc, {"power_limits_w[1] must be 0 (the GPU's default limit) or 1..5000 W"});
  doc["power_limits_w"] = {250, 9000};
  ExpectDocError(doc, {"power_limits_w[1]", "9000"});
  doc["power_limits_w"] = nullptr;  // null: a clock plan
  EXPECT_TRUE(PlanFromJson(doc.dump(), "plan.json").power_limits_w.empty());
}

// Lowered waits travel with the plan; a file with one half of the pair is refused.
TEST(PlanJson, WaitClocksRoundTrip) {
  Plan plan = SmallPlan();
  plan.stages[0][1].wait_mhz = 600;
  plan.stages[0][1].wait_restore_s = 0.0123456789;
  const std::string text = PlanToJson(plan);
  EXPECT_NE(text.find("\"wait_frequency\": 600"), std::string::npos);
  const Plan back = PlanFromJson(text, "p.json");
  EXPECT_EQ(back.stages[0][1].wait_mhz, 600);
  EXPECT_EQ(back.stages[0][1].wait_restore_s, 0.0123456789);
  EXPECT_EQ(back.stages[0][0].wait_mhz, 0);
  EXPECT_EQ(PlanToJson(SmallPlan()).find("wait_"), std::string::npos);
  std::string half = text;
  half.replace(half.find(", \"wait_restore_s\""),
               std::string(", \"wait_restore_s\": 0.0123456789").size(), "");
  try {
    PlanFromJson(half, "p.json");
    ADD_FAILURE() << "accepted wait_frequency without wait_restore_s";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stages[0][1] has wait_frequency without wait_restore_s"),
              std::string::npos)
        << e.what();
  }
}

// Head waits (one per stage, 0 = not lowered) travel with the plan; a list
// of the wrong length, a restore without a clock or out of range is refused
// naming the field.
TEST(PlanJson, HeadWaitsRoundTrip) {
  Plan plan = SmallPlan();
  plan.head_waits.assign(plan.stages.size(), HeadWait{});
  plan.head_waits.back() = {600, 0.0123456789};
  const std::string text = PlanToJson(plan);
  EXPECT_NE(text.find("\"head_waits\": ["), std::string::npos);
  const Plan back = PlanFromJson(text, "p.json");
  ASSERT_EQ(back.head_waits.size(), plan.stages.size());
  EXPECT_EQ(back.head_waits.back().mhz, 600);
  EXPECT_EQ(back.head_waits.back().restore_s, 0.0123456789);
  EXPECT_EQ(back.head_waits.front().mhz, 0);
  EXPECT_EQ(PlanToJson(SmallPlan()).find("head_waits"), std::string::npos);

  nlohmann::json doc = nlohmann::json::parse(text);
  doc["head_waits"] = {{{"wait_frequency", 600}, {"wait_restore_s", 0.1}}};
  ExpectDocError(doc, {"head_waits must be an array of one object per stage"});
  doc["head_waits"] = nlohmann::json::array();
  for (size_t s = 0; s < plan.stages.size(); ++s)
    doc["head_waits"].push_back({{"wait_frequency", 0}, {"wait_restore_s", 0}});
  doc["head_waits"][0]["wait_restore_s"] = 0.5;
  ExpectDocError(doc, {"head_waits[0].wait_restore_s must be 0 where wait_frequency is 0"});
  doc["head_waits"][0] = {{"wait_frequency", 600}, {"wait_restore_s", -1}};
  ExpectDocError(doc, {"head_waits[0].wait_restore_s must be seconds in 0..3600"});
  doc["head_waits"][0] = {{"wait_frequency", 600}};
  ExpectDocError(doc, {"head_waits[0] has no field 'wait_restore_s'"});
}

// A grid plan's levers (hold clocks, start ramp) travel with the plan; each
// field is checked by name, and a grid plan that lowers waits or sets power
// limits is refused.
TEST(PlanJson, GridShapeRoundTripAndChecks) {
  Plan plan = SmallPlan();
  GridShape grid;
  grid.hold_mhz.assign(plan.stages.size(), 1410);
  grid.hold_mhz.front() = 0;
  grid.start_ramp_s = 1.5;
  grid.start_ramp_mhz = {210, 810, 1410};
  grid.pipeline_offset_s = 0.0125;
  grid.stop_ramp_s = 1.5;
  plan.grid = grid;
  const std::string text = PlanToJson(plan);
  EXPECT_NE(text.find("\"grid\": {\"hold_frequency\": [0,"), std::string::npos) << text;
  const Plan back = PlanFromJson(text, "p.json");
  ASSERT_TRUE(back.grid.has_value());
  EXPECT_EQ(back.grid->hold_mhz, grid.hold_mhz);
  EXPECT_EQ(back.grid->start_ramp_s, 1.5);
  EXPECT_EQ(back.grid->start_ramp_mhz, grid.start_ramp_mhz);
  EXPECT_EQ(back.grid->pipeline_offset_s, 0.0125);
  EXPECT_EQ(back.grid->stop_ramp_s, 1.5);
  EXPECT_EQ(StageShapeOf(back, 0).stop_ramp_s, 1.5);
  EXPECT_FALSE(PlanFromJson(PlanToJson(SmallPlan()), "p.json").grid.has_value());
  const StageShape last = StageShapeOf(back, static_cast<int>(plan.stages.size()) - 1);
  EXPECT_EQ(last.hold_mhz, 1410);
  EXPECT_EQ(last.start_ramp_mhz.size(), 3u);
  EXPECT_EQ(StageShapeOf(back, 0).hold_mhz, 0);
  EXPECT_FALSE(StageShapeOf(SmallPlan(), 0).any());

  const nlohmann::json good = nlohmann::json::parse(text);
  nlohmann::json doc = good;
  doc["grid"]["hold_frequency"] = {1410};
  ExpectDocError(doc, {"grid.hold_frequency must be an array of one clock"});
  doc = good;
  doc["grid"]["hold_frequency"][1] = -5;
  ExpectDocError(doc, {"grid.hold_frequency[1] must be an integer"});
  doc = good;
  doc["grid"]["start_ramp_frequencies"] = {1410, 810};
  ExpectDocError(doc, {"grid.start_ramp_frequencies[1] is 810 MHz, below the step before it"});
  doc = good;
  doc["grid"].erase("start_ramp_frequencies");
  ExpectDocError(doc, {"grid has stop_ramp_s without start_ramp_frequencies"});
  doc["grid"].erase("stop_ramp_s");
  ExpectDocError(doc, {"grid has start_ramp_s without start_ramp_frequencies"});
  doc = good;
  doc["grid"]["start_ramp_s"] = 0;
  ExpectDocError(doc, {"grid.start_ramp_frequencies needs start_ramp_s > 0"});
  doc = good;
  doc["grid"]["start_ramp_s"] = 7200;
  ExpectDocError(doc, {"grid.start_ramp_s must be seconds in 0..3600"});
  doc = good;
  doc["grid"]["pipeline_offset_s"] = -0.1;
  ExpectDocError(doc, {"grid.pipeline_offset_s must be seconds in 0..3600"});
  doc = good;
  doc["stages"][0][0]["wait_frequency"] = 600;
  doc["stages"][0][0]["wait_restore_s"] = 0.01;
  ExpectDocError(doc, {"stages[0][0].wait_frequency cannot be set in a grid plan"});
  doc = good;
  doc["power_limits_w"] = nlohmann::json::array();
  for (size_t s = 0; s < plan.stages.size(); ++s) doc["power_limits_w"].push_back(300);
  ExpectDocError(doc, {"grid cannot go with power_limits_w"});
}

}  // namespace
}  // namespace joulepipe::model
