// Extension of the simulated NVML library (src/sim_nvml, docs/sim-nvml.md,
// "In-process load"): lets a fake training loop tell the simulated GPU what
// it is doing right now, so that the energy counter, power readings and the
// SM clock follow the loop instead of the config's load schedule.
//
// Not part of NVML; only the simulated library exports it. Clients look it up
// with dlsym on the loaded library (kSimSetLoadSymbol) and must treat a
// missing symbol as "not the simulated library".
#pragma once

#include "joulepipe/gpu/nvml_api.hpp"

namespace joulepipe::sim_nvml {

// Load states of nvmlJoulepipeSimSetLoad.
inline constexpr int kLoadSchedule = -1;  // back to the config's load schedule
inline constexpr int kLoadIdle = 0;       // idle_w, lowest allowed clock
inline constexpr int kLoadBlocked = 1;    // waiting on a peer: p_block_w at the busy clock
inline constexpr int kLoadBusy = 2;       // running physics::Work{., compute_fraction, activity}

inline constexpr char kSimSetLoadSymbol[] = "nvmlJoulepipeSimSetLoad";
using SimSetLoadFn = nvmlReturn_t (*)(nvmlDevice_t device, int state, double compute_fraction,
                                      double activity);

}  // namespace joulepipe::sim_nvml

extern "C" {

// Records, at the current time, that `device` is now in `state` (kLoad*);
// `compute_fraction` (beta, [0, 1]) and `activity` (>= 0) matter only when
// busy. Effective until the next call; overrides the load schedule. Kept in
// the session's settings history (and the state file, if configured; at
// thousands of calls per second use no state file). Not logged in call_log.
// INVALID_ARGUMENT on an unknown state or out-of-range value; the usual
// UNINITIALIZED / GPU_IS_LOST errors.
nvmlReturn_t nvmlJoulepipeSimSetLoad(nvmlDevice_t device, int state, double compute_fraction,
                                     double activity);

}  // extern "C"
