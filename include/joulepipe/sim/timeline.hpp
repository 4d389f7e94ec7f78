// Timeline of a simulated run: what every GPU did and when, as Chrome
// trace-event JSON (chrome://tracing, https://ui.perfetto.dev).
//
// Events, each on one GPU (pipeline, stage), times from the job's start:
//   instruction  one forward/backward at its planned clock; its energy is the
//                instruction's energy plus P_block x its slowed extra time
//   wait         idle between instructions or until the pipelines finish
//   stall        a data-loader stall before the pipeline's first instruction
//   allreduce    the gradient all-reduce every GPU waits for
// The energies of one GPU's events in an iteration sum to its iteration
// energy (simulator.hpp), for one GPU of the stage's tensor-parallel group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::sim {

enum class EventKind : std::uint8_t {
  kInstruction,
  kWait,
  kStall,
  kAllReduce,
  kCheckpoint,
  kOffset
};
const char* EventKindName(EventKind kind);  // "instruction" | "wait" | "stall" | "allreduce"

struct TimelineEvent {
  EventKind kind = EventKind::kInstruction;
  int iteration = 0;
  int pipeline = 0;
  int stage = 0;
  int node = -1;  // schedule node id for instructions, else -1
  int mhz = 0;    // planned clock for instructions, else 0
  double start_s = 0;
  double duration_s = 0;
  double energy_j = 0;  // one GPU
};

// One run's events in a trace; pid = pid_offset + pipeline, tid = stage.
struct TimelineSection {
  std::string label;  // process names read "<label> pipeline <p>"
  int pid_offset = 0;
  const std::vector<TimelineEvent>* events = nullptr;
};

// Chrome trace-event JSON: {"traceEvents":[...], "displayTimeUnit":"ms"}.
// One "X" (complete) event per event, ts/dur in microseconds, name "F3" /
// "B3" (microbatch; "F3.1" for chunk 1), "wait", "stall" or "allreduce",
// args {mhz, energy_j, iteration}; "M" metadata events name the processes
// ("<label> pipeline p") and threads ("stage s").
std::string TimelineJson(const schedule::Schedule& schedule,
                         const std::vector<TimelineSection>& sections);

}  // namespace joulepipe::sim
