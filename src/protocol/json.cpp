#include "joulepipe/protocol/json.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/protocol/answer_reader.hpp"
#include "joulepipe/protocol/json_members.hpp"

namespace joulepipe::protocol {

namespace {

using model::InputError;
using nlohmann::json;

json FrequenciesJson(const RankPlan& p) {
  json frequencies = json::array();
  for (const model::PlannedInstruction& i : p.instructions) {
    frequencies.push_back(json::array({std::string(model::KindName(i.instruction.kind)), i.mhz}));
  }
  return frequencies;
}

}  // namespace

json IterationReportToJson(const IterationReport& report) {
  json body = {{"rank", report.rank}, {"iteration", report.iteration}, {"time_s", report.time_s}};
  body["energy_j"] = report.energy_j ? json(*report.energy_j) : json(nullptr);
  return body;
}

IterationReport IterationReportFromJson(const json& j) {
  Members m(j, "IterationReport", /*strict=*/true);
  IterationReport r;
  r.rank = m.Int("rank");
  r.iteration = m.Integer(m.Require("iteration"), "iteration");
  r.time_s = m.Number(m.Require("time_s"), "time_s");
  r.energy_j = m.OptionalNumber("energy_j");
  m.Done();
  CheckIterationReport(r);
  return r;
}

json RankPlanToJson(const RankPlan& p, const std::string& job_id) {
  json instructions = json::array();
  for (const model::PlannedInstruction& i : p.instructions) {
    instructions.push_back({{"instruction", std::string(model::KindName(i.instruction.kind))},
                            {"microbatch", i.instruction.microbatch},
                            {"chunk", i.instruction.chunk},
                            {"frequency", i.mhz}});
  }
  json out = {{"job_id", job_id},  {"rank", p.rank},       {"pipeline", p.pipeline},
              {"stage", p.stage},  {"version", p.version}, {"point", p.point},
              {"reason", p.reason}};
  if (p.predicted) {
    out["predicted"] = {{"time_s", p.predicted->time_s}, {"energy_j", p.predicted->energy_j}};
  }
  out["frequencies"] = FrequenciesJson(p);
  out["instructions"] = std::move(instructions);
  return out;
}

json FrequencyScheduleToJson(const RankPlan& p) {
  return {{"rank", p.rank}, {"frequencies", FrequenciesJson(p)}};
}

RankPlan RankPlanFromJson(const json& root, int rank, int after_version) {
  const AnswerReader in;
  in.Object(root, "the answer");
  RankPlan plan;
  plan.rank = static_cast<int>(in.Integer(in.Require(root, "rank", ""), "rank", 0));
  if (plan.rank != rank) {
    in.Fail("rank", "is " + std::to_string(plan.rank) + " but the request asked for rank " +
                        std::to_string(rank));
  }
  plan.pipeline = static_cast<int>(in.Integer(in.Require(root, "pipeline", ""), "pipeline", 0));
  plan.stage = static_cast<int>(in.Integer(in.Require(root, "stage", ""), "stage", 0));
  plan.version = static_cast<int>(in.Integer(in.Require(root, "version", ""), "version", 1));
  if (plan.version <= after_version) {
    in.Fail("version", "is " + std::to_string(plan.version) +
                           " but the request asked for a plan newer than version " +
                           std::to_string(after_version));
  }
  if (const json* point = in.Optional(root, "point")) {
    plan.point = static_cast<int>(in.Integer(*point, "point", 0));
  }
  if (const json* reason = in.Optional(root, "reason")) plan.reason = in.String(*reason, "reason");
  if (const json* predicted = in.Optional(root, "predicted")) {
    in.Object(*predicted, "predicted");
    model::Prediction p;
    p.time_s = in.Finite(in.Require(*predicted, "time_s", "predicted"), "predicted.time_s");
    p.energy_j = in.Finite(in.Require(*predicted, "energy_j", "predicted"), "predicted.energy_j");
    plan.predicted = p;
  }

  const json& list = in.Require(root, "instructions", "");
  if (!list.is_array() || list.empty()) {
    in.Fail("instructions", "must be a non-empty array (this rank's stage, one iteration)");
  }
  plan.instructions.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "instructions[" + std::to_string(i) + "]";
    const json& entry = in.Object(list[i], path);
    model::PlannedInstruction p;
    p.instruction.stage = plan.stage;
    p.instruction.kind = in.KindOf(in.Require(entry, "instruction", path), path + ".instruction");
    p.instruction.microbatch = static_cast<int>(
        in.Integer(in.Require(entry, "microbatch", path), path + ".microbatch", 0));
    if (const json* chunk = in.Optional(entry, "chunk")) {
      p.instruction.chunk = static_cast<int>(in.Integer(*chunk, path + ".chunk", 0));
    }
    p.mhz =
        static_cast<int>(in.Integer(in.Require(entry, "frequency", path), path + ".frequency", 1));
    plan.instructions.push_back(p);
  }

  // The Zeus shape must say the same thing as the instructions.
  const json* frequencies = in.Optional(root, "frequencies");
  if (frequencies != nullptr &&
      (!frequencies->is_array() || frequencies->size() != plan.instructions.size())) {
    in.Fail("frequencies", "must be an array of " + std::to_string(plan.instructions.size()) +
                               " [kind, MHz] pairs, one per instruction");
  }
  for (std::size_t i = 0; frequencies != nullptr && i < plan.instructions.size(); ++i) {
    const model::PlannedInstruction& p = plan.instructions[i];
    const std::string path = "frequencies[" + std::to_string(i) + "]";
    const json& pair = (*frequencies)[i];
    if (!pair.is_array() || pair.size() != 2) in.Fail(path, "must be a [kind, MHz] pair");
    const model::Kind kind = in.KindOf(pair[0], path + "[0]");
    const int mhz = static_cast<int>(in.Integer(pair[1], path + "[1]", 1));
    if (kind != p.instruction.kind || mhz != p.mhz) {
      in.Fail(path, "is (" + std::string(model::KindName(kind)) + ", " + std::to_string(mhz) +
                        ") but instructions[" + std::to_string(i) + "] is (" +
                        std::string(model::KindName(p.instruction.kind)) + ", " +
                        std::to_string(p.mhz) + "); the two lists must agree");
    }
  }
  plan.frequencies = ZeusFrequencies(plan.instructions);
  return plan;
}

}  // namespace joulepipe::protocol
