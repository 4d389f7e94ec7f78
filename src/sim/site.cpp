#include "joulepipe/sim/site.hpp"

#include <algorithm>
#include <cmath>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/sim/simulate_job.hpp"
#include "joulepipe/solver/operating_point.hpp"

namespace joulepipe::sim {

namespace {

using model::Format;
using model::InputError;

void RequireWithin(const char* field, double value, double lo, double hi, const char* what) {
  if (std::isfinite(value) && value >= lo && value <= hi) return;
  throw InputError(field, Format("%s must be %g..%g (got %g): %s", field, lo, hi, value, what));
}

// Per pipeline: the sum over stages of the highest power (e/t) any of the
// stage's instructions draws at its planned clock. One GPU per stage.
double PeakPipelinePowerW(const schedule::Schedule& schedule, const model::Profile& profile,
                          const std::vector<std::uint16_t>& mhz) {
  std::vector<double> peak(schedule.spec.stages, 0.0);
  for (int n = 0; n < schedule.num_nodes(); ++n) {
    const model::Instruction& in = schedule.nodes[n];
    const int stage = schedule::ProfileStage(schedule.spec, profile.num_stages(), in);
    const model::ClockPoint* p = profile.Find(stage, in.kind, mhz[n]);
    if (p == nullptr || p->time_s <= 0) continue;
    peak[in.stage] = std::max(peak[in.stage], p->energy_j / p->time_s);
  }
  double sum = 0;
  for (double w : peak) sum += w;
  return sum;
}

RunFigures Figures(const SiteRequest& r, double iterations, std::int64_t gpus, double time_s,
                   double energy_j, double peak_gpu_w) {
  RunFigures f;
  f.iteration_s = time_s;
  f.gpu_energy_per_iteration_j = energy_j;
  f.duration_s = iterations * time_s;
  f.gpu_energy_j = iterations * energy_j;
  const double host_w = r.host_power_w * static_cast<double>(gpus);
  f.it_energy_j = f.gpu_energy_j + host_w * f.duration_s;
  f.facility_energy_j = f.it_energy_j * r.pue;
  f.average_facility_w = f.facility_energy_j / f.duration_s;
  f.peak_facility_w = r.pue * (peak_gpu_w + host_w);
  const double kwh = f.facility_energy_j / 3.6e6;
  f.cost = kwh * r.price_per_kwh;
  f.co2_kg = kwh * r.carbon_g_per_kwh / 1e3;
  return f;
}

SimulateRequest JobRequest(const SiteRequest& r) {
  SimulateRequest s;
  s.spec = r.spec;
  s.p_block_w = r.p_block_w;
  s.job.pipelines = r.pipelines;
  s.job.gpus_per_stage = r.tp;
  s.job.allreduce_s = r.allreduce_s;
  s.job.iterations = 2;  // noiseless: every iteration is the same
  s.resolution_s = r.resolution_s;
  s.cancel = r.cancel;
  s.profile_name = r.profile_name;
  return s;
}

// The pipelines that `budget_w` powers at `per_gpu_w` per GPU, each of
// `pipeline_gpus`.
std::int64_t PoweredPipelines(double budget_w, double per_gpu_w, int pipeline_gpus) {
  if (per_gpu_w <= 0) return 0;
  return static_cast<std::int64_t>(std::floor(budget_w / (per_gpu_w * pipeline_gpus)));
}

// The most of `pipelines` that share `microbatches` evenly (a data-parallel
// size that divides the global batch).
std::int64_t SharingTheBatch(std::int64_t pipelines, std::int64_t microbatches) {
  while (pipelines > 0 && microbatches % pipelines != 0) --pipelines;
  return pipelines;
}

constexpr double kSiteWaveformDtS = 0.01;

// One job's waveform as the site's figures: GPU + host of `jobs` copies.
SiteGridFigures JobsFigures(const Waveform& one, const SiteRequest& r, double host_w,
                            double period_s) {
  GridOptions o;
  o.host_w = host_w;
  return {MeasureJobs(one, r.jobs, true, period_s, r.seed, o),
          MeasureJobs(one, r.jobs, false, period_s, r.seed, o)};
}

SiteGrid SiteGridOf(const model::Profile& profile, const SiteRequest& r,
                    const SimulateOutcome& healthy, const SiteProjection& out) {
  SiteGrid g;
  g.jobs = r.jobs;
  g.bin_s = kSiteWaveformDtS;
  const double host_w = r.host_power_w * static_cast<double>(out.gpus);  // one job's
  const double period = healthy.baseline.MeanTime();
  g.baseline = JobsFigures(healthy.baseline.waveform, r, host_w, period);
  g.joulepipe = JobsFigures(healthy.joulepipe.waveform, r, host_w, healthy.joulepipe.MeanTime());
  if (!r.grid_limits.any()) return g;
  // Every job in phase is the worst case: each keeps to limit / jobs.
  GridPlanRequest plan;
  plan.limits = r.grid_limits;
  plan.limits.max_swing_w /= r.jobs;
  plan.limits.max_ramp_w_per_s /= r.jobs;
  plan.limits.max_band_rms_w /= r.jobs;
  plan.options.host_w = host_w;
  plan.deadline_s = healthy.max_clock.time_s;
  plan.iterations = healthy.request.job.iterations;
  plan.waveform_dt_s = kSiteWaveformDtS;
  const std::vector<CandidatePlan> candidates = GridCandidates(healthy.frontier, plan.deadline_s);
  const GridPlan shaped =
      PlanForGrid(healthy.schedule, profile, healthy.request.job, candidates, 0, plan);
  g.shaped = true;
  g.job_limits = plan.limits;
  g.firmware = shaped.firmware;
  g.chosen = shaped.chosen;
  g.firmware_grid = JobsFigures(shaped.firmware_waveform, r, host_w, shaped.firmware.time_s);
  g.chosen_grid = JobsFigures(shaped.chosen_waveform, r, host_w, shaped.chosen.time_s);
  // The floor raises the trough, never the peak: the peaks are the plans'.
  const double copies = static_cast<double>(r.pipelines) * r.tp;
  auto run = [&](const ShapedPoint& p) {
    const std::vector<std::uint16_t>& mhz = candidates[static_cast<std::size_t>(p.candidate)].mhz;
    return Figures(r, out.iterations, out.gpus, p.time_s, p.energy_j,
                   copies * PeakPipelinePowerW(healthy.schedule, profile, mhz));
  };
  g.firmware_run = run(shaped.firmware);
  g.chosen_run = run(shaped.chosen);
  return g;
}

}  // namespace

void CheckSiteRequest(const SiteRequest& r) {
  RequireWithin("SiteRequest::tokens", r.tokens, 1, kMaxTokens,
                "the tokens the whole run trains on, e.g. 3e11");
  RequireWithin("SiteRequest::tokens_per_iteration", r.tokens_per_iteration, 1, kMaxTokens,
                "tokens per iteration: global batch x sequence length");
  RequireWithin("SiteRequest::pue", r.pue, 1, kMaxPue,
                "the facility's power usage effectiveness, facility / IT power, e.g. 1.2");
  RequireWithin("SiteRequest::host_power_w", r.host_power_w, 0, model::kMaxHostPowerW,
                "the CPU, DRAM and NIC power per GPU, W; 0 counts GPUs only");
  RequireWithin("SiteRequest::price_per_kwh", r.price_per_kwh, 0, kMaxPricePerKwh,
                "the price of a kWh of facility energy, e.g. 0.08");
  if (r.currency.empty() || r.currency.size() > 8 ||
      std::any_of(r.currency.begin(), r.currency.end(),
                  [](unsigned char c) { return c <= ' ' || c == 0x7f || c == '"' || c == '\\'; })) {
    throw InputError("SiteRequest::currency",
                     "SiteRequest::currency must be 1-8 characters without spaces or quotes, "
                     "e.g. USD or EUR (got '" +
                         r.currency + "')");
  }
  RequireWithin("SiteRequest::carbon_g_per_kwh", r.carbon_g_per_kwh, 0, kMaxCarbonGPerKwh,
                "grams of CO2 per kWh of facility energy, e.g. 400");
  RequireWithin("SiteRequest::power_budget_w", r.power_budget_w, 0, kMaxSitePowerW,
                "the facility's power budget, W; 0 = none");
  RequireWithin("SiteRequest::straggler_slowdown", r.straggler_slowdown, 1, kMaxStragglerSlowdown,
                "the straggling pipeline's iteration time over normal; 1 = none");
  if (r.jobs < 1 || r.jobs > kMaxSiteJobs) {
    throw InputError("SiteRequest::jobs",
                     Format("SiteRequest::jobs must be 1..%d (got %d): copies of this job at the "
                            "site, for the grid figures",
                            kMaxSiteJobs, r.jobs));
  }
  CheckSimulateRequest(JobRequest(r));
}

SiteProjection ProjectSite(const model::Profile& profile, const SiteRequest& r) {
  CheckSiteRequest(r);
  SiteProjection out;
  out.request = r;
  out.iterations = std::ceil(r.tokens / r.tokens_per_iteration);
  auto report = [&](double fraction) {
    if (r.progress) r.progress("projecting", fraction);
  };

  SimulateRequest job = JobRequest(r);
  const bool grid = r.grid || r.grid_limits.any();
  if (grid) job.waveform_dt_s = kSiteWaveformDtS;
  report(0);
  const SimulateOutcome healthy = SimulateJob(profile, job);
  out.gpus = healthy.gpus();
  out.p_block_w = healthy.request.job.p_block_w;
  out.solve_seconds = healthy.solve_seconds;
  const double copies = static_cast<double>(r.pipelines) * r.tp;
  const double peak_base =
      copies * PeakPipelinePowerW(healthy.schedule, profile, healthy.frontier.max_clock.mhz);
  const double peak_jp =
      copies * PeakPipelinePowerW(healthy.schedule, profile, healthy.intrinsic.mhz);
  out.healthy.name = "healthy";
  out.healthy.baseline = Figures(r, out.iterations, out.gpus, healthy.baseline.MeanTime(),
                                 healthy.baseline.MeanEnergy(), peak_base);
  out.healthy.joulepipe = Figures(r, out.iterations, out.gpus, healthy.joulepipe.MeanTime(),
                                  healthy.joulepipe.MeanEnergy(), peak_jp);
  out.figures = Format(
      "simulated from %s (%s, P_block %g W), %lld GPUs; not measured; %s", r.profile_name.c_str(),
      profile.metadata.source.empty() ? "imported" : profile.metadata.source.c_str(), out.p_block_w,
      static_cast<long long>(out.gpus),
      r.host_power_w > 0 ? Format("host %g W per GPU", r.host_power_w).c_str()
                         : "GPU energy only (no host power given)");
  if (!profile.metadata.method.empty()) out.figures += "; profile: " + profile.metadata.method;
  report(0.4);

  if (r.straggler_slowdown > 1) {
    SimulateRequest slow = job;
    slow.job.straggler.pipeline = 0;
    slow.job.straggler.slowdown = r.straggler_slowdown;
    slow.job.straggler.from_iteration = 0;
    slow.job.straggler.for_iterations = 0;
    const SimulateOutcome o = SimulateJob(profile, slow);
    Scenario s;
    s.name = Format("straggler %gx", r.straggler_slowdown);
    // The straggler's peak is its normal plan's; the others' is at most
    // the intrinsic plan's: bounded by the healthy peaks.
    s.baseline = Figures(r, out.iterations, out.gpus, o.baseline.MeanTime(),
                         o.baseline.MeanEnergy(), peak_base);
    s.joulepipe = Figures(r, out.iterations, out.gpus, o.joulepipe.MeanTime(),
                          o.joulepipe.MeanEnergy(), peak_jp);
    out.straggler = s;
  }
  report(0.7);

  if (r.power_budget_w > 0) {
    BudgetFigures b;
    b.power_budget_w = r.power_budget_w;
    const int pipeline_gpus = r.spec.stages * r.tp;
    const double n = static_cast<double>(out.gpus);
    const std::int64_t batch = static_cast<std::int64_t>(r.spec.microbatches) * r.pipelines;
    auto powered = [&](double facility_w, std::int64_t* gpus, std::int64_t* one_job) {
      const std::int64_t pipelines =
          PoweredPipelines(r.power_budget_w, facility_w / n, pipeline_gpus);
      *gpus = pipelines * pipeline_gpus;
      *one_job = SharingTheBatch(pipelines, batch) * pipeline_gpus;
    };
    powered(out.healthy.baseline.average_facility_w, &b.gpus_average_baseline,
            &b.job_gpus_average_baseline);
    powered(out.healthy.joulepipe.average_facility_w, &b.gpus_average_joulepipe,
            &b.job_gpus_average_joulepipe);
    powered(out.healthy.baseline.peak_facility_w, &b.gpus_peak_baseline, &b.job_gpus_peak_baseline);
    powered(out.healthy.joulepipe.peak_facility_w, &b.gpus_peak_joulepipe,
            &b.job_gpus_peak_joulepipe);
    model::Objective objective;
    objective.goal = model::Goal::kPowerBudget;
    objective.host_power_w = r.host_power_w;
    objective.power_budget_w = r.power_budget_w / r.pue;  // IT power
    // The job that runs waits for the all-reduce every iteration (at
    // P_block), which lowers its average power: the budget counts it.
    objective.outside_wait_s = r.allreduce_s;
    objective.outside_wait_w = out.p_block_w;
    try {
      solver::ChooseOperatingPoint(healthy.frontier, objective, 0, r.spec.stages, copies);
      b.fits = true;
    } catch (const InputError&) {
      b.fits = false;  // no clock keeps this many GPUs within the budget
    }
    if (b.fits) {
      SimulateRequest within = job;
      within.objective = objective;
      const SimulateOutcome o = SimulateJob(profile, within);
      b.slowdown = o.intrinsic.time_s / o.max_clock.time_s - 1;
      b.run = Figures(r, out.iterations, out.gpus, o.joulepipe.MeanTime(), o.joulepipe.MeanEnergy(),
                      copies * PeakPipelinePowerW(o.schedule, profile, o.intrinsic.mhz));
    }
    out.budget = b;
  }
  if (grid) out.grid = SiteGridOf(profile, r, healthy, out);
  report(1);
  return out;
}

}  // namespace joulepipe::sim
