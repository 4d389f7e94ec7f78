// Plan files (JSON, version 1) and the Perseus/Zeus PointSolution literal.
//
// The writer lays a plan out one instruction per line so that plans diff and
// grep well; numbers keep full (round-trip) precision. The reader checks
// every field and names it by its JSON path ("stages[3][7].frequency") so a
// hand-edited plan fails with a message that points at the mistake. Unknown
// fields are ignored, so later versions can add fields compatibly.
#include "joulepipe/model/plan.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/read_file.hpp"

namespace joulepipe::model {

namespace {

constexpr double kMaxPredictedTimeS = 365.0 * 86400;
constexpr double kMaxPredictedEnergyJ = 1e18;

using nlohmann::json;

constexpr int kVersion = 1;

// ---- Writing ---------------------------------------------------------------

std::string InstructionJson(const PlannedInstruction& planned) {
  const Instruction& in = planned.instruction;
  return "{\"instruction\": \"" + std::string(KindName(in.kind)) +
         "\", \"microbatch\": " + std::to_string(in.microbatch) +
         ", \"chunk\": " + std::to_string(in.chunk) +
         ", \"frequency\": " + std::to_string(planned.mhz) +
         (planned.wait_mhz > 0 ? ", \"wait_frequency\": " + std::to_string(planned.wait_mhz) +
                                     ", \"wait_restore_s\": " + json(planned.wait_restore_s).dump()
                               : std::string()) +
         (planned.knobs.empty() ? std::string() : ", \"knobs\": " + json(planned.knobs).dump()) +
         "}";
}

void AppendStage(const std::vector<PlannedInstruction>& stage, std::string* out) {
  if (stage.empty()) {
    *out += "[]";
    return;
  }
  *out += "[\n";
  for (size_t i = 0; i < stage.size(); ++i) {
    *out += "      " + InstructionJson(stage[i]);
    *out += i + 1 < stage.size() ? ",\n" : "\n";
  }
  *out += "    ]";
}

// ---- Reading ---------------------------------------------------------------

// Shows a JSON value in a message: its type and a short excerpt (Excerpt
// never walks a hostile value whole).
std::string Show(const json& value) {
  return value.type_name() + std::string(" ") + Excerpt(value, 60);
}

// Checks a parsed document field by field. `source_` names the file.
class PlanReader {
 public:
  explicit PlanReader(const std::string& source) : source_(source) {}

  Plan Read(const json& root) const {
    if (!root.is_object()) Fail("the top level", "must be a JSON object, got " + Show(root));
    CheckVersion(Require(root, "version", ""));
    Plan plan;
    plan.schedule = String(Require(root, "schedule", ""), "schedule");
    plan.num_stages = Integer(Require(root, "num_stages", ""), "num_stages", 1);
    plan.num_microbatches = Integer(Require(root, "num_microbatches", ""), "num_microbatches", 1);
    if (root.contains("num_chunks")) plan.num_chunks = Integer(root["num_chunks"], "num_chunks", 1);
    ReadStages(Require(root, "stages", ""), &plan);
    auto limits = root.find("power_limits_w");
    if (limits != root.end() && !limits->is_null()) ReadPowerLimits(*limits, &plan);
    auto heads = root.find("head_waits");
    if (heads != root.end() && !heads->is_null()) ReadHeadWaits(*heads, &plan);
    auto grid = root.find("grid");
    if (grid != root.end() && !grid->is_null()) ReadGrid(*grid, &plan);
    auto predicted = root.find("predicted");
    if (predicted != root.end() && !predicted->is_null())
      plan.predicted = ReadPrediction(*predicted);
    return plan;
  }

 private:
  [[noreturn]] void Fail(const std::string& path, const std::string& problem) const {
    throw InputError(source_ + ": " + path + " " + problem);
  }

  // `parent` is the JSON path of `object` ("" for the top level).
  const json& Require(const json& object, const char* key, const std::string& parent) const {
    auto it = object.find(key);
    if (it == object.end()) {
      const std::string where = parent.empty() ? "the plan" : parent;
      throw InputError(source_ + ": " + where + " has no field '" + key +
                       "'; add it or regenerate the plan with joulepipe");
    }
    return *it;
  }

  void CheckVersion(const json& value) const {
    const int version = Integer(value, "version", std::numeric_limits<int>::min());
    if (version != kVersion) {
      Fail("version", std::to_string(version) +
                          " is not supported: this joulepipe reads plan "
                          "version " +
                          std::to_string(kVersion) +
                          "; upgrade joulepipe or regenerate the plan with this version");
    }
  }

  std::string String(const json& value, const std::string& path) const {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
      Fail(path, "must be a non-empty string, got " + Show(value));
    }
    return value.get<std::string>();
  }

  // An integer >= `min` that fits an int. 1410.0 counts as an integer
  // (some JSON writers emit integral floats); 1410.5 and true do not.
  int Integer(const json& value, const std::string& path, int min,
              int max = std::numeric_limits<int>::max()) const {
    double number = 0;
    if (value.is_number_integer()) {
      if (value.is_number_unsigned()) {
        number = static_cast<double>(value.get<std::uint64_t>());
      } else {
        number = static_cast<double>(value.get<std::int64_t>());
      }
    } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
               value.get<double>() == std::floor(value.get<double>())) {
      number = value.get<double>();
    } else {
      Fail(path, "must be an integer, got " + Show(value));
    }
    if (number < min || number > std::numeric_limits<int>::max()) {
      Fail(path, "must be an integer >= " + std::to_string(min) + ", got " + Show(value));
    }
    if (number > max) {
      Fail(path, "must be an integer " + std::to_string(min) + ".." + std::to_string(max) +
                     ", got " + Show(value));
    }
    return static_cast<int>(number);
  }

  double Number(const json& value, const std::string& path) const {
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      Fail(path, "must be a finite number, got " + Show(value));
    }
    return value.get<double>();
  }

  void ReadStages(const json& stages, Plan* plan) const {
    if (!stages.is_array()) Fail("stages", "must be an array (one per stage), got " + Show(stages));
    if (static_cast<int>(stages.size()) != plan->num_stages) {
      throw InputError(source_ + ": num_stages is " + std::to_string(plan->num_stages) +
                       " but 'stages' has " + std::to_string(stages.size()) +
                       " entries; they must agree (one list of instructions per stage)");
    }
    plan->stages.resize(stages.size());
    for (size_t s = 0; s < stages.size(); ++s) {
      const std::string path = "stages[" + std::to_string(s) + "]";
      const json& list = stages[s];
      if (!list.is_array()) Fail(path, "must be an array of instructions, got " + Show(list));
      plan->stages[s].reserve(list.size());
      for (size_t i = 0; i < list.size(); ++i) {
        plan->stages[s].push_back(ReadInstruction(list[i], path + "[" + std::to_string(i) + "]",
                                                  static_cast<int>(s), *plan));
      }
    }
  }

  PlannedInstruction ReadInstruction(const json& entry, const std::string& path, int stage,
                                     const Plan& plan) const {
    if (!entry.is_object()) Fail(path, "must be an object, got " + Show(entry));
    PlannedInstruction planned;
    Instruction& in = planned.instruction;
    in.stage = stage;
    const json& kind = Require(entry, "instruction", path);
    if (!kind.is_string() || !ParseKind(kind.get_ref<const std::string&>(), &in.kind)) {
      Fail(path + ".instruction", "must be \"forward\" or \"backward\", got " + Show(kind));
    }
    in.microbatch = Integer(Require(entry, "microbatch", path), path + ".microbatch", 0);
    if (in.microbatch >= plan.num_microbatches) {
      Fail(path + ".microbatch", "is " + std::to_string(in.microbatch) +
                                     " but num_microbatches is " +
                                     std::to_string(plan.num_microbatches));
    }
    if (entry.contains("chunk")) in.chunk = Integer(entry["chunk"], path + ".chunk", 0);
    if (in.chunk >= plan.num_chunks) {
      Fail(path + ".chunk", "is " + std::to_string(in.chunk) + " but num_chunks is " +
                                std::to_string(plan.num_chunks));
    }
    // Every field is range-checked, used or not: clocks as in a profile
    // (1..kMaxClockMhz).
    planned.mhz = Integer(Require(entry, "frequency", path), path + ".frequency", 1, kMaxClockMhz);
    const bool has_wait = entry.contains("wait_frequency");
    if (has_wait != entry.contains("wait_restore_s")) {
      Fail(path, std::string("has ") + (has_wait ? "wait_frequency" : "wait_restore_s") +
                     " without " + (has_wait ? "wait_restore_s" : "wait_frequency") +
                     "; a lowered wait needs both (or neither)");
    }
    if (has_wait) {
      planned.wait_mhz =
          Integer(entry["wait_frequency"], path + ".wait_frequency", 1, kMaxClockMhz);
      planned.wait_restore_s = Number(entry["wait_restore_s"], path + ".wait_restore_s");
      if (planned.wait_restore_s < 0 || planned.wait_restore_s > 3600) {
        Fail(path + ".wait_restore_s",
             "must be seconds in 0..3600 after the instruction's end, got " +
                 Show(entry["wait_restore_s"]));
      }
    }
    if (entry.contains("knobs")) {
      const json& knobs = entry["knobs"];
      if (!knobs.is_string()) Fail(path + ".knobs", "must be a string, got " + Show(knobs));
      planned.knobs = knobs.get<std::string>();
      const std::string problem = KnobsProblem(planned.knobs);
      if (!problem.empty()) Fail(path + ".knobs", Show(knobs) + " " + problem);
    }
    return planned;
  }

  void ReadPowerLimits(const json& limits, Plan* plan) const {
    if (!limits.is_array() || static_cast<int>(limits.size()) != plan->num_stages) {
      Fail("power_limits_w", "must be an array of one power limit (W) per stage (" +
                                 std::to_string(plan->num_stages) + "), got " + Show(limits));
    }
    for (std::size_t s = 0; s < limits.size(); ++s) {
      const std::string path = "power_limits_w[" + std::to_string(s) + "]";
      const double watts = Number(limits[s], path);
      if (!IsPowerLimitW(watts)) {
        Fail(path, "must be 0 (the GPU's default limit) or 1.." +
                       std::to_string(static_cast<int>(kMaxPowerLimitW)) + " W, got " +
                       Show(limits[s]));
      }
      plan->power_limits_w.push_back(watts);
    }
  }

  void ReadHeadWaits(const json& heads, Plan* plan) const {
    if (!heads.is_array() || static_cast<int>(heads.size()) != plan->num_stages) {
      Fail("head_waits", "must be an array of one object per stage (" +
                             std::to_string(plan->num_stages) + "), got " + Show(heads));
    }
    for (std::size_t s = 0; s < heads.size(); ++s) {
      const std::string path = "head_waits[" + std::to_string(s) + "]";
      const json& entry = heads[s];
      if (!entry.is_object()) Fail(path, "must be an object, got " + Show(entry));
      HeadWait head;
      head.mhz = Integer(Require(entry, "wait_frequency", path), path + ".wait_frequency", 0,
                         kMaxClockMhz);
      head.restore_s = Number(Require(entry, "wait_restore_s", path), path + ".wait_restore_s");
      if (head.restore_s < 0 || head.restore_s > 3600) {
        Fail(path + ".wait_restore_s",
             "must be seconds in 0..3600 after the step's beginning, got " +
                 Show(entry["wait_restore_s"]));
      }
      if (head.mhz == 0 && head.restore_s != 0) {
        Fail(path + ".wait_restore_s", "must be 0 where wait_frequency is 0 (not lowered), got " +
                                           Show(entry["wait_restore_s"]));
      }
      plan->head_waits.push_back(head);
    }
  }

  void ReadGrid(const json& value, Plan* plan) const {
    if (!value.is_object()) Fail("grid", "must be an object, got " + Show(value));
    GridShape grid;
    const json& holds = Require(value, "hold_frequency", "grid");
    if (!holds.is_array() || static_cast<int>(holds.size()) != plan->num_stages) {
      Fail("grid.hold_frequency", "must be an array of one clock (MHz, 0 = not held) per stage (" +
                                      std::to_string(plan->num_stages) + "), got " + Show(holds));
    }
    for (std::size_t s = 0; s < holds.size(); ++s) {
      grid.hold_mhz.push_back(
          Integer(holds[s], "grid.hold_frequency[" + std::to_string(s) + "]", 0, kMaxClockMhz));
    }
    if (value.contains("start_ramp_s")) {
      grid.start_ramp_s = Number(value["start_ramp_s"], "grid.start_ramp_s");
      if (grid.start_ramp_s < 0 || grid.start_ramp_s > kMaxRampS) {
        Fail("grid.start_ramp_s",
             "must be seconds in 0..3600 (0: no start ramp), got " + Show(value["start_ramp_s"]));
      }
    }
    if (value.contains("pipeline_offset_s")) {
      grid.pipeline_offset_s = Number(value["pipeline_offset_s"], "grid.pipeline_offset_s");
      if (grid.pipeline_offset_s < 0 || grid.pipeline_offset_s > kMaxRampS) {
        Fail("grid.pipeline_offset_s",
             "must be seconds in 0..3600 (each pipeline's start after the one before it), got " +
                 Show(value["pipeline_offset_s"]));
      }
    }
    if (value.contains("stop_ramp_s")) {
      grid.stop_ramp_s = Number(value["stop_ramp_s"], "grid.stop_ramp_s");
      if (grid.stop_ramp_s < 0 || grid.stop_ramp_s > kMaxRampS) {
        Fail("grid.stop_ramp_s",
             "must be seconds in 0..3600 (0: no stop ramp), got " + Show(value["stop_ramp_s"]));
      }
    }
    const bool has_steps = value.contains("start_ramp_frequencies");
    if (grid.stop_ramp_s > 0 && !has_steps) {
      Fail("grid",
           "has stop_ramp_s without start_ramp_frequencies; the stop ramp runs the start "
           "ramp's clocks in descending order");
    }
    if (grid.start_ramp_s > 0 && !has_steps) {
      Fail("grid", "has start_ramp_s without start_ramp_frequencies; a start ramp needs both");
    }
    if (has_steps) {
      const json& steps = value["start_ramp_frequencies"];
      if (!steps.is_array() || steps.empty() || static_cast<int>(steps.size()) > kMaxRampSteps) {
        Fail("grid.start_ramp_frequencies", "must be an array of 1.." +
                                                std::to_string(kMaxRampSteps) +
                                                " clocks (MHz, ascending), got " + Show(steps));
      }
      if (grid.start_ramp_s == 0) {
        Fail("grid.start_ramp_frequencies",
             "needs start_ramp_s > 0 (the ramp's length); add it or drop the clocks");
      }
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const std::string path = "grid.start_ramp_frequencies[" + std::to_string(i) + "]";
        const int mhz = Integer(steps[i], path, 1, kMaxClockMhz);
        if (!grid.start_ramp_mhz.empty() && mhz < grid.start_ramp_mhz.back()) {
          Fail(path, "is " + std::to_string(mhz) + " MHz, below the step before it (" +
                         std::to_string(grid.start_ramp_mhz.back()) +
                         " MHz); a start ramp's clocks must not fall");
        }
        grid.start_ramp_mhz.push_back(mhz);
      }
    }
    // A grid plan holds its waits up: lowering them, or a power limit,
    // would work against it.
    if (!plan->head_waits.empty()) {
      Fail("grid", "cannot go with head_waits: a grid plan holds its waits, it lowers none");
    }
    if (!plan->power_limits_w.empty()) {
      Fail("grid", "cannot go with power_limits_w: a grid plan sets clocks, not power limits");
    }
    for (std::size_t s = 0; s < plan->stages.size(); ++s) {
      for (std::size_t i = 0; i < plan->stages[s].size(); ++i) {
        if (plan->stages[s][i].wait_mhz > 0) {
          Fail("stages[" + std::to_string(s) + "][" + std::to_string(i) + "].wait_frequency",
               "cannot be set in a grid plan: a grid plan holds its waits, it lowers none");
        }
      }
    }
    plan->grid = std::move(grid);
  }

  Prediction ReadPrediction(const json& value) const {
    if (!value.is_object()) Fail("predicted", "must be an object, got " + Show(value));
    Prediction prediction;
    prediction.time_s = Number(Require(value, "time_s", "predicted"), "predicted.time_s");
    prediction.energy_j = Number(Require(value, "energy_j", "predicted"), "predicted.energy_j");
    // What a planner could have predicted: an iteration of at most a year,
    // an energy of at most an exajoule.
    if (!(prediction.time_s > 0 && prediction.time_s <= kMaxPredictedTimeS)) {
      Fail("predicted.time_s",
           "must be seconds > 0 and at most a year, got " + Show(value["time_s"]));
    }
    if (!(prediction.energy_j >= 0 && prediction.energy_j <= kMaxPredictedEnergyJ)) {
      Fail("predicted.energy_j", "must be joules 0..1e18, got " + Show(value["energy_j"]));
    }
    return prediction;
  }

  const std::string& source_;
};

}  // namespace

std::string PlanToJson(const Plan& plan) {
  std::string out = "{\n";
  out += "  \"version\": " + std::to_string(kVersion) + ",\n";
  out += "  \"schedule\": " + json(plan.schedule).dump() + ",\n";
  out += "  \"num_stages\": " + std::to_string(plan.num_stages) + ",\n";
  out += "  \"num_microbatches\": " + std::to_string(plan.num_microbatches) + ",\n";
  out += "  \"num_chunks\": " + std::to_string(plan.num_chunks) + ",\n";
  if (!plan.power_limits_w.empty()) {
    out += "  \"power_limits_w\": " + json(plan.power_limits_w).dump() + ",\n";
  }
  if (!plan.head_waits.empty()) {
    out += "  \"head_waits\": [";
    for (size_t s = 0; s < plan.head_waits.size(); ++s) {
      out += (s == 0 ? "" : ", ") + std::string("{\"wait_frequency\": ") +
             std::to_string(plan.head_waits[s].mhz) +
             ", \"wait_restore_s\": " + json(plan.head_waits[s].restore_s).dump() + "}";
    }
    out += "],\n";
  }
  if (plan.grid) {
    out += "  \"grid\": {\"hold_frequency\": " + json(plan.grid->hold_mhz).dump();
    if (plan.grid->start_ramp_s > 0) {
      out += ", \"start_ramp_s\": " + json(plan.grid->start_ramp_s).dump() +
             ", \"start_ramp_frequencies\": " + json(plan.grid->start_ramp_mhz).dump();
    }
    if (plan.grid->stop_ramp_s > 0) {
      out += ", \"stop_ramp_s\": " + json(plan.grid->stop_ramp_s).dump();
    }
    if (plan.grid->pipeline_offset_s > 0) {
      out += ", \"pipeline_offset_s\": " + json(plan.grid->pipeline_offset_s).dump();
    }
    out += "},\n";
  }
  if (plan.predicted) {
    // json's double output is the shortest text that reads back exactly.
    out += "  \"predicted\": {\"time_s\": " + json(plan.predicted->time_s).dump() +
           ", \"energy_j\": " + json(plan.predicted->energy_j).dump() + "},\n";
  }
  out += "  \"stages\": [";
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    out += s == 0 ? "\n    " : ",\n    ";
    AppendStage(plan.stages[s], &out);
  }
  out += plan.stages.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

StageShape StageShapeOf(const Plan& plan, int stage) {
  StageShape shape;
  if (!plan.grid) return shape;
  if (stage >= 0 && stage < static_cast<int>(plan.grid->hold_mhz.size())) {
    shape.hold_mhz = plan.grid->hold_mhz[stage];
  }
  shape.start_ramp_s = plan.grid->start_ramp_s;
  shape.start_ramp_mhz = plan.grid->start_ramp_mhz;
  shape.stop_ramp_s = plan.grid->stop_ramp_s;
  return shape;
}

Plan PlanFromJson(const std::string& text, const std::string& source) {
  // Bounded depth: a plan nests 4 levels; a hostile one cannot nest 70,000.
  return PlanReader(source).Read(ParseJsonBounded(text, source));
}

Plan ReadPlanFile(const std::string& path) {
  return PlanFromJson(ReadWholeFile(path, "plan"), path);
}

std::string PlanToPointSolution(const Plan& plan) {
  std::string out = "[";
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    if (s > 0) out += ", ";
    out += "[";
    for (size_t i = 0; i < plan.stages[s].size(); ++i) {
      const PlannedInstruction& planned = plan.stages[s][i];
      if (i > 0) out += ", ";
      out += "('" + std::string(KindName(planned.instruction.kind)) + "', " +
             std::to_string(planned.mhz) + ")";
    }
    out += "]";
  }
  out += "]";
  return out;
}

}  // namespace joulepipe::model
