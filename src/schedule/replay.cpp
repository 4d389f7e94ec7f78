// Replay: the reference evaluator. It checks a plan against the schedule,
// resolves every clock in the profile, then simulates the stages as an event
// walk: each stage executes its own sequence in order and stalls on the one
// data dependency its next instruction has on another (virtual) stage.
//
// The walk deliberately re-derives the data dependencies from the pipeline
// rules below instead of reading Schedule::predecessors or topological_order,
// so that it cross-checks both the schedule's DAG and the solver.
//   forward  of virtual stage v > 0       waits on forward of v-1 (same microbatch)
//   backward of virtual stage v < last    waits on backward of v+1
//   backward of the last virtual stage    waits on its own forward

#include "joulepipe/schedule/replay.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "joulepipe/model/error.hpp"

namespace joulepipe::schedule {

namespace {

using model::InputError;
using model::Instruction;
using model::PlannedInstruction;

// "forward microbatch 5", with the chunk only where the schedule has several.
std::string Short(const Spec& spec, const Instruction& instruction) {
  std::string text;
  if (spec.chunks > 1) text = "chunk " + std::to_string(instruction.chunk) + " ";
  return text + std::string(model::KindName(instruction.kind)) + " microbatch " +
         std::to_string(instruction.microbatch);
}

// The plan was made for another schedule than the one being replayed.
std::string ReplanHint(const Spec& spec) {
  return spec.kind == Kind::kInterleaved
             ? "re-plan with the same Spec::kind, Spec::stages, Spec::microbatches and "
               "Spec::chunks"
             : "re-plan with the same Spec::kind, Spec::stages and Spec::microbatches";
}

std::string Where(const std::string& source, int stage, std::size_t position) {
  return source + ": stage " + std::to_string(stage) + " position " + std::to_string(position);
}

void CheckHeader(const Schedule& schedule, const model::Plan& plan, const std::string& source) {
  const Spec& spec = schedule.spec;
  const std::string name(KindName(spec.kind));
  auto mismatch = [&](const std::string& field, const std::string& found,
                      const std::string& expected) {
    throw InputError(source + ": " + field + " is " + found + " but the schedule being replayed " +
                     "has " + expected + "; " + ReplanHint(spec));
  };
  if (!plan.schedule.empty() && plan.schedule != name) {
    mismatch("schedule", "'" + plan.schedule + "'", "'" + name + "'");
  }
  if (plan.num_stages != spec.stages) {
    mismatch("num_stages", std::to_string(plan.num_stages), std::to_string(spec.stages));
  }
  if (plan.num_microbatches != spec.microbatches) {
    mismatch("num_microbatches", std::to_string(plan.num_microbatches),
             std::to_string(spec.microbatches));
  }
  if (plan.num_chunks != spec.chunks) {
    mismatch("num_chunks", std::to_string(plan.num_chunks), std::to_string(spec.chunks));
  }
  if (plan.stages.size() != static_cast<std::size_t>(spec.stages) ||
      schedule.stage_order.size() != static_cast<std::size_t>(spec.stages)) {
    mismatch("the number of stage lists", std::to_string(plan.stages.size()),
             std::to_string(spec.stages));
  }
}

// The plan's stage must list exactly the schedule's sequence for that stage.
// The first differing position is reported, so a dropped instruction shows up
// where it was dropped rather than as a short list.
void CheckStage(const Schedule& schedule, const model::Plan& plan, int stage,
                const std::string& source) {
  const Spec& spec = schedule.spec;
  const std::string name(KindName(spec.kind));
  const std::vector<int>& expected = schedule.stage_order[stage];
  const std::vector<PlannedInstruction>& found = plan.stages[stage];
  const std::size_t common = std::min(expected.size(), found.size());
  for (std::size_t i = 0; i < common; ++i) {
    const Instruction& want = schedule.nodes[expected[i]];
    const Instruction& got = found[i].instruction;
    if (got.stage != stage) {
      throw InputError(Where(source, stage, i) + " lists " + Short(spec, got) + " of stage " +
                       std::to_string(got.stage) +
                       " but each stage list may only hold that stage's instructions; " +
                       ReplanHint(spec));
    }
    if (!(got == want)) {
      throw InputError(Where(source, stage, i) + " is " + Short(spec, got) + " but the " + name +
                       " schedule runs " + Short(spec, want) + " there; " + ReplanHint(spec));
    }
    // Only a hand-assembled schedule can hold such a node; the walk indexes by
    // these fields, so refuse it here.
    if (got.chunk < 0 || got.chunk >= spec.chunks || got.microbatch < 0 ||
        got.microbatch >= spec.microbatches) {
      throw InputError(Where(source, stage, i) + " (" + Short(spec, got) +
                       ") is outside the schedule's " + std::to_string(spec.chunks) +
                       " chunks and " + std::to_string(spec.microbatches) + " microbatches");
    }
  }
  if (found.size() < expected.size()) {
    throw InputError(Where(source, stage, found.size()) + " is missing: the stage lists " +
                     std::to_string(found.size()) + " instructions but the " + name +
                     " schedule runs " + std::to_string(expected.size()) + " there, next " +
                     Short(spec, schedule.nodes[expected[found.size()]]) + "; " + ReplanHint(spec));
  }
  if (found.size() > expected.size()) {
    throw InputError(Where(source, stage, expected.size()) + " is " +
                     Short(spec, found[expected.size()].instruction) + " but the " + name +
                     " schedule runs only " + std::to_string(expected.size()) +
                     " instructions on that stage; " + ReplanHint(spec));
  }
}

// Time and energy of every plan position at its planned clock.
std::vector<std::vector<model::ClockPoint>> ResolveClocks(const Spec& spec,
                                                          const model::Profile& profile,
                                                          const model::Plan& plan,
                                                          const std::string& source) {
  const int profile_stages = profile.num_stages();
  std::vector<std::vector<model::ClockPoint>> points(plan.stages.size());
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    for (std::size_t i = 0; i < plan.stages[s].size(); ++i) {
      const PlannedInstruction& planned = plan.stages[s][i];
      const Instruction& instruction = planned.instruction;
      const int row = ProfileStage(spec, profile_stages, instruction);
      const int knob = profile.KnobIndex(planned.knobs);
      if (knob < 0) {
        throw InputError(Where(source, static_cast<int>(s), i) + " (" + Short(spec, instruction) +
                         ") has knobs " + planned.knobs +
                         " that no profile row names; plan with this profile, or give the "
                         "profile rows with those knobs");
      }
      const model::ClockPoint* point = profile.Find(row, instruction.kind, planned.mhz, knob);
      if (point != nullptr) {
        points[s].push_back(*point);
        continue;
      }
      if (knob != 0) {
        throw InputError(Where(source, static_cast<int>(s), i) + " (" + Short(spec, instruction) +
                         ") runs at " + std::to_string(planned.mhz) + " MHz with knobs " +
                         planned.knobs + " but profile stage " + std::to_string(row) + " has no " +
                         std::string(model::KindName(instruction.kind)) +
                         " row with those knobs at that clock");
      }
      const std::string kind(model::KindName(instruction.kind));
      const std::vector<model::ClockPoint>& available = profile.Points(row, instruction.kind);
      std::string message =
          Where(source, static_cast<int>(s), i) + " (" + Short(spec, instruction) + ") runs at " +
          std::to_string(planned.mhz) + " MHz but the profile has no " + kind + " measurement at " +
          std::to_string(planned.mhz) + " MHz for profile stage " + std::to_string(row);
      if (available.empty()) {
        message += " (none at any clock); profile every stage, or check Spec::stages";
      } else {
        message += "; use a profiled clock (" + std::to_string(available.back().mhz) + ".." +
                   std::to_string(available.front().mhz) + " MHz)";
      }
      throw InputError(message);
    }
  }
  return points;
}

// The event walk. Times are indexed by a dense key over (virtual stage,
// microbatch, kind); it is private to this file and unrelated to node ids.
class Walker {
 public:
  Walker(const Spec& spec, const model::Plan& plan,
         const std::vector<std::vector<model::ClockPoint>>& points)
      : spec_(spec),
        plan_(plan),
        points_(points),
        virtual_stages_(spec.stages * spec.chunks),
        cursor_(spec.stages, 0),
        free_at_(spec.stages, 0.0),
        busy_(spec.stages, 0.0),
        timetable_(spec.stages) {
    for (int s = 0; s < spec.stages; ++s) timetable_[s].reserve(plan.stages[s].size());
    const std::size_t keys =
        2 * static_cast<std::size_t>(virtual_stages_) * static_cast<std::size_t>(spec.microbatches);
    end_.assign(keys, 0.0);
    done_.assign(keys, false);
    waiter_.assign(keys, -1);
  }

  // Runs every stage to completion or throws on deadlock.
  void Run(const std::string& source) {
    std::deque<int> runnable;
    for (int s = 0; s < spec_.stages; ++s) runnable.push_back(s);
    // Invariant: a stage is in `runnable` at most once, and a stage not in it
    // is either finished or registered as the waiter of exactly one key.
    while (!runnable.empty()) {
      const int stage = runnable.front();
      runnable.pop_front();
      Advance(stage, &runnable);
    }
    for (int s = 0; s < spec_.stages; ++s) {
      if (cursor_[s] < plan_.stages[s].size()) ThrowDeadlock(source);
    }
  }

  double time_s() const {
    double t = 0;
    for (double f : free_at_) t = std::max(t, f);
    return t;
  }
  double busy_energy_j() const { return busy_energy_j_; }
  double busy_time_s(int stage) const { return busy_[stage]; }
  std::vector<std::vector<TimedInstruction>> TakeTimetable() { return std::move(timetable_); }

 private:
  static constexpr int kNone = -1;

  int Key(int virtual_stage, int microbatch, model::Kind kind) const {
    return (virtual_stage * spec_.microbatches + microbatch) * 2 +
           (kind == model::Kind::kForward ? 0 : 1);
  }
  int VirtualStage(const Instruction& instruction) const {
    return instruction.chunk * spec_.stages + instruction.stage;
  }
  int Key(const Instruction& instruction) const {
    return Key(VirtualStage(instruction), instruction.microbatch, instruction.kind);
  }

  // The key `instruction` must wait for, or kNone (first virtual stage forward).
  int Dependency(const Instruction& instruction) const {
    const int v = VirtualStage(instruction);
    const int m = instruction.microbatch;
    if (instruction.kind == model::Kind::kForward) {
      return v == 0 ? kNone : Key(v - 1, m, model::Kind::kForward);
    }
    if (v == virtual_stages_ - 1) return Key(v, m, model::Kind::kForward);
    return Key(v + 1, m, model::Kind::kBackward);
  }

  // Executes `stage` until it finishes or its next instruction must wait.
  void Advance(int stage, std::deque<int>* runnable) {
    const std::vector<PlannedInstruction>& sequence = plan_.stages[stage];
    while (cursor_[stage] < sequence.size()) {
      const std::size_t position = cursor_[stage];
      const Instruction& instruction = sequence[position].instruction;
      const int dependency = Dependency(instruction);
      if (dependency != kNone && !done_[dependency]) {
        waiter_[dependency] = stage;
        return;
      }
      const model::ClockPoint& point = points_[stage][position];
      double start = free_at_[stage];
      if (dependency != kNone) start = std::max(start, end_[dependency]);
      const int key = Key(instruction);
      end_[key] = start + point.time_s;
      done_[key] = true;
      timetable_[stage].push_back({start, point.time_s, point.energy_j, point.mhz, 0});
      free_at_[stage] = end_[key];
      busy_[stage] += point.time_s;
      busy_energy_j_ += point.energy_j;
      ++cursor_[stage];
      if (waiter_[key] != kNone) {
        runnable->push_back(waiter_[key]);
        waiter_[key] = kNone;
      }
    }
  }

  [[noreturn]] void ThrowDeadlock(const std::string& source) const {
    std::string blocked;
    for (int s = 0; s < spec_.stages; ++s) {
      const std::size_t position = cursor_[s];
      if (position >= plan_.stages[s].size()) continue;
      if (!blocked.empty()) blocked += "; ";
      blocked += "stage " + std::to_string(s) + " position " + std::to_string(position) + " (" +
                 Short(spec_, plan_.stages[s][position].instruction) + ")";
    }
    throw InputError(source + ": the stages deadlock, every unfinished stage waits on an " +
                     "instruction that can never run: " + blocked + "; " + ReplanHint(spec_));
  }

  const Spec& spec_;
  const model::Plan& plan_;
  const std::vector<std::vector<model::ClockPoint>>& points_;
  const int virtual_stages_;
  std::vector<std::size_t> cursor_;  // [stage] -> next position to run
  std::vector<double> free_at_;      // [stage] -> end of its last instruction
  std::vector<double> busy_;         // [stage] -> sum of its instruction times
  std::vector<double> end_;          // [key] -> end time, valid where done_
  std::vector<bool> done_;
  std::vector<int> waiter_;  // [key] -> the stage stalled on it, or kNone
  std::vector<std::vector<TimedInstruction>> timetable_;  // [stage] -> as run
  double busy_energy_j_ = 0;
};

}  // namespace

int ProfileStage(const Spec& spec, int profile_stages, const model::Instruction& instruction) {
  if (profile_stages == spec.stages * spec.chunks) {
    return instruction.chunk * spec.stages + instruction.stage;
  }
  return instruction.stage;
}

ReplayResult Replay(const Schedule& schedule, const model::Profile& profile,
                    const model::Plan& plan, double p_block_w, const std::string& source) {
  return Replay(schedule, profile, plan, model::FlatWaitModel(p_block_w), source);
}

ReplayResult Replay(const Schedule& schedule, const model::Profile& profile,
                    const model::Plan& plan, const model::WaitModel& waits,
                    const std::string& source) {
  const double p_block_w = waits.p_block_w;
  if (!std::isfinite(p_block_w) || p_block_w < 0) {
    throw InputError("blocking power must be a finite number of watts >= 0 (got " +
                     std::to_string(p_block_w) + ")");
  }
  CheckHeader(schedule, plan, source);
  for (int s = 0; s < schedule.spec.stages; ++s) CheckStage(schedule, plan, s, source);
  const std::vector<std::vector<model::ClockPoint>> points =
      ResolveClocks(schedule.spec, profile, plan, source);

  Walker walker(schedule.spec, plan, points);
  walker.Run(source);

  ReplayResult result;
  result.time_s = walker.time_s();
  result.busy_energy_j = walker.busy_energy_j();
  double idle_s = 0;
  for (int s = 0; s < schedule.spec.stages; ++s) idle_s += result.time_s - walker.busy_time_s(s);
  result.wait_s = idle_s;
  result.timetable = walker.TakeTimetable();
  // Waits before each stage's first instruction and after each
  // instruction; lowered ones save (P_block - P_low) each second at the wait
  // clock. A flat model lowers none, so the blocking energy below is exactly
  // P_block x idle time.
  for (std::vector<TimedInstruction>& stage : result.timetable) {
    const double head = stage.empty() ? 0.0 : stage.front().start_s;
    result.head_wait_s.push_back(head);
    result.lowered_wait_s += waits.LoweredS(head);
    for (std::size_t i = 0; i < stage.size(); ++i) {
      const double next = i + 1 < stage.size() ? stage[i + 1].start_s : result.time_s;
      stage[i].wait_after_s = std::max(0.0, next - (stage[i].start_s + stage[i].time_s));
      result.lowered_wait_s += waits.LoweredS(stage[i].wait_after_s);
    }
  }
  result.blocking_energy_j =
      p_block_w * idle_s - (p_block_w - waits.lowered_w()) * result.lowered_wait_s;
  result.energy_j = result.busy_energy_j + result.blocking_energy_j;
  return result;
}

int AnnotateWaits(const ReplayResult& replay, const model::WaitModel& waits, model::Plan* plan) {
  int lowered = 0;
  plan->head_waits.assign(plan->stages.size(), model::HeadWait{});
  for (std::size_t s = 0; s < plan->stages.size() && s < replay.head_wait_s.size(); ++s) {
    const double head = replay.head_wait_s[s];
    if (waits.LoweredS(head) > 0) {
      plan->head_waits[s] = {waits.wait_mhz(), waits.RestoreAfterS(head)};
      ++lowered;
    }
  }
  if (lowered == 0) plan->head_waits.clear();  // no head wait lowered: none named
  for (std::size_t s = 0; s < plan->stages.size() && s < replay.timetable.size(); ++s) {
    for (std::size_t i = 0; i < plan->stages[s].size() && i < replay.timetable[s].size(); ++i) {
      model::PlannedInstruction& planned = plan->stages[s][i];
      const double gap = replay.timetable[s][i].wait_after_s;
      if (waits.LoweredS(gap) > 0) {
        planned.wait_mhz = waits.wait_mhz();
        planned.wait_restore_s = waits.RestoreAfterS(gap);
        ++lowered;
      } else {
        planned.wait_mhz = 0;
        planned.wait_restore_s = 0;
      }
    }
  }
  return lowered;
}

}  // namespace joulepipe::schedule
