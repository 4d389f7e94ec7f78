// Replay: the time and energy of one iteration under a plan, computed by
// walking each stage's instruction sequence and waiting on dependencies.
// This is the reference evaluator; it is deliberately independent of the
// solver's critical-path code.
//
// Energy accounting (model/energy.hpp): for each physical stage s,
//   E_s = sum_i e_i(f_i) + P_block * (T - sum_i t_i(f_i)),
// where T is the iteration time (the last instruction's end). GPU only.
//
// With a calibrated wait model (model/wait_model.hpp) each wait that follows
// an instruction (until the stage's next instruction starts; after its last,
// until T) is charged WaitModel::WaitEnergyJ instead: a long wait is spent
// partly at the wait clock. The wait before a stage's first instruction is
// charged P_block x g: the runtime lowers clocks after an instruction ends,
// and what precedes the first one (the previous iteration's all-reduce and
// optimizer step) is not in the plan. An uncalibrated model gives exactly
// the formula above.
#pragma once

#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::schedule {

// One instruction as the replay ran it.
struct TimedInstruction {
  double start_s = 0;   // from the iteration's start
  double time_s = 0;    // at its clock
  double energy_j = 0;  // at its clock (blocking excluded)
  int mhz = 0;
  // The wait after it: until the stage's next instruction starts, or until
  // the iteration's end after the stage's last instruction.
  double wait_after_s = 0;
};

struct ReplayResult {
  double time_s = 0;
  double energy_j = 0;           // all stages, including blocking energy
  double busy_energy_j = 0;      // sum of instruction energies
  double blocking_energy_j = 0;  // P_block * idle time, all stages, less lowered waits' saving
  double wait_s = 0;             // time the stages wait, all stages: sum of (T - busy time)
  double lowered_wait_s = 0;     // of which at the wait clock (0: flat model)
  // [stage]: the wait before the stage's first instruction (the pipeline
  // fill); the waits after instructions are in the timetable.
  std::vector<double> head_wait_s;
  // [stage][position]: each instruction in the plan's order, for timelines
  // and per-stage energy (busy = sum of energies; blocked = P_block x
  // (time_s - sum of times)).
  std::vector<std::vector<TimedInstruction>> timetable;
};

// Which profile row an instruction uses: with as many profiled stages as
// virtual stages (S*V) it is the virtual stage; otherwise the physical stage.
int ProfileStage(const Spec& spec, int profile_stages, const model::Instruction& instruction);

// Throws model::InputError if the plan does not match the schedule (other
// stage count, missing or extra instruction, other order) or names a clock the
// profile does not have; `source` names the plan in the message.
ReplayResult Replay(const Schedule& schedule, const model::Profile& profile,
                    const model::Plan& plan, double p_block_w, const std::string& source = "plan");
// The same with a wait model; `waits.p_block_w` is the P_block. Replay with
// FlatWaitModel(p) equals Replay with p exactly.
ReplayResult Replay(const Schedule& schedule, const model::Profile& profile,
                    const model::Plan& plan, const model::WaitModel& waits,
                    const std::string& source = "plan");

// Writes each lowered wait of `replay` (a replay of `plan`) into the plan:
// wait_mhz = waits.wait_mhz() and wait_restore_s = waits.RestoreAfterS(gap)
// on every instruction whose wait the model lowers, clearing them elsewhere,
// and plan->head_waits for the waits before each stage's first instruction
// (left empty when none is lowered). Returns how many waits it lowered.
int AnnotateWaits(const ReplayResult& replay, const model::WaitModel& waits, model::Plan* plan);

}  // namespace joulepipe::schedule
