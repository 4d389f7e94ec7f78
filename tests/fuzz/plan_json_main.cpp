// fuzz_plan_json: the plan JSON reader (model::PlanFromJson, through
// model::ParseJsonBounded) and the checks behind it (schedule::EvaluatePlan
// on a small 2-stage profile), under random, mutated and hostile input
// (tests/fuzz/fuzz_engine.hpp has the flags and the exit status).
//
// Invariants, for every input:
//   * the reader returns a plan or throws model::InputError, nothing else;
//     so does EvaluatePlan on an accepted plan; a rejection's message is
//     short and carries no JSON library text;
//   * an accepted plan round-trips: PlanToJson then PlanFromJson gives the
//     same plan, predicted figures bit for bit;
//   * an evaluated plan has a finite time > 0 and a finite energy >= 0;
//   * no input takes longer than --max-seconds.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_engine.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace {

using joulepipe::fuzz::Generator;
using joulepipe::fuzz::Input;
using joulepipe::fuzz::MixedInput;
using joulepipe::fuzz::ReplaceJsonMembers;
using joulepipe::fuzz::SameBits;
using joulepipe::model::InputError;
using joulepipe::model::Kind;
using joulepipe::model::Plan;
using joulepipe::model::PlannedInstruction;
using joulepipe::schedule::Spec;

constexpr int kClocks[] = {1410, 1200, 900};

// Two stages, forward and backward, at three clocks.
joulepipe::model::Profile SmallProfile() {
  joulepipe::model::Profile profile;
  for (int s = 0; s < 2; ++s) {
    for (int mhz : kClocks) {
      const double slow = 1410.0 / mhz;
      profile.Add(s, Kind::kForward, {mhz, 0.05 * slow, 20.0 + mhz / 100.0});
      profile.Add(s, Kind::kBackward, {mhz, 0.1 * slow, 40.0 + mhz / 50.0});
    }
  }
  return profile;
}

// A plan for `spec` whose clocks come from the profile, as `plan` writes it.
std::string SeedPlan(Spec spec, int variant) {
  const joulepipe::schedule::Schedule schedule = joulepipe::schedule::Build(spec);
  Plan plan;
  plan.schedule = std::string(joulepipe::schedule::KindName(spec.kind));
  plan.num_stages = spec.stages;
  plan.num_microbatches = spec.microbatches;
  plan.num_chunks = spec.chunks;
  plan.stages.resize(spec.stages);
  for (int s = 0; s < spec.stages; ++s) {
    for (int node : schedule.stage_order[s]) {
      PlannedInstruction planned;
      planned.instruction = schedule.nodes[node];
      planned.mhz = kClocks[(node + variant) % 3];
      plan.stages[s].push_back(planned);
    }
  }
  if (variant % 2 == 0) {
    plan.predicted = joulepipe::model::Prediction{1.2345678901234567, 1.0 / 3.0};
  }
  return joulepipe::model::PlanToJson(plan);
}

std::vector<std::string> Seeds() {
  using joulepipe::schedule::Kind;
  std::vector<std::string> seeds = {
      SeedPlan({Kind::k1F1B, 2, 4, 1}, 0),
      SeedPlan({Kind::kGPipe, 2, 3, 1}, 1),
      SeedPlan({Kind::kInterleaved, 2, 4, 2}, 2),
      SeedPlan({Kind::k1F1B, 1, 2, 1}, 3),  // one stage: the profile has two
      SeedPlan({Kind::k1F1B, 2, 1, 1}, 5),
  };
  // Hand-written: integral floats, no "chunk", unknown fields, nulls.
  seeds.push_back(
      "{\"version\": 1.0, \"schedule\": \"gpipe\", \"num_stages\": 2, \"num_microbatches\": 1,"
      " \"comment\": {\"x\": [1, 2]}, \"predicted\": null, \"stages\": ["
      "[{\"instruction\": \"forward\", \"microbatch\": 0, \"frequency\": 1410.0},"
      " {\"instruction\": \"backward\", \"microbatch\": 0.0, \"frequency\": 900}],"
      "[{\"instruction\": \"forward\", \"microbatch\": 0, \"frequency\": 1200, \"extra\": true},"
      " {\"instruction\": \"backward\", \"microbatch\": 0, \"frequency\": 1200}]]}");
  return seeds;
}

// JSON texts to put where a value goes: every type, the limits of int and
// double, integral floats, non-finite spellings, escapes, invalid UTF-8.
const std::vector<std::string> kJsonValues = {
    "null", "true", "false", "0", "-1", "1", "2", "3", "1410", "1410.0", "1410.5", "-0.0",
    "2147483647", "2147483648", "-2147483648", "-2147483649", "4294967296",
    "9223372036854775807", "18446744073709551615", "18446744073709551616", "1e308", "-1e308",
    "1e309", "1e-400", "4.9e-324", "24999999", "100000", "NaN", "Infinity", "\"\"", "\"1\"",
    "\"forward\"", "\"backward\"", "\"gpipe\"", "\"1f1b\"", "\"interleaved\"", "\"\\u0000\"",
    "\"\\ud800\"", "\"\xff\"", "\"\xe2\x82\xac\"", "[]", "[1]", "[[]]", "{}",
    "{\"instruction\": \"forward\", \"microbatch\": 0, \"frequency\": 1410}",
    "{\"time_s\": 1, \"energy_j\": 2}", "{\"time_s\": 1e308, \"energy_j\": -1e308}"};

const std::vector<std::string> kKeys = {
    "\"version\"",     "\"schedule\"",   "\"num_stages\"",  "\"num_microbatches\"",
    "\"num_chunks\"",  "\"stages\"",     "\"predicted\"",   "\"time_s\"",
    "\"energy_j\"",    "\"instruction\"", "\"microbatch\"", "\"chunk\"",
    "\"frequency\""};

// A valid plan with the value of one field (a random occurrence of a key)
// replaced, one field removed, or an unknown one added.
std::string HostileField(Generator& g) {
  std::string text = ReplaceJsonMembers(g, g.Seed(), kKeys, [](Generator& g) -> std::string {
    switch (g.Below(6)) {
      case 0:
        return Generator::Nested(g.NestingDepth(), g.OneIn(2), !g.OneIn(10));
      case 1:
        return "\"" + g.LongRun(g.OneIn(10) ? 1 << 20 : 1000) + "\"";
      case 2:
        return std::to_string(g.Below(1u << 31));
      default:
        return g.Pick(kJsonValues);
    }
  });
  if (g.OneIn(4)) {  // an unknown field, possibly huge or deep
    const std::size_t brace = text.find('{');
    if (brace != std::string::npos) {
      text.insert(brace + 1, "\"x" + std::to_string(g.Below(10)) + "\": " +
                                 (g.OneIn(2) ? g.Pick(kJsonValues)
                                             : Generator::Nested(g.NestingDepth(), g.OneIn(2),
                                                                 true)) +
                                 ", ");
    }
  }
  return text;
}

// Plans whose shape is extreme: many microbatches, whole documents nested
// far too deep (the crash this fuzzer guards against), huge numbers.
std::string Extreme(Generator& g) {
  using joulepipe::schedule::Kind;
  switch (g.Below(4)) {
    case 0:
      // Now and then as long as a real plan gets (4,000 instructions).
      return SeedPlan({Kind::k1F1B, 2, 1 + static_cast<int>(g.Below(g.OneIn(20) ? 1000 : 32)), 1},
                      static_cast<int>(g.Below(6)));
    case 1:
      return Generator::Nested(g.NestingDepth(), g.OneIn(2), g.OneIn(2));
    case 2:
      return "{\"stages\":" + Generator::Nested(g.NestingDepth(), g.OneIn(2), true) + "}";
    default:
      return "{\"version\": 1, \"schedule\": \"1f1b\", \"num_stages\": " +
             std::string(1 + g.Below(5000), '9') + "}";
  }
}

Input Next(Generator& g) {
  return MixedInput(g, HostileField, Extreme, "deep nesting and extreme shapes");
}

std::string Compare(const Plan& a, const Plan& b) {
  if (a.schedule != b.schedule || a.num_stages != b.num_stages ||
      a.num_microbatches != b.num_microbatches || a.num_chunks != b.num_chunks) {
    return "the header differs";
  }
  if (a.stages.size() != b.stages.size()) return "the number of stages differs";
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    if (a.stages[s].size() != b.stages[s].size()) return "a stage's length differs";
    for (std::size_t i = 0; i < a.stages[s].size(); ++i) {
      if (!(a.stages[s][i].instruction == b.stages[s][i].instruction) ||
          a.stages[s][i].mhz != b.stages[s][i].mhz) {
        return "stages[" + std::to_string(s) + "][" + std::to_string(i) + "] differs";
      }
    }
  }
  if (a.predicted.has_value() != b.predicted.has_value()) return "predicted differs";
  if (a.predicted && (!SameBits(a.predicted->time_s, b.predicted->time_s) ||
                      !SameBits(a.predicted->energy_j, b.predicted->energy_j))) {
    return "the predicted figures differ";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const joulepipe::fuzz::Options options =
      joulepipe::fuzz::ParseOptions(argc, argv, "fuzz_plan_json");
  const joulepipe::model::Profile profile = SmallProfile();
  joulepipe::schedule::EvaluateRequest request;
  request.p_block_w = 70;
  request.profile_name = "small.csv";
  request.plan_name = "fuzz.json";
  joulepipe::fuzz::Driver driver("fuzz_plan_json", options);
  return driver.Run(
      Next,
      [&](const std::string& text) -> std::string {
        Plan plan;
        try {
          plan = joulepipe::model::PlanFromJson(text, "fuzz.json");
        } catch (const InputError& e) {
          driver.Rejected(e.what());
          return joulepipe::fuzz::CheckMessage(e.what());
        }
        Plan back;
        try {
          back = joulepipe::model::PlanFromJson(joulepipe::model::PlanToJson(plan), "written.json");
        } catch (const InputError& e) {
          return std::string("the written plan does not read back: ") + e.what();
        }
        if (std::string broken = Compare(plan, back); !broken.empty()) {
          return "round trip: " + broken;
        }
        try {
          const joulepipe::schedule::PlanEvaluation evaluation =
              joulepipe::schedule::EvaluatePlan(profile, plan, request);
          const auto& r = evaluation.replay;
          if (!(std::isfinite(r.time_s) && r.time_s > 0 && std::isfinite(r.energy_j) &&
                r.energy_j >= 0)) {
            return "an evaluated plan has a time or energy out of range";
          }
          driver.Accepted();
          driver.Note("evaluated");
        } catch (const InputError& e) {
          driver.Rejected(e.what());
          driver.Note("read, then refused by EvaluatePlan");
          return joulepipe::fuzz::CheckMessage(e.what());
        }
        return "";
      },
      Seeds());
}
