// Plan: one SM clock for every instruction of one pipeline iteration, listed
// per physical stage in that stage's execution order.
//
// JSON (version 1, see docs/formats.md):
//   {"version":1, "schedule":"1f1b", "num_stages":S, "num_microbatches":M,
//    "num_chunks":V, "stages":[[{"instruction":"forward","microbatch":0,
//    "chunk":0,"frequency":1410}, ...], ...],
//    "predicted":{"time_s":..,"energy_j":..}}
// "chunk" may be omitted (0); "predicted" is optional on input.
//
// A power-limit plan (solver/power_limit_plan.hpp) also has
//   "power_limits_w":[W per stage]   (0 = the GPU's default limit)
// and its "frequency" fields are the clocks the limit is predicted to give:
// the runtime sets the stage's power limit and locks no clock.
//
// A plan with lowered waits (model/wait_model.hpp) may also lower the wait
// before each stage's first instruction (the pipeline fill, and whatever
// the step waits on before it, e.g. the data loader):
//   "head_waits":[{"wait_frequency":F,"wait_restore_s":R}, ...]  one per stage,
// F = 0 (and R = 0) where the stage's head wait is not lowered; R counts
// from the step's beginning (Agent::OnStepBegin). Omitted when none is.
//
// A grid-shaped plan (sim/grid_plan.hpp; `joulepipe simulate ...
// --grid-plan-out`) shapes the job's power for the grid, not only its
// energy:
//   "grid":{"hold_frequency":[MHz per stage], "start_ramp_s":R,
//           "start_ramp_frequencies":[MHz, ...], "pipeline_offset_s":D,
//           "stop_ramp_s":E}
// hold_frequency: the clock every wait inside a step runs at (bubbles,
// point-to-point waits), so that waits draw what the planner counted for
// them rather than whatever the last instruction's lowered clock draws;
// 0 = not held. start_ramp: for the first R seconds of training the clocks
// are capped by the listed clocks in turn (ascending, R / count seconds
// each; the steps between training steps too), so the job's power rises in
// steps the grid's ramp limit accepts instead of at once. pipeline_offset_s
// (optional, 0): data-parallel pipeline p starts each iteration p x D late,
// stop_ramp_s (optional, 0; needs the start ramp's clocks): the same caps in
// descending order over the job's last E seconds, when the runtime knows
// when training ends (Agent::BeginStopRamp),
// so the pipelines' drops to the all-reduce come one after another (the
// Python session waits that long at each step's beginning). A grid plan
// lowers no wait (no wait_frequency, no head_waits) and sets no power limit.
//
// A plan from a profile with knob columns (model/profile.hpp) names each
// instruction's knob setting as "knobs":"overlap=2;comm_sms=12" (omitted
// when the instruction uses the default: Profile::Find's knob 0).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "joulepipe/model/instruction.hpp"

namespace joulepipe::model {

struct PlannedInstruction {
  Instruction instruction;
  int mhz = 0;
  // Clocks while waiting (model/wait_model.hpp): when the wait after this
  // instruction is long enough to lower the clock, the clock to wait at and
  // when, after this instruction's end, to restore the next instruction's
  // clock (s). 0 = no lowered wait. JSON: optional "wait_frequency" and
  // "wait_restore_s" (both or neither).
  int wait_mhz = 0;
  double wait_restore_s = 0;
  // The knob setting to run the instruction with (ClockPoint::knobs), ""
  // = the profile's row without knobs at `mhz` (else its fastest there). The runtime passes it to
  // the training code (Agent::planned_knobs); the framework applies it.
  std::string knobs;
};

// A lowered wait before a stage's first instruction: the clock to wait at
// and when, after the step begins, to restore the first instruction's clock
// (s). mhz 0 = not lowered.
struct HeadWait {
  int mhz = 0;
  double restore_s = 0;
};

// A grid-shaped plan's runtime levers (the "grid" object above).
struct GridShape {
  std::vector<int> hold_mhz;        // one per stage; 0 = waits not held
  double start_ramp_s = 0;          // 0 = no start ramp
  std::vector<int> start_ramp_mhz;  // ascending clock caps; empty iff start_ramp_s == 0
  // Pipeline p (its data-parallel rank) starts each iteration p x this
  // late, waiting at default clocks (sim::JobSpec::pipeline_offset_s).
  double pipeline_offset_s = 0;  // 0..3600
  // The stop ramp: the start ramp's clocks in descending order over the
  // job's last stop_ramp_s seconds, once the runtime is told when training
  // ends. Needs start_ramp_mhz. 0 = none.
  double stop_ramp_s = 0;  // 0..3600
};

// The most steps a start ramp may have, and its longest duration.
inline constexpr int kMaxRampSteps = 1'000;
inline constexpr double kMaxRampS = 3'600;

// One stage's view of a GridShape (what the runtime agent needs).
struct StageShape {
  int hold_mhz = 0;
  double start_ramp_s = 0;
  std::vector<int> start_ramp_mhz;
  double stop_ramp_s = 0;  // its caps: start_ramp_mhz, descending
  bool any() const { return hold_mhz > 0 || start_ramp_s > 0 || stop_ramp_s > 0; }
};

struct Prediction {
  double time_s = 0;
  double energy_j = 0;
};

// No board takes a power limit this high; a larger value is a typo.
inline constexpr double kMaxPowerLimitW = 5'000;

// The one rule every reader of a power limit applies (a plan file, the
// CLI's flags, the Python agent): 0 (the GPU's default limit, or "not
// given") or a finite 1..kMaxPowerLimitW W. Each names its own field.
inline bool IsPowerLimitW(double watts) {
  return watts == 0 || (watts >= 1 && watts <= kMaxPowerLimitW);
}

struct Plan {
  std::string schedule;  // "gpipe" | "1f1b" | "interleaved"
  int num_stages = 0;
  int num_microbatches = 0;
  int num_chunks = 1;
  std::vector<std::vector<PlannedInstruction>> stages;  // [stage][position]
  // Empty: a clock plan. Else one power limit per stage (W), 0 = the GPU's
  // default limit; each IsPowerLimitW.
  std::vector<double> power_limits_w;
  // Empty: no head wait is lowered. Else one per stage.
  std::vector<HeadWait> head_waits;
  // A grid-shaped plan's levers; none for other plans.
  std::optional<GridShape> grid;
  std::optional<Prediction> predicted;
};

// Stage `stage`'s share of plan.grid (empty when the plan has none).
StageShape StageShapeOf(const Plan& plan, int stage);

std::string PlanToJson(const Plan& plan);

// Throws InputError naming `source` and the offending field (by its JSON
// path, with a short excerpt of the bad value), or the line and column of a
// syntax error or of nesting deeper than kMaxJsonDepth (json_input.hpp).
Plan PlanFromJson(const std::string& text, const std::string& source);
Plan ReadPlanFile(const std::string& path);

// The Perseus/Zeus PointSolution literal: one list per stage of
// ('forward'|'backward', MHz) tuples in execution order, e.g.
//   [[('forward', 1410), ('backward', 1395)], [...]]
std::string PlanToPointSolution(const Plan& plan);

}  // namespace joulepipe::model
