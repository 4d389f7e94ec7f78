// What a profile must provide for a task on a pipeline: forward and backward
// rows for every stage the schedule runs on, and a blocking power P_block.
// Shared by the plan, simulate and evaluate calls so that all of them accept
// and refuse the same profiles with the same messages.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::schedule {

// The stage ids below the profile's highest that have no rows at all, as
// "stage 0" or "stages 2, 5..9" (runs as ranges); empty if the ids are
// contiguous from 0. Its cost follows the profile's rows, not its highest id.
std::string MissingStages(const model::Profile& profile);

// The profile must describe exactly the stages `spec` runs on: stage ids
// 0..S-1, each with forward and backward rows. An interleaved schedule (V
// chunks) also accepts S*V profiled stages, one per virtual stage (id
// chunk*S + stage); with S, every chunk uses its physical stage's rows
// (ProfileStage in replay.hpp makes the same choice).
//
// Throws model::InputError naming `profile_name` and, when the stage count is
// wrong, Spec::stages (and Spec::chunks) with the fix.
void CheckProfileFits(const model::Profile& profile, const Spec& spec,
                      const std::string& profile_name);

// The P_block a task uses, and where it came from.
struct PBlockChoice {
  double watts = 0;
  std::string source;              // "request" (the caller's) or "profile" (its metadata)
  std::vector<std::string> notes;  // e.g. the caller's value differs from the profile's
};

// The rule every task follows: the caller's value if it gave one (with a note
// naming both values when the profile's metadata says otherwise by more than
// 0.5 %), else the profile's metadata, else an error. Values are checked with
// model::CheckPBlock. Throws model::InputError naming `field` (the caller's
// struct member, e.g. "PlanRequest::p_block_w") or, for a bad metadata
// value, `profile_name`.
PBlockChoice ResolvePBlock(std::optional<double> requested, const model::Profile& profile,
                           const std::string& field, const std::string& profile_name);

}  // namespace joulepipe::schedule
