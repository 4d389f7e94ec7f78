// ClockSource: where the agent gets clocks in profile mode, and where it
// reports what it measured. The in-situ profiler implements it.
//
// Threads: every call comes from the training thread, inside the agent's
// hooks (Agent::OnInstructionBegin/End, OnStepEnd). Implementations must be
// quick (they add to the hook cost) and must not throw; if one throws, the
// agent falls back (default clocks, hooks become no-ops) and training goes on.
#pragma once

#include "joulepipe/model/instruction.hpp"

namespace joulepipe::runtime {

class ClockSource {
 public:
  virtual ~ClockSource() = default;

  // The SM clock (MHz) the instruction about to begin should run at; called
  // at instruction begin. 0 or less: leave the clock as it is.
  virtual int ClockFor(model::Kind kind) = 0;

  // One instruction ended: it was requested to run at `mhz`, took
  // `seconds` (host steady_clock, begin hook to end hook) and used `joules`
  // on this rank's GPU. `approximate` is true when the energy is instant
  // power x duration (the instruction was shorter than the energy counter's
  // update period) rather than a counter delta. `actual_mhz` is the SM clock
  // the GPU reported at the instruction's end (below `mhz` when a power or
  // thermal cap throttles it); 0 when not known.
  virtual void OnInstruction(model::Kind kind, int mhz, double seconds, double joules,
                             bool approximate, int actual_mhz = 0) = 0;

  // The gap before an instruction (from the previous instruction's end, or
  // the step's begin, to this instruction's begin): time and energy spent
  // waiting, for P_block = joules / seconds. Called at instruction begin,
  // before ClockFor. Not called for the first instruction when no step
  // begin was seen.
  virtual void OnWait(double seconds, double joules) = 0;

  // The iteration ended (Agent::OnStepEnd).
  virtual void OnStepEnd() = 0;
};

}  // namespace joulepipe::runtime
