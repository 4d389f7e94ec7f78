// The protocol's messages through their JSON, both ways: what the
// coordinator writes is what a rank reads, and a rank refuses an answer that
// is not the plan it asked for, naming the path.
#include "joulepipe/protocol/json.hpp"

#include <gtest/gtest.h>

#include <string>

#include "joulepipe/model/error.hpp"

namespace joulepipe::protocol {
namespace {

using nlohmann::json;

RankPlan SamplePlan() {
  RankPlan p;
  p.rank = 5;
  p.pipeline = 1;
  p.stage = 2;
  p.version = 3;
  p.point = 7;
  p.reason = "straggler pipeline 0 at 1.20x";
  p.predicted = model::Prediction{1.25, 4321.5};
  for (int mb = 0; mb < 3; ++mb) {
    model::PlannedInstruction i;
    i.instruction.stage = 2;
    i.instruction.kind = mb % 2 ? model::Kind::kBackward : model::Kind::kForward;
    i.instruction.microbatch = mb;
    i.instruction.chunk = mb == 2 ? 1 : 0;
    i.mhz = 1200 + 15 * mb;
    p.instructions.push_back(i);
  }
  p.frequencies = ZeusFrequencies(p.instructions);
  return p;
}

std::string Refusal(const json& answer, int rank = 5, int after = 2) {
  try {
    RankPlanFromJson(answer, rank, after);
  } catch (const model::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ProtocolJson, ARankPlanReadsBackAsWritten) {
  const RankPlan p = SamplePlan();
  const json wire = RankPlanToJson(p, "job-1");
  EXPECT_EQ(wire.at("job_id"), "job-1");
  const RankPlan back = RankPlanFromJson(json::parse(wire.dump()), 5, 2);
  EXPECT_EQ(back.rank, p.rank);
  EXPECT_EQ(back.pipeline, p.pipeline);
  EXPECT_EQ(back.stage, p.stage);
  EXPECT_EQ(back.version, p.version);
  EXPECT_EQ(back.point, p.point);
  EXPECT_EQ(back.reason, p.reason);
  ASSERT_TRUE(back.predicted);
  EXPECT_EQ(back.predicted->time_s, 1.25);
  EXPECT_EQ(back.predicted->energy_j, 4321.5);
  ASSERT_EQ(back.instructions.size(), p.instructions.size());
  for (std::size_t i = 0; i < p.instructions.size(); ++i) {
    EXPECT_EQ(back.instructions[i].instruction, p.instructions[i].instruction) << i;
    EXPECT_EQ(back.instructions[i].mhz, p.instructions[i].mhz) << i;
  }
  EXPECT_EQ(back.frequencies, p.frequencies);
  EXPECT_EQ(FrequencyScheduleToJson(p),
            json::parse(R"({"rank":5,"frequencies":[["forward",1200],["backward",1215],)"
                        R"(["forward",1230]]})"));
}

TEST(ProtocolJson, AnAnswerThatIsNotThePlanAskedForIsRefusedByPath) {
  json wire = RankPlanToJson(SamplePlan(), "job-1");
  EXPECT_EQ(Refusal(wire, 4), "rank is 5 but the request asked for rank 4");
  EXPECT_EQ(Refusal(wire, 5, 3),
            "version is 3 but the request asked for a plan newer than version 3");
  json bad = wire;
  bad["frequencies"][1][1] = 999;
  EXPECT_EQ(Refusal(bad),
            "frequencies[1] is (backward, 999) but instructions[1] is (backward, 1215); the two "
            "lists must agree");
  bad = wire;
  bad["instructions"][2].erase("frequency");
  EXPECT_EQ(Refusal(bad), "instructions[2] has no field 'frequency'");
  bad = wire;
  bad["instructions"] = json::array();
  EXPECT_EQ(Refusal(bad),
            "instructions must be a non-empty array (this rank's stage, one iteration)");
  bad = wire;
  bad["newer_member"] = true;  // a newer coordinator's: ignored
  EXPECT_EQ(Refusal(bad), "");
}

TEST(ProtocolJson, AnIterationReportReadsBackAsWrittenAndIsChecked) {
  IterationReport r;
  r.rank = 3;
  r.iteration = 41;
  r.time_s = 0.75;
  r.energy_j = 210.5;
  IterationReport back = IterationReportFromJson(json::parse(IterationReportToJson(r).dump()));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.iteration, 41);
  EXPECT_EQ(back.time_s, 0.75);
  EXPECT_EQ(back.energy_j, 210.5);
  r.energy_j.reset();
  back = IterationReportFromJson(IterationReportToJson(r));
  EXPECT_FALSE(back.energy_j);
  r.time_s = 1e6;
  try {
    IterationReportFromJson(IterationReportToJson(r));
    ADD_FAILURE() << "a day-long iteration was accepted";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "IterationReport::time_s");
  }
  json extra = IterationReportToJson(IterationReport{1, 2, 0.5, std::nullopt});
  extra["surprise"] = 1;
  try {
    IterationReportFromJson(extra);
    ADD_FAILURE() << "an unknown member was accepted";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("has no member \"surprise\""), std::string::npos)
        << e.what();
  }
}

TEST(ProtocolJson, AnAbsentRecoveryFollowsAThresholdBelowItsDefault) {
  const nlohmann::json base = {{"pp_degree", 2},
                               {"dp_degree", 2},
                               {"tp_degree", 1},
                               {"schedule", "1f1b"},
                               {"microbatches", 4}};
  nlohmann::json j = base;
  j["straggler"] = {{"threshold", 1.02}};
  EXPECT_EQ(JobConfigFromJson(j).straggler.recover_below, 1.02);
  j["straggler"] = {{"threshold", 1.5}};
  EXPECT_EQ(JobConfigFromJson(j).straggler.recover_below, StragglerOptions{}.recover_below);
  j["straggler"] = {{"threshold", 1.02}, {"recover_below", 1.01}};
  EXPECT_EQ(JobConfigFromJson(j).straggler.recover_below, 1.01);
}

}  // namespace
}  // namespace joulepipe::protocol
