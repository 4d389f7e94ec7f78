// The order a training loop runs a stage's forwards and backwards in, and a
// stage plan put into that order.
//
// A plan lists a stage's instructions in the order its schedule runs them;
// a framework may run the same instructions in another order (Megatron's
// interleaved warm-up, a loop that does backward before the next forward).
// The agent walks its plan in order (agent.hpp), so a plan is handed to it
// in the order the loop was seen to run: the same (kind, microbatch, chunk)
// set, each at its planned clock. A plan whose set differs from the loop's
// is for another pipeline shape and is never applied.
#pragma once

#include <string>
#include <vector>

#include "joulepipe/model/plan.hpp"

namespace joulepipe::runtime {

// One forward or backward as the loop's hooks name it (no stage: the hooks
// of one rank are all its own stage's).
struct LoopStep {
  model::Kind kind = model::Kind::kForward;
  int microbatch = 0;
  int chunk = 0;
  friend bool operator==(const LoopStep&, const LoopStep&) = default;
};

// `plan`'s instructions reordered to `loop`'s order. When the two are not
// the same set of (kind, microbatch, chunk), returns false and says why in
// `why` ("the schedule this rank ran (8 forwards/backwards) is not the one
// planned (12): ..."); `out` is then unchanged.
bool InLoopOrder(const std::vector<model::PlannedInstruction>& plan,
                 const std::vector<LoopStep>& loop, std::vector<model::PlannedInstruction>& out,
                 std::string& why);

// True when `plan` already runs in `loop`'s order.
bool SameOrder(const std::vector<model::PlannedInstruction>& plan,
               const std::vector<LoopStep>& loop);

// The clocks of a stage plan in one line, one token per instruction:
// "F0@1410 B0@1200/wait@600 F1.1@1350[overlap=2]" (kind, microbatch,
// ".chunk" when not 0, MHz, "/wait@MHz" for a lowered wait after it, its
// knob setting in brackets when it has one).
std::string ClocksText(const std::vector<model::PlannedInstruction>& plan);

// A grid plan's levers as the applied line shows them ("" for none):
// "; waits held at 1410 MHz; start ramp 2 s: 210 600 1005 1410 MHz; stop
// ramp 2 s".
std::string ShapeText(const model::StageShape& shape);

}  // namespace joulepipe::runtime
