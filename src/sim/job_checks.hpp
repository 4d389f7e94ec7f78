// The numbers of a simulated job, checked in one place for both callers:
// sim::CheckSimulateRequest (the task) and the Simulator's constructor (a
// direct user). The ranges are simulate_job.hpp's kMax* constants
// (docs/limits.md, "Numbers and ranges").
#pragma once

#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/simulator.hpp"

namespace joulepipe::sim {

// Checks every number of `job` except P_block and which pipeline straggles
// (the two callers differ there) against `spec`, the one pipeline's
// schedule: pipelines, gpus_per_stage, the job's GPUs (pipelines x stages x
// gpus_per_stage, computed in 64 bits), iterations and the work they take
// (records and simulated instructions), the P2P latency, the all-reduce,
// stalls, clock variability and the straggler's slowdown and iteration
// counts. Throws model::InputError naming the field ("JobSpec::stall_s"),
// the plausible range and the value given, in the unit a person gives it
// (ms for stalls and the all-reduce, us for the latency).
void CheckJobNumbers(const JobSpec& job, const schedule::Spec& spec);

// An iteration count or index (a detection lag, a timeline length) of
// `field`: 0..kMaxIterationIndex. Throws model::InputError naming `field`.
void CheckIterationIndex(const char* field, int value, const char* meaning);

}  // namespace joulepipe::sim
