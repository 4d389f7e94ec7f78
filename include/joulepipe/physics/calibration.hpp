// Calibration of the GPU DVFS model (gpu_model.hpp) against measured
// per-clock stage profiles (model::Profile, e.g. data/profiles/*.csv).
//
// Parameters are split in two levels:
//   * per GPU type — DvfsModel (v_max_v, ridge_mhz, static_w, dynamic_w), one
//     set shared by every (stage, kind) measured on that GPU; v_min_v is not
//     fitted (it is the measured voltage floor);
//   * per (stage, kind) — Work (time_at_max_s, compute_fraction, activity).
//
// dynamic_w and activity only ever appear as their product, so they are
// degenerate. Normalisation: FitDvfs rescales dynamic_w so that the mean
// fitted activity over all the (stage, kind) it was given is exactly 1;
// FitWorks keeps the GPU's dynamic_w and fits activities relative to it.
//
// Objective (both levels): the sum over fitted clocks of squared relative
// errors of time and of energy, the model run at the clock the profile
// requested under the power limit the profile was measured with. For fixed
// (compute_fraction, activity) time and energy are linear in time_at_max_s,
// so it has a closed form; the rest is searched with Nelder–Mead + restarts.
#pragma once

#include <optional>
#include <vector>

#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::physics {

struct CalibrationOptions {
  // Power limit the profile was measured under; 0 = gpu.power_limit_max_w
  // (Perseus-style profiles are taken at the maximum power limit).
  double power_limit_w = 0;
  // Clocks below this are not used for fitting (they are still listed).
  int min_fit_mhz = 0;
  // FitDvfs: lowest ridge allowed, e.g. the highest clock at which the
  // voltage floor was read (nvidia-smi); 0 = the GPU's min SM clock.
  double min_ridge_mhz = 0;
};

struct FittedWork {
  int stage = 0;
  model::Kind kind = model::Kind::kForward;
  Work work;
};

// One measured clock of one (stage, kind) against the model.
struct CalibrationRow {
  int stage = 0;
  model::Kind kind = model::Kind::kForward;
  int mhz = 0;
  double measured_time_s = 0;
  double measured_energy_j = 0;
  double model_time_s = 0;
  double model_energy_j = 0;
  double effective_mhz = 0;  // model's clock after the power cap
  double time_error = 0;     // (model - measured) / measured
  double energy_error = 0;   // (model - measured) / measured
};

// Absolute relative errors (fractions, 0.03 = 3 %) over a set of rows.
struct ErrorStats {
  int points = 0;
  double median_time = 0, p90_time = 0, max_time = 0;
  double median_energy = 0, p90_energy = 0, max_energy = 0;
};

struct Calibration {
  GpuSpec gpu;  // the GPU with the DVFS parameters the rows were computed with
  double power_limit_w = 0;
  std::vector<FittedWork> works;     // one per (stage, kind), stage-major
  std::vector<CalibrationRow> rows;  // every measured clock, highest first per work
  double objective = 0;              // sum of squared relative errors over fitted rows

  // Error statistics over rows with mhz >= min_mhz (of one kind, if given).
  // Zero points gives all-zero stats.
  ErrorStats Summary(int min_mhz, std::optional<model::Kind> kind = std::nullopt) const;
};

// Fits the Work of every (stage, kind) in `profile` with gpu.dvfs fixed.
// Throws model::InputError if the profile is empty, or if a (stage, kind)
// has fewer than 3 clocks >= min_fit_mhz (too few to fit 3 parameters).
Calibration FitWorks(const GpuSpec& gpu, const model::Profile& profile,
                     const CalibrationOptions& options = {});

struct DvfsFit {
  DvfsModel dvfs;                         // fitted; v_min_v as given
  std::vector<Calibration> calibrations;  // one per profile, with `dvfs`
  double objective = 0;                   // sum over profiles
};

// Fits gpu.dvfs (all but v_min_v) jointly with the works of every profile
// (all measured on this GPU type), starting from gpu.dvfs. Deterministic.
// Takes seconds: it nests FitWorks in a Nelder–Mead over the GPU parameters.
DvfsFit FitDvfs(const GpuSpec& gpu, const std::vector<model::Profile>& profiles,
                const CalibrationOptions& options = {});

// End-to-end check of a simulated profile (workload model x GPU model, no
// fitting) against a measured profile of the same configuration: for every
// (stage, kind) and clock >= min_mhz in both, the relative errors of the
// clock response t(f)/t(fmax) and E(f)/E(fmax), fmax = the measured row's
// highest clock. Absolute scale is not compared: a measured profile may be of
// a reduced stage slice (Perseus's are). Throws model::InputError if no
// (stage, kind, clock) is shared or the simulated profile lacks an fmax.
ErrorStats CompareClockResponse(const model::Profile& measured, const model::Profile& simulated,
                                int min_mhz);

}  // namespace joulepipe::physics
