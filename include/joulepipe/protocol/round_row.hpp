// One rank's part of an embedded-coordination round (the Python package's
// _exchange.py): every training iteration each rank of the job contributes
// one row to an all-gather over the job's side process group, and every
// rank takes the same decisions from the same rows. The row travels as
// kRoundRowFloats float64 numbers (a CPU tensor); this is the one place
// that says which slot means what.
//
// Rank 0's row also carries the round's decisions (announced_version,
// planning_failed); the other ranks send 0 there.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace joulepipe::protocol {

struct RoundRow {
  std::int64_t iteration = 0;     // the rank's own count of iterations, from 0
  double pipeline_time_s = 0;     // this iteration's pipeline work on the rank
  bool profile_shared = false;    // the rank has given its part of the profile
  int running_version = 0;        // the plan version the rank runs (0: none)
  int announced_version = 0;      // rank 0: the newest plan version (1: at a service)
  bool planning_failed = false;   // rank 0: planning failed, every rank says why
  int sweep_iterations_left = 0;  // iterations the rank's profile sweep still needs
};

inline constexpr std::size_t kRoundRowFloats = 7;

std::array<double, kRoundRowFloats> RoundRowToFloats(const RoundRow& row);
// Throws model::InputError ("RoundRow::<member>") for a row of another
// length or a slot that is not a number of its member's kind (a peer of
// another version, or a corrupted exchange).
RoundRow RoundRowFromFloats(std::span<const double> floats);

}  // namespace joulepipe::protocol
