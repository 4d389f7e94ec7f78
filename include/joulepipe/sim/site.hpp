// The task "project a training run onto a site": how long a whole run takes
// and what it costs the facility, with every GPU at its highest clocks
// (baseline) and with joulepipe, from one pipeline's stage profile.
//
// A run of `tokens` tokens takes ceil(tokens / tokens_per_iteration)
// iterations. Per iteration, sim::SimulateJob gives the whole job's time and
// GPU energy under both policies (all-reduce and waits included; healthy,
// and with one straggling pipeline when `straggler_slowdown` > 1). Then
//   IT energy        = GPU energy + host_power_w x GPUs x duration
//   facility energy  = IT energy x PUE
//   average power    = facility energy / duration
//   peak power       = PUE x (sum over GPUs of the most power-hungry
//                      instruction its plan runs + host), an upper bound: as
//                      if every GPU drew its peak at once
//   cost, CO2        = facility energy x price, x carbon intensity
// joulepipe runs the same-time plan (same duration as the baseline) unless a
// facility power budget is given: then the fastest frontier point whose
// average facility power (GPU + host, x PUE, on the pipeline's noiseless
// frontier) fits it, and the figures say how many GPUs the budget powers
// at each policy's same-time plan.
//
// Every figure is simulated (SiteProjection::figures names the profile).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/grid_plan.hpp"

namespace joulepipe::sim {

struct SiteRequest {
  schedule::Spec spec;              // one pipeline (stages = PP, microbatches per iteration)
  int pipelines = 1;                // data-parallel degree
  int tp = 1;                       // GPUs per stage
  std::optional<double> p_block_w;  // unset: the profile's metadata
  double allreduce_s = 0;           // gradient all-reduce per iteration (s)
  double tokens = 0;                // the run's tokens, > 0
  double tokens_per_iteration = 0;  // global batch x sequence length, > 0
  double pue = 1.2;                 // facility / IT power, 1..3
  double host_power_w = 0;          // per GPU: CPU, DRAM, NIC (W), 0..10000
  double price_per_kwh = 0.08;      // of facility energy, >= 0
  std::string currency = "USD";     // of price_per_kwh and the cost: 1-8 letters or symbols
  double carbon_g_per_kwh = 400;    // of facility energy, >= 0
  double power_budget_w = 0;        // facility budget (W), 0 = none
  double straggler_slowdown = 1;    // > 1: also the run with one pipeline this slow
  double resolution_s = 5e-3;       // frontier grid (s)
  // What the grid sees (SiteGrid): `jobs` copies of this job at the site,
  // and limits on the site's power, planned for the worst case (every job
  // in phase: each job gets limit / jobs).
  bool grid = false;
  int jobs = 1;            // 1..kMaxSiteJobs
  GridLimits grid_limits;  // on the site's IT power; any() implies grid
  std::uint64_t seed = 1;  // the random phases
  std::function<void(const char* phase, double fraction)> progress;
  const std::atomic<bool>* cancel = nullptr;
  std::string profile_name = "the profile";
};

// One policy's whole run.
struct RunFigures {
  double iteration_s = 0;  // whole job, mean
  double gpu_energy_per_iteration_j = 0;
  double duration_s = 0;
  double gpu_energy_j = 0;
  double it_energy_j = 0;        // GPU + host
  double facility_energy_j = 0;  // x PUE
  double average_facility_w = 0;
  double peak_facility_w = 0;
  double cost = 0;  // in the price's currency
  double co2_kg = 0;
};

struct Scenario {
  std::string name;  // "healthy" or "straggler 1.2x"
  RunFigures baseline, joulepipe;
};

struct BudgetFigures {
  double power_budget_w = 0;
  bool fits = false;  // some frontier point keeps the job's GPUs within it
  // The fastest point within the budget (when fits): its time over the
  // all-max-clock time, and the run at that point.
  double slowdown = 0;
  RunFigures run;
  // GPUs (whole pipelines of PP x TP) the budget powers at the same speed,
  // by average and by peak facility power per GPU of each policy's
  // same-time plan, at this job's power per GPU: the facility's capacity,
  // and (job_...) as one job of the same global batch, whose pipelines
  // share its microbatches evenly (a data-parallel size dividing them).
  std::int64_t gpus_average_baseline = 0, gpus_average_joulepipe = 0;
  std::int64_t gpus_peak_baseline = 0, gpus_peak_joulepipe = 0;
  std::int64_t job_gpus_average_baseline = 0, job_gpus_average_joulepipe = 0;
  std::int64_t job_gpus_peak_baseline = 0, job_gpus_peak_joulepipe = 0;
};

// The site's IT power (GPU + host of every job; cooling, which does not
// follow second-scale swings, left out) as the grid sees it, in 10 ms bins
// over two healthy iterations: every job in phase (the worst case) and at
// random phases.
struct SiteGridFigures {
  GridMetrics aligned, random;
};
struct SiteGrid {
  int jobs = 1;
  double bin_s = 0;
  SiteGridFigures baseline, joulepipe;  // the baseline and the same-time plan, no floor
  // With limits: each job's grid plan for limit / jobs (grid_plan.hpp),
  // the firmware floor alone and joulepipe's plan + floor, their site
  // figures and one job's whole run (filler energy included).
  bool shaped = false;
  GridLimits job_limits;
  ShapedPoint firmware, chosen;
  SiteGridFigures firmware_grid, chosen_grid;
  RunFigures firmware_run, chosen_run;
};

struct SiteProjection {
  SiteRequest request;
  double p_block_w = 0;
  std::int64_t gpus = 0;
  double iterations = 0;
  std::string figures;  // "simulated from <profile> (...)"
  Scenario healthy;
  std::optional<Scenario> straggler;
  std::optional<BudgetFigures> budget;
  std::optional<SiteGrid> grid;
  double solve_seconds = 0;
};

// The plausible ranges (docs/limits.md).
inline constexpr double kMaxTokens = 1e16;
inline constexpr double kMaxPue = 3;
inline constexpr double kMaxPricePerKwh = 100;
inline constexpr double kMaxCarbonGPerKwh = 5000;
inline constexpr double kMaxSitePowerW = 1e10;  // 10 GW

// Checks the numbers (SiteRequest::<field> in messages), then the job as
// SimulateJob does. Throws model::InputError.
void CheckSiteRequest(const SiteRequest& request);

// Throws model::InputError on bad input, model::Cancelled when cancelled.
SiteProjection ProjectSite(const model::Profile& profile, const SiteRequest& request);

}  // namespace joulepipe::sim
