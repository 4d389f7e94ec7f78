// Plans that keep a job's power within a utility's limits at the least
// energy, and what each limit costs.
//
// Two levers, priced on the simulated job's waveform (waveform.hpp):
//   * the clock plan: every pipeline runs one of the frontier's plans. Lower
//     clocks lower the compute peak, so the drop at the all-reduce (the
//     swing, the ramp) shrinks, and the energy plan saves as it does so;
//   * a power floor: while the job's power would fall below floor_w, filler
//     load (or the GPU firmware's power floor) burns the difference. It
//     raises the trough, so it meets any swing, ramp or minimum-power limit,
//     and it costs exactly the energy it burns, counted apart as energy
//     spent for the grid.
// The firmware approach alone is the baseline plan (every clock at maximum)
// with the least floor that meets the limits; joulepipe's answer is the
// least-energy (plan, floor) pair over the candidate plans that meets them
// within the deadline. Both are searched on the same waveforms.
//
// Limits are on the job's power as GridOptions describe it (GPU, or GPU +
// host with host_w), in steady state: the job's start and stop are steps
// a floor cannot remove (a ramp of the job's first and last iterations
// does), so padding is not applied here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/simulator.hpp"
#include "joulepipe/sim/waveform.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::sim {

// The most copies of a job MeasureJobs sums (a site's jobs).
inline constexpr int kMaxSiteJobs = 10'000;

struct GridLimits {
  double max_swing_w = 0;         // largest swing within 1 s; 0: no limit
  double max_ramp_w_per_s = 0;    // largest ramp; 0: no limit
  double min_power_fraction = 0;  // trough >= this x peak, 0..1; 0: no limit
  double max_band_rms_w = 0;      // RMS in the band; 0: no limit

  bool any() const {
    return max_swing_w > 0 || max_ramp_w_per_s > 0 || min_power_fraction > 0 || max_band_rms_w > 0;
  }
  bool MetBy(const GridMetrics& m) const;
};

// One (plan, floor) pair on the healthy job.
struct ShapedPoint {
  int candidate = -1;   // index into the candidates given
  double time_s = 0;    // mean iteration time of the job
  double energy_j = 0;  // mean job energy per iteration, filler included
  double filler_j = 0;  // of which burnt by the floor, per iteration
  double floor_w = 0;   // the job's power floor (0: none)
  double offset_s = 0;  // between the pipelines' starts (JobSpec::pipeline_offset_s)
  GridMetrics grid;     // of the floored waveform
  bool meets = false;   // within the limits
};

struct GridPlanRequest {
  GridLimits limits;
  GridOptions options;    // windows, band, host power (pad_s is ignored)
  double deadline_s = 0;  // candidates slower than this (predicted) are not used; > 0
  int iterations = 4;     // iterations of the healthy job simulated per candidate, >= 1
  double waveform_dt_s = 0.01;
  // A third lever, none by default: offsets between the pipelines' starts
  // (JobSpec::pipeline_offset_s) to try with every candidate, each > 0;
  // a pair is used when the plan's time plus (pipelines - 1) offsets is
  // within the deadline. Training is unchanged; the pipelines' drops to the
  // all-reduce come one after another instead of at once.
  std::vector<double> offsets_s;
};

// The offsets that spread the pipelines' drops over 1, 2, 4 and 8 ramp
// windows (GridPlanRequest::offsets_s for `pipelines` pipelines; none for
// one pipeline).
std::vector<double> SpreadingOffsets(int pipelines, double ramp_window_s);

struct GridPlan {
  // Every candidate used, floor 0, no offset, in the given order.
  std::vector<ShapedPoint> unshaped;
  // Every (candidate, offset) pair used, floor 0.
  std::vector<ShapedPoint> unfloored;
  ShapedPoint firmware;  // candidate `baseline` + the least floor that meets
  ShapedPoint chosen;    // least energy that meets, over candidates, offsets and floors
  // Their GPU power over the simulated iterations, floor applied (the
  // floor's share on the GPUs when GridOptions::host_w > 0).
  Waveform firmware_waveform, chosen_waveform;
};

// What the grid sees of `jobs` copies of one job's waveform (GridOptions as
// for one job: host_w is one job's, and is multiplied too). Aligned: every
// copy starts its iterations together, the worst case (every figure x jobs).
// Random: each copy shifted by a uniform offset within one `period_s` (an
// iteration), drawn from `seed`; the waveform is taken as periodic in it.
GridMetrics MeasureJobs(const Waveform& one, int jobs, bool aligned, double period_s,
                        std::uint64_t seed, const GridOptions& options);

// `candidates` are the plans the job may run (CandidatePlan, e.g. frontier
// points) with `baseline` the all-max-clock one; `job` the job (its
// straggler and iteration count are replaced: the healthy job, request.
// iterations). Throws model::InputError naming GridLimits::<field> or
// GridPlanRequest::<field> for a bad value.
GridPlan PlanForGrid(const schedule::Schedule& schedule, const model::Profile& profile,
                     const JobSpec& job, const std::vector<CandidatePlan>& candidates, int baseline,
                     const GridPlanRequest& request);

// The plans a grid plan chooses from: the all-max-clock plan (first, the
// baseline) and up to `max_points` frontier points whose time is within
// `deadline_s`, evenly spread over them, the least-energy one always
// included.
std::vector<CandidatePlan> GridCandidates(const solver::Frontier& frontier, double deadline_s,
                                          int max_points = 16);

// The energy-smoothness frontier over one limit: for each value of
// `limits.max_ramp_w_per_s` in `ramps` (W/s), the grid plan (firmware
// alone and joulepipe's). The other limits stay as given.
struct GridFrontierRow {
  double max_ramp_w_per_s = 0;
  ShapedPoint firmware, chosen;
};
std::vector<GridFrontierRow> RampFrontier(const schedule::Schedule& schedule,
                                          const model::Profile& profile, const JobSpec& job,
                                          const std::vector<CandidatePlan>& candidates,
                                          int baseline, GridPlanRequest request,
                                          const std::vector<double>& ramps);

// The plan the runtime can run for the grid: the least-energy (candidate,
// offset) pair that meets the limits with no floor (the runtime runs no
// filler load), or nullptr when none does.
const ShapedPoint* FloorlessChoice(const GridPlan& plan);

// A start ramp: clock caps for a job's first seconds, so that its power
// rises from idle to its compute power in steps a ramp limit accepts
// instead of at once (model::GridShape's start_ramp_*). The job's power
// under a cap is predicted from the profile: every GPU computing the plan's
// instructions at min(plan clock, cap) (each the highest profiled clock at
// or below it), the mean power of one stage's instructions x its GPUs. It
// is the power the ramp must reach; the iterations' own swings under each
// cap are those of the steady state, scaled down.
struct StartRamp {
  double step_s = 0;              // each cap's time; seconds = step_s x steps
  std::vector<int> mhz;           // ascending caps, one per step
  std::vector<double> power_w;    // the job's power computing under each cap
  double idle_w = 0;              // the job's power before it starts (P_block on every GPU)
  double lowest_w = 0;            // the job's power computing under the profile's lowest clock
  double largest_step_w = 0;      // the largest rise between steps (from idle first)
  bool first_is_largest = false;  // that rise is the first, from idle to the lowest cap
  double ramp_w_per_s = 0;        // what the ramp figure sees: largest_step_w / max(step_s, window)
  double seconds() const { return step_s * static_cast<double>(mhz.size()); }
};
struct StartRampRequest {
  double max_ramp_w_per_s = 0;      // the limit the ramp is sized for (> 0 unless seconds > 0)
  double window_s = 0.1;            // the ramp figure's window (GridOptions::ramp_window_s)
  double seconds = 0;               // > 0: this long (steps of window_s), whatever the limit
  double idle_w_per_gpu = 0;        // P_block
  std::int64_t gpus_per_stage = 1;  // pipelines x tensor-parallel GPUs
};
// Throws model::InputError naming StartRampRequest::<field> for a bad value.
StartRamp PlanStartRamp(const schedule::Schedule& schedule, const model::Profile& profile,
                        const CandidatePlan& plan, const StartRampRequest& request);

// The least floor (W) that makes `waveform` meet `limits` under `options`,
// found by bisection to within 0.1 % of the waveform's peak; 0 when it
// meets them already.
double LeastFloorW(const Waveform& waveform, const GridLimits& limits, const GridOptions& options);

// `waveform` with every bin raised to at least floor_w (host power counted
// as GridOptions::host_w does: the floor is on GPU + host when host_w > 0).
Waveform WithFloor(const Waveform& waveform, double floor_w, double host_w);

}  // namespace joulepipe::sim
