#include "joulepipe/sim/grid_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "counter_random.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/plan.hpp"

namespace joulepipe::sim {

namespace {

using model::Format;

// counter_random.hpp's stream of the site's random job phases (the
// simulator's own are 1 and 2).
constexpr std::uint64_t kPhaseStream = 3;
using model::InputError;

void CheckLimit(double value, const char* field, const char* what) {
  if (std::isfinite(value) && value >= 0) return;
  throw InputError(field,
                   Format("%s must be >= 0 (got %g): %s; 0 for no limit", field, value, what));
}

void CheckRequest(const GridPlanRequest& r) {
  CheckLimit(r.limits.max_swing_w, "GridLimits::max_swing_w", "the largest swing within 1 s, W");
  CheckLimit(r.limits.max_ramp_w_per_s, "GridLimits::max_ramp_w_per_s", "the largest ramp, W/s");
  CheckLimit(r.limits.max_band_rms_w, "GridLimits::max_band_rms_w",
             "the largest oscillation in the band (RMS), W");
  if (!(std::isfinite(r.limits.min_power_fraction) && r.limits.min_power_fraction >= 0 &&
        r.limits.min_power_fraction < 1)) {
    throw InputError("GridLimits::min_power_fraction",
                     Format("GridLimits::min_power_fraction must be 0..1 (got %g): the trough "
                            "the job may fall to, as a fraction of its peak",
                            r.limits.min_power_fraction));
  }
  if (!(std::isfinite(r.deadline_s) && r.deadline_s > 0)) {
    throw InputError("GridPlanRequest::deadline_s",
                     Format("GridPlanRequest::deadline_s must be > 0 s (got %g): the slowest "
                            "plan's predicted iteration time that may be used",
                            r.deadline_s));
  }
  for (double offset : r.offsets_s) {
    if (!(std::isfinite(offset) && offset > 0 && offset <= 3600)) {
      throw InputError("GridPlanRequest::offsets_s",
                       Format("GridPlanRequest::offsets_s must be seconds in (0, 3600] (got %g): "
                              "offsets between the pipelines' starts to try",
                              offset));
    }
  }
  if (r.iterations < 1 || r.iterations > 1000) {
    throw InputError("GridPlanRequest::iterations",
                     Format("GridPlanRequest::iterations must be 1..1000 (got %d): iterations "
                            "of the healthy job simulated per plan",
                            r.iterations));
  }
}

GridOptions Steady(GridOptions o) {
  o.pad_s = 0;
  o.idle_w = 0;
  return o;
}

// The floored point of one candidate's waveform.
ShapedPoint Shape(int candidate, double offset_s, const SimulationResult& run, double floor_w,
                  const GridPlanRequest& r) {
  const GridOptions o = Steady(r.options);
  const Waveform shaped = WithFloor(run.waveform, floor_w, o.host_w);
  ShapedPoint p;
  p.candidate = candidate;
  p.offset_s = offset_s;
  p.time_s = run.MeanTime();
  p.floor_w = floor_w;
  p.filler_j = (shaped.EnergyJ() - run.waveform.EnergyJ()) / static_cast<double>(r.iterations);
  p.energy_j = run.MeanEnergy() + p.filler_j;
  p.grid = MeasureGrid(shaped, o);
  p.meets = r.limits.MetBy(p.grid);
  return p;
}

}  // namespace

bool GridLimits::MetBy(const GridMetrics& m) const {
  // A relative slack of 1e-9: a floor found by bisection lands on a limit.
  auto within = [](double value, double limit) {
    return limit <= 0 || value <= limit * (1 + 1e-9);
  };
  return within(m.swing_w, max_swing_w) && within(m.ramp_w_per_s, max_ramp_w_per_s) &&
         within(m.band_rms_w, max_band_rms_w) &&
         (min_power_fraction <= 0 || m.trough_w >= min_power_fraction * m.peak_w * (1 - 1e-9));
}

Waveform WithFloor(const Waveform& waveform, double floor_w, double host_w) {
  Waveform out = waveform;
  const double gpu_floor = floor_w - host_w;  // the floor on the GPUs' part
  if (floor_w <= 0) return out;
  const std::size_t n = out.gpu_w.size();
  for (std::size_t i = 0; i < n; ++i) {
    // The last bin is covered up to end_s only: floor the power over that part.
    const double scale = i + 1 == n ? out.LastBinS() / out.dt_s : 1.0;
    out.gpu_w[i] = std::max(out.gpu_w[i], gpu_floor * scale);
  }
  return out;
}

double LeastFloorW(const Waveform& waveform, const GridLimits& limits, const GridOptions& options) {
  const GridOptions o = Steady(options);
  const GridMetrics unshaped = MeasureGrid(waveform, o);
  if (limits.MetBy(unshaped)) return 0;
  // At the peak the waveform is flat: every limit is met (a fraction < 1).
  double lo = unshaped.trough_w, hi = unshaped.peak_w;
  while (hi - lo > 1e-3 * unshaped.peak_w) {
    const double mid = 0.5 * (lo + hi);
    if (limits.MetBy(MeasureGrid(WithFloor(waveform, mid, o.host_w), o))) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

std::vector<CandidatePlan> GridCandidates(const solver::Frontier& frontier, double deadline_s,
                                          int max_points) {
  std::vector<CandidatePlan> out;
  out.push_back({frontier.max_clock.mhz, frontier.max_clock.time_s, frontier.max_clock.energy_j});
  std::vector<const solver::FrontierPoint*> within;
  for (const solver::FrontierPoint& p : frontier.points) {
    if (p.time_s <= deadline_s * (1 + 1e-12)) within.push_back(&p);
  }
  const std::size_t n = within.size(), k = std::min<std::size_t>(n, std::max(1, max_points));
  std::size_t last = n;  // the previous index taken
  for (std::size_t j = 0; j < k; ++j) {
    // Evenly spread, ending on the last (least-energy, points descend in energy).
    const std::size_t at = k == 1 ? n - 1 : j * (n - 1) / (k - 1);
    if (at == last) continue;
    last = at;
    out.push_back({within[at]->mhz, within[at]->time_s, within[at]->energy_j});
  }
  return out;
}

namespace {

// One (candidate, offset) pair simulated on the healthy job.
struct Run {
  int candidate = 0;
  double offset_s = 0;
  SimulationResult result;
};

// Every candidate (with every offset) the request may use, simulated on the
// healthy job with a waveform.
std::vector<Run> RunCandidates(const schedule::Schedule& schedule, const model::Profile& profile,
                               const JobSpec& job, const std::vector<CandidatePlan>& candidates,
                               int baseline, const GridPlanRequest& r) {
  if (baseline < 0 || baseline >= static_cast<int>(candidates.size())) {
    throw std::logic_error("PlanForGrid: baseline is not a candidate");
  }
  JobSpec healthy = job;
  healthy.straggler = Straggler{};
  healthy.iterations = r.iterations;
  RunOptions run;
  run.waveform_dt_s = r.waveform_dt_s;
  std::vector<Run> runs;
  std::vector<double> offsets = {0.0};
  if (job.pipelines > 1) offsets.insert(offsets.end(), r.offsets_s.begin(), r.offsets_s.end());
  for (int c = 0; c < static_cast<int>(candidates.size()); ++c) {
    for (double offset : offsets) {
      const double time_s = candidates[c].time_s + (job.pipelines - 1) * offset;
      if (!(c == baseline && offset == 0) && time_s > r.deadline_s * (1 + 1e-12)) continue;
      // Every pipeline runs candidate c: it is this simulator's baseline.
      healthy.pipeline_offset_s = offset;
      const Simulator simulator(schedule, profile, healthy, candidates, c, c);
      runs.push_back({c, offset, simulator.Run(Policy::kBaseline, run)});
    }
  }
  return runs;
}

GridPlan Choose(const std::vector<Run>& runs, int baseline, const GridPlanRequest& r) {
  GridPlan plan;
  plan.chosen.energy_j = std::numeric_limits<double>::infinity();
  for (const auto& [c, offset, result] : runs) {
    plan.unfloored.push_back(Shape(c, offset, result, 0, r));
    if (offset == 0) plan.unshaped.push_back(plan.unfloored.back());
    const double floor_w = LeastFloorW(result.waveform, r.limits, r.options);
    const ShapedPoint shaped = Shape(c, offset, result, floor_w, r);
    const double host_w = r.options.host_w;
    if (c == baseline && offset == 0) {
      plan.firmware = shaped;
      plan.firmware_waveform = WithFloor(result.waveform, floor_w, host_w);
    }
    if (shaped.meets && shaped.energy_j < plan.chosen.energy_j) {
      plan.chosen = shaped;
      plan.chosen_waveform = WithFloor(result.waveform, floor_w, host_w);
    }
  }
  if (!plan.chosen.meets) {  // nothing meets: the firmware says how
    plan.chosen = plan.firmware;
    plan.chosen_waveform = plan.firmware_waveform;
  }
  return plan;
}

}  // namespace

GridMetrics MeasureJobs(const Waveform& one, int jobs, bool aligned, double period_s,
                        std::uint64_t seed, const GridOptions& options) {
  if (jobs < 1 || jobs > kMaxSiteJobs) {
    throw InputError("jobs",
                     Format("the jobs at the site must be 1..%d (got %d)", kMaxSiteJobs, jobs));
  }
  GridOptions o = options;
  o.host_w *= jobs;
  o.idle_w *= jobs;
  const std::size_t n = one.gpu_w.size();
  // Periodic copies need whole bins: the last, partial bin is dropped.
  const std::size_t whole = n > 1 && one.LastBinS() < one.dt_s ? n - 1 : n;
  Waveform sum;
  sum.dt_s = one.dt_s;
  sum.end_s = static_cast<double>(whole) * one.dt_s;
  sum.gpu_w.assign(whole, 0.0);
  const auto period = static_cast<std::uint64_t>(std::max(1.0, std::round(period_s / one.dt_s)));
  for (int j = 0; j < jobs; ++j) {
    // The simulator's counter-based draws: job j's phase depends on the seed and j only.
    const std::size_t shift =
        aligned || j == 0
            ? 0
            : static_cast<std::size_t>(
                  detail::Hash(seed, kPhaseStream, static_cast<std::uint64_t>(j), 0, 0) % period);
    for (std::size_t i = 0; i < whole; ++i) sum.gpu_w[i] += one.gpu_w[(i + shift) % whole];
  }
  return MeasureGrid(sum, o);
}

std::vector<GridFrontierRow> RampFrontier(const schedule::Schedule& schedule,
                                          const model::Profile& profile, const JobSpec& job,
                                          const std::vector<CandidatePlan>& candidates,
                                          int baseline, GridPlanRequest request,
                                          const std::vector<double>& ramps) {
  CheckRequest(request);
  const auto runs = RunCandidates(schedule, profile, job, candidates, baseline, request);
  std::vector<GridFrontierRow> rows;
  for (double ramp : ramps) {
    request.limits.max_ramp_w_per_s = ramp;
    CheckRequest(request);
    const GridPlan plan = Choose(runs, baseline, request);
    rows.push_back({ramp, plan.firmware, plan.chosen});
  }
  return rows;
}

GridPlan PlanForGrid(const schedule::Schedule& schedule, const model::Profile& profile,
                     const JobSpec& job, const std::vector<CandidatePlan>& candidates, int baseline,
                     const GridPlanRequest& r) {
  CheckRequest(r);
  return Choose(RunCandidates(schedule, profile, job, candidates, baseline, r), baseline, r);
}

std::vector<double> SpreadingOffsets(int pipelines, double ramp_window_s) {
  std::vector<double> out;
  if (pipelines < 2 || !(ramp_window_s > 0)) return out;
  for (double windows : {1.0, 2.0, 4.0, 8.0}) {
    out.push_back(windows * ramp_window_s / (pipelines - 1));
  }
  return out;
}

const ShapedPoint* FloorlessChoice(const GridPlan& plan) {
  const ShapedPoint* best = nullptr;
  for (const ShapedPoint& p : plan.unfloored) {
    if (p.meets && (best == nullptr || p.energy_j < best->energy_j)) best = &p;
  }
  return best;
}

namespace {

// The highest profiled clock of `points` (highest first) at or below `cap`,
// else the lowest there is.
const model::ClockPoint& AtOrBelow(const std::vector<model::ClockPoint>& points, int cap) {
  for (const model::ClockPoint& p : points) {
    if (p.mhz <= cap) return p;
  }
  return points.back();
}

// The job's power with every GPU computing `plan` under `cap` (W).
double CappedPowerW(const schedule::Schedule& schedule, const model::Profile& profile,
                    const CandidatePlan& plan, int cap, std::int64_t gpus_per_stage) {
  std::vector<double> time(static_cast<std::size_t>(schedule.spec.stages), 0.0);
  std::vector<double> energy(time.size(), 0.0);
  for (int id = 0; id < schedule.num_nodes(); ++id) {
    const model::Instruction& in = schedule.nodes[static_cast<std::size_t>(id)];
    const std::vector<model::ClockPoint>& points = profile.Points(in.stage, in.kind);
    if (points.empty()) continue;  // the schedule was checked against the profile
    const int want = std::min<int>(plan.mhz[static_cast<std::size_t>(id)], cap);
    const model::ClockPoint& p = AtOrBelow(points, want);
    time[static_cast<std::size_t>(in.stage)] += p.time_s;
    energy[static_cast<std::size_t>(in.stage)] += p.energy_j;
  }
  double watts = 0;
  for (std::size_t s = 0; s < time.size(); ++s) {
    if (time[s] > 0) watts += energy[s] / time[s];
  }
  return watts * static_cast<double>(gpus_per_stage);
}

}  // namespace

StartRamp PlanStartRamp(const schedule::Schedule& schedule, const model::Profile& profile,
                        const CandidatePlan& plan, const StartRampRequest& r) {
  if (!(r.window_s > 0 && std::isfinite(r.window_s))) {
    throw model::InputError("StartRampRequest::window_s",
                            "StartRampRequest::window_s must be seconds > 0");
  }
  if (!(r.seconds >= 0 && r.seconds <= model::kMaxRampS)) {
    throw model::InputError("StartRampRequest::seconds",
                            "StartRampRequest::seconds must be 0..3600 (0: sized for the limit)");
  }
  if (r.seconds == 0 && !(r.max_ramp_w_per_s > 0 && std::isfinite(r.max_ramp_w_per_s))) {
    throw model::InputError("StartRampRequest::max_ramp_w_per_s",
                            "StartRampRequest::max_ramp_w_per_s must be > 0 when no length is "
                            "given");
  }
  if (!(r.idle_w_per_gpu >= 0) || r.gpus_per_stage < 1) {
    throw model::InputError(
        "StartRampRequest::idle_w_per_gpu",
        "StartRampRequest::idle_w_per_gpu must be >= 0 and gpus_per_stage >= 1");
  }
  if (plan.mhz.size() != static_cast<std::size_t>(schedule.num_nodes())) {
    throw std::logic_error("PlanStartRamp: the plan is not the schedule's");
  }
  StartRamp ramp;
  ramp.idle_w = r.idle_w_per_gpu * static_cast<double>(r.gpus_per_stage) * schedule.spec.stages;
  // Every clock the plan could be capped at: the profile's, ascending.
  std::vector<int> clocks;
  for (int id = 0; id < schedule.num_nodes(); ++id) {
    const model::Instruction& in = schedule.nodes[static_cast<std::size_t>(id)];
    for (const model::ClockPoint& p : profile.Points(in.stage, in.kind)) clocks.push_back(p.mhz);
  }
  std::sort(clocks.begin(), clocks.end());
  clocks.erase(std::unique(clocks.begin(), clocks.end()), clocks.end());
  if (clocks.empty()) throw std::logic_error("PlanStartRamp: no profiled clock");
  std::vector<double> power(clocks.size());
  for (std::size_t i = 0; i < clocks.size(); ++i) {
    power[i] = CappedPowerW(schedule, profile, plan, clocks[i], r.gpus_per_stage);
  }
  // When idle is below the lowest clock's power, the first step is that
  // jump whatever the caps: the ramp begins at the lowest clock and rises
  // evenly from there. Otherwise it rises evenly from idle (from full when
  // idle is above it: nothing to ramp).
  const double full = power.back();
  ramp.lowest_w = power.front();
  const bool jump = ramp.idle_w < power.front();
  const double base = jump ? power.front() : std::min(ramp.idle_w, full);
  const double rise = full - base;
  // Steps of one window each: a rise of at most limit x window per step.
  std::size_t steps = 1;
  if (r.seconds > 0) {
    steps = static_cast<std::size_t>(std::max(1.0, std::round(r.seconds / r.window_s)));
  } else {
    steps = (jump ? 1 : 0) + static_cast<std::size_t>(std::max(
                                 0.0, std::ceil(rise / (r.max_ramp_w_per_s * r.window_s) - 1e-9)));
    steps = std::max<std::size_t>(steps, 1);
  }
  steps = std::min<std::size_t>(steps, static_cast<std::size_t>(model::kMaxRampSteps));
  ramp.step_s = r.seconds > 0 ? r.seconds / static_cast<double>(steps) : r.window_s;
  // The even part's step k of n: target base + k/n of the rise; its cap the
  // lowest clock that reaches it (power rises with the cap), the highest
  // for the last step, never below the step before.
  const std::size_t first_even = jump && steps > 1 ? 1 : 0;
  const std::size_t n = steps - first_even;
  double before = ramp.idle_w;
  for (std::size_t j = 0; j < steps; ++j) {
    std::size_t i = 0;  // the lowest clock
    if (j == steps - 1) {
      i = clocks.size() - 1;
    } else if (j >= first_even) {
      const double target =
          base + rise * static_cast<double>(j - first_even + 1) / static_cast<double>(n);
      while (i + 1 < clocks.size() && power[i] < target * (1 - 1e-12)) ++i;
    }
    if (!ramp.mhz.empty() && clocks[i] < ramp.mhz.back()) {
      i = static_cast<std::size_t>(std::find(clocks.begin(), clocks.end(), ramp.mhz.back()) -
                                   clocks.begin());
    }
    ramp.mhz.push_back(clocks[i]);
    ramp.power_w.push_back(power[i]);
    if (power[i] - before > ramp.largest_step_w) {
      ramp.largest_step_w = power[i] - before;
      ramp.first_is_largest = j == 0;
    }
    before = power[i];
  }
  ramp.ramp_w_per_s = ramp.largest_step_w / std::max(ramp.step_s, r.window_s);
  return ramp;
}

}  // namespace joulepipe::sim
