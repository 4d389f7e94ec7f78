// Checks on user input shared by the joulepipe subcommands. Each throws
// model::InputError with a message that names the flag or file at fault and
// says what to change; the CLI prints it and exits 2.
#pragma once

#include <string>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::cli {

// The stage ids below the profile's highest that have no rows at all, as
// "stage 0" or "stages 2, 5"; empty if the ids are contiguous from 0.
std::string MissingStages(const model::Profile& profile);

// --p-block: a finite number of watts >= 0.
void CheckPBlock(double p_block_w);

// The profile must describe exactly the stages the schedule runs on:
// stage ids 0..S-1, each with forward and backward rows. An interleaved
// schedule (V chunks) also accepts S*V profiled stages, one per virtual stage
// (id chunk*S + stage); with S, every chunk uses its physical stage's rows
// (schedule::ProfileStage makes the same choice).
//
// `profile_name` names the profile; `shape` says where S (and V) came from,
// e.g. "--stages 8" or "plan 'p.json' (num_stages 8)"; `fix` ends the
// message when the stage count is wrong, e.g. "pass --stages 8".
void CheckProfileFits(const model::Profile& profile, const schedule::Spec& spec,
                      const std::string& profile_name, const std::string& shape,
                      const std::string& fix);

// The schedule flags (--schedule, --stages, --microbatches, --chunks) as a
// Spec. --chunks is only for interleaved (then >= 2); `chunks_given` says
// whether the user passed it. Throws InputError naming the flag.
schedule::Spec ScheduleFromFlags(const std::string& schedule, int stages, int microbatches,
                                 int chunks, bool chunks_given);

// CheckProfileFits for a spec that came from the command line: the message
// names --stages (and --chunks) and says how to fix the profile or the flags.
void CheckProfileFitsFlags(const model::Profile& profile, const schedule::Spec& spec,
                           const std::string& profile_name);

// A frontier grid from fastest_s to slowest_s at resolution_s may have at most
// this many deadlines (more take minutes and gigabytes; the plans that matter
// are planned exactly anyway). Throws InputError naming --resolution-ms and
// the finest value that fits.
inline constexpr double kMaxGridDeadlines = 100'000;
void CheckGridSize(double fastest_s, double slowest_s, double resolution_s);

}  // namespace joulepipe::cli
