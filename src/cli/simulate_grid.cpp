#include "simulate_grid.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/sim/grid_plan.hpp"
#include "joulepipe/sim/grid_runtime_plan.hpp"
#include "output_dir.hpp"

namespace joulepipe::cli {

namespace {

double Mw(double w) {
  return w / 1e6;
}

// Idle before the job starts and after it ends, for the start and stop.
constexpr double kStartStopPadS = 2;

// The units a job's figures print in: MW and MJ from a 0.1 MW peak up, kW
// and kJ below (a 32-GPU job would read 0.014 MW).
struct Unit {
  double scale;
  const char* power;
  const char* energy;
};
Unit UnitFor(double peak_w) {
  return peak_w >= 1e5 ? Unit{1e6, "MW", "MJ"} : Unit{1e3, "kW", "kJ"};
}

nlohmann::ordered_json MetricsJson(const sim::GridMetrics& m) {
  return {{"peak_w", m.peak_w},
          {"trough_w", m.trough_w},
          {"mean_w", m.mean_w},
          {"swing_w", m.swing_w},
          {"ramp_w_per_s", m.ramp_w_per_s},
          {"band_rms_w", m.band_rms_w},
          {"band_peak_w", m.band_peak_w},
          {"band_peak_hz", m.band_peak_hz},
          {"energy_j", m.energy_j},
          {"duration_s", m.duration_s}};
}

// At most `most` points: each the largest amplitude of the bins it covers.
void Thin(const sim::Spectrum& s, std::size_t most, nlohmann::ordered_json* hz,
          nlohmann::ordered_json* amplitude) {
  const std::size_t n = s.hz.size();
  const std::size_t group = std::max<std::size_t>(1, (n + most - 1) / most);
  for (std::size_t i = 0; i < n; i += group) {
    std::size_t best = i;
    for (std::size_t k = i; k < std::min(n, i + group); ++k) {
      if (s.amplitude_w[k] > s.amplitude_w[best]) best = k;
    }
    hz->push_back(s.hz[best]);
    amplitude->push_back(s.amplitude_w[best]);
  }
}

}  // namespace

nlohmann::ordered_json WaveformExcerptJson(const sim::SimulateOutcome& o) {
  constexpr double kLeadS = 1, kLoHz = 0.02, kHiHz = 20;
  constexpr std::size_t kSpectrumPoints = 400;
  const sim::Waveform& base = o.baseline.waveform;
  const double dt = base.dt_s;
  const double first = o.baseline.iterations.empty() ? 0 : o.baseline.iterations[0].time_s;
  const auto bins = static_cast<std::size_t>(std::ceil(1.25 * first / dt));
  auto excerpt = [&](const sim::Waveform& w) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < std::min(bins, w.gpu_w.size()); ++i) a.push_back(w.gpu_w[i]);
    return a;
  };
  nlohmann::ordered_json j;
  j["bin_s"] = dt;
  j["lead_s"] = kLeadS;
  j["idle_w"] = o.request.job.p_block_w * static_cast<double>(o.gpus());
  j["baseline_w"] = excerpt(base);
  j["joulepipe_w"] = excerpt(o.joulepipe.waveform);
  nlohmann::ordered_json spectrum;
  for (const auto& [name, run] :
       {std::pair{"baseline", &o.baseline}, std::pair{"joulepipe", &o.joulepipe}}) {
    nlohmann::ordered_json hz = nlohmann::ordered_json::array();
    nlohmann::ordered_json amplitude = nlohmann::ordered_json::array();
    Thin(sim::AmplitudeSpectrum(run->waveform, kLoHz, kHiHz), kSpectrumPoints, &hz, &amplitude);
    spectrum[name] = {{"hz", hz}, {"amplitude_w", amplitude}};
  }
  j["spectrum"] = spectrum;
  j["metrics"] = {{"baseline", MetricsJson(sim::MeasureGrid(base, sim::GridOptions{}))},
                  {"joulepipe", MetricsJson(sim::MeasureGrid(o.joulepipe.waveform, {}))}};
  return j;
}

void AddGridLimitFlags(CLI::App* c, GridLimitFlags* f, const char* whose, const char* then) {
  c->add_option(
       "--max-ramp-mw-per-s", f->max_ramp_mw_per_s,
       Printf("%s power may ramp at most this fast (MW/s, between 0.1 s means); %s", whose, then))
      ->type_name("MW/S");
  c->add_option("--max-swing-mw", f->max_swing_mw,
                Printf("%s power may swing at most this much within 1 s (MW)", whose))
      ->type_name("MW");
  c->add_option("--min-power-fraction", f->min_power_fraction,
                Printf("%s power may fall to no less than this fraction of its peak", whose))
      ->type_name("F");
  c->add_option("--max-band-mw", f->max_band_mw,
                Printf("%s oscillation in the band may be at most this RMS (MW)", whose))
      ->type_name("MW");
}

sim::GridLimits GridLimitsOf(const GridLimitFlags& f) {
  for (const auto& [value, flag] : {std::pair{f.max_swing_mw, "--max-swing-mw"},
                                    std::pair{f.max_ramp_mw_per_s, "--max-ramp-mw-per-s"},
                                    std::pair{f.max_band_mw, "--max-band-mw"}}) {
    if (!(std::isfinite(value) && value >= 0 && value <= 1e6)) {
      throw model::InputError(
          flag, Printf("%s must be 0..1000000 (got %g); 0 for no limit", flag, value));
    }
  }
  if (!(std::isfinite(f.min_power_fraction) && f.min_power_fraction >= 0 &&
        f.min_power_fraction < 1)) {
    throw model::InputError("--min-power-fraction",
                            Printf("--min-power-fraction must be 0..1 (got %g): the trough the "
                                   "power may fall to, as a fraction of its peak (e.g. 0.5)",
                                   f.min_power_fraction));
  }
  sim::GridLimits l;
  l.max_swing_w = f.max_swing_mw * 1e6;
  l.max_ramp_w_per_s = f.max_ramp_mw_per_s * 1e6;
  l.max_band_rms_w = f.max_band_mw * 1e6;
  l.min_power_fraction = f.min_power_fraction;
  return l;
}

std::string GridLimitsText(const sim::GridLimits& l) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (l.max_ramp_w_per_s > 0) add(Printf("ramp <= %g MW/s", Mw(l.max_ramp_w_per_s)));
  if (l.max_swing_w > 0) add(Printf("swing <= %g MW", Mw(l.max_swing_w)));
  if (l.min_power_fraction > 0) add(Printf("trough >= %g %% of peak", 100 * l.min_power_fraction));
  if (l.max_band_rms_w > 0) add(Printf("band RMS <= %g MW", Mw(l.max_band_rms_w)));
  return s.empty() ? "none" : s;
}

double GridWaveformDtS(const GridFlags& f) {
  if (!f.grid && f.waveform_csv.empty() && !f.plans()) return 0;
  GridLimitsOf(f.limits);  // checked before any work
  if (!(std::isfinite(f.waveform_ms) && f.waveform_ms >= 0.1 && f.waveform_ms <= 10000)) {
    throw model::InputError("--waveform-ms",
                            Printf("--waveform-ms must be 0.1..10000 ms (got %g): the width of "
                                   "the waveform's bins; 10 gives the 10 ms the grid figures "
                                   "assume",
                                   f.waveform_ms));
  }
  const double nyquist = 0.5 / (f.waveform_ms * 1e-3);
  if (!(std::isfinite(f.band_lo_hz) && std::isfinite(f.band_hi_hz) && f.band_lo_hz >= 0 &&
        f.band_hi_hz > f.band_lo_hz && f.band_hi_hz <= nyquist)) {
    throw model::InputError("--band-hi-hz",
                            Printf("the band must be 0 <= --band-lo-hz < --band-hi-hz <= %g Hz "
                                   "(half the bin rate of --waveform-ms %g; got %g..%g Hz)",
                                   nyquist, f.waveform_ms, f.band_lo_hz, f.band_hi_hz));
  }
  return f.waveform_ms * 1e-3;
}

sim::GridOptions GridOptionsOf(const GridFlags& f, const sim::SimulateOutcome& outcome,
                               double host_power_w) {
  sim::GridOptions o;
  o.band_lo_hz = f.band_lo_hz;
  o.band_hi_hz = f.band_hi_hz;
  const sim::JobSpec& job = outcome.request.job;
  o.host_w = host_power_w * static_cast<double>(job.pipelines) * job.gpus_per_stage *
             outcome.request.spec.stages;
  return o;
}

sim::GridOptions WithStartAndStop(const sim::SimulateOutcome& outcome, sim::GridOptions o) {
  o.pad_s = kStartStopPadS;
  o.idle_w = outcome.request.job.p_block_w * static_cast<double>(outcome.gpus()) + o.host_w;
  return o;
}

std::string GridText(const sim::SimulateOutcome& outcome, const sim::GridOptions& o, double dt_s) {
  std::string s = Printf(
      "grid          the job's %s power in %g ms bins; swing within 1 s, ramp between "
      "0.1 s means, band %g-%g Hz\n",
      o.host_w > 0 ? "GPU + host" : "GPU", dt_s * 1e3, o.band_lo_hz, o.band_hi_hz);
  s += Printf("  %-10s %9s %9s %9s %11s %10s   %s\n", "policy", "peak", "trough", "swing", "ramp",
              "band RMS", "largest in band");
  const Unit u = UnitFor(sim::MeasureGrid(outcome.baseline.waveform, o).peak_w);
  const double k = u.scale;
  for (const sim::SimulationResult* run : {&outcome.baseline, &outcome.joulepipe}) {
    const sim::GridMetrics m = sim::MeasureGrid(run->waveform, o);
    s += Printf("  %-10s %6.3f %s %6.3f %s %6.3f %s %6.2f %s/s %7.3f %s   %.3f %s at %.3g Hz\n",
                sim::PolicyName(run->policy), m.peak_w / k, u.power, m.trough_w / k, u.power,
                m.swing_w / k, u.power, m.ramp_w_per_s / k, u.power, m.band_rms_w / k, u.power,
                m.band_peak_w / k, u.power, m.band_peak_hz);
  }
  const sim::GridOptions padded = WithStartAndStop(outcome, o);
  s += Printf(
      "  with the job's start and stop (idle before and after at %.3f %s: P_block on every "
      "GPU%s):\n",
      padded.idle_w / k, u.power, o.host_w > 0 ? ", and the host" : "");
  for (const sim::SimulationResult* run : {&outcome.baseline, &outcome.joulepipe}) {
    const sim::GridMetrics m = sim::MeasureGrid(run->waveform, padded);
    s += Printf("  %-10s swing %.3f %s within 1 s, ramp %.2f %s/s, start and stop included\n",
                sim::PolicyName(run->policy), m.swing_w / k, u.power, m.ramp_w_per_s / k, u.power);
  }
  return s;
}

nlohmann::ordered_json GridJson(const sim::SimulateOutcome& outcome, const sim::GridOptions& o,
                                double dt_s) {
  const sim::GridOptions padded = WithStartAndStop(outcome, o);
  return {{"bin_s", dt_s},
          {"band_hz", {o.band_lo_hz, o.band_hi_hz}},
          {"host_w", o.host_w},
          {"swing_window_s", o.swing_window_s},
          {"ramp_window_s", o.ramp_window_s},
          {"baseline", MetricsJson(sim::MeasureGrid(outcome.baseline.waveform, o))},
          {"joulepipe", MetricsJson(sim::MeasureGrid(outcome.joulepipe.waveform, o))},
          {"with_start_and_stop",
           {{"idle_w", padded.idle_w},
            {"pad_s", kStartStopPadS},
            {"baseline", MetricsJson(sim::MeasureGrid(outcome.baseline.waveform, padded))},
            {"joulepipe", MetricsJson(sim::MeasureGrid(outcome.joulepipe.waveform, padded))}}}};
}

std::string WaveformCsv(const sim::SimulateOutcome& outcome, const sim::GridOptions& o) {
  const sim::Waveform& a = outcome.baseline.waveform;
  const sim::Waveform& b = outcome.joulepipe.waveform;
  std::string s = o.host_w > 0 ? "time_s,baseline_node_w,joulepipe_node_w\n"
                               : "time_s,baseline_gpu_w,joulepipe_gpu_w\n";
  const std::size_t n = std::max(a.gpu_w.size(), b.gpu_w.size());
  // A run that ended earlier is over: its job draws nothing more.
  auto at = [&](const sim::Waveform& w, std::size_t i) {
    return i < w.gpu_w.size() ? w.gpu_w[i] + o.host_w : 0.0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    s += Printf("%.6f,%.3f,%.3f\n", static_cast<double>(i) * a.dt_s, at(a, i), at(b, i));
  }
  return s;
}

namespace {

constexpr int kGridPlanIterations = 4;

std::string PointRow(const char* label, const sim::ShapedPoint& p, double base_j, const Unit& u) {
  const double change = 100 * (p.energy_j / base_j - 1), k = u.scale;
  return Printf("  %-42s %8.3f s %8.3f %s %+6.1f%% %8.3f %s %7.3f %s %6.2f %s/s %5.0f%%%s\n", label,
                p.time_s, p.energy_j / k, u.energy, change, p.filler_j / k, u.energy,
                p.grid.swing_w / k, u.power, p.grid.ramp_w_per_s / k, u.power,
                100 * p.grid.trough_w / std::max(p.grid.peak_w, 1e-300),
                p.meets ? "" : "  (misses)");
}

nlohmann::ordered_json PointJson(const sim::ShapedPoint& p,
                                 const std::vector<sim::CandidatePlan>& candidates) {
  return {{"plan_time_s", candidates[static_cast<std::size_t>(p.candidate)].time_s},
          {"plan_energy_j", candidates[static_cast<std::size_t>(p.candidate)].energy_j},
          {"iteration_s", p.time_s},
          {"energy_j", p.energy_j},
          {"filler_j", p.filler_j},
          {"floor_w", p.floor_w},
          {"offset_s", p.offset_s},
          {"meets", p.meets},
          {"grid", MetricsJson(p.grid)}};
}

// The runtime's grid plan (--grid-plan-out), sim::PlanGridRuntime's, for
// people and as the plan file's contents.
void RuntimePlan(const sim::SimulateOutcome& o, const model::Profile& profile, const GridFlags& f,
                 const sim::GridPlanRequest& r, const sim::GridPlan& plan,
                 const std::vector<sim::CandidatePlan>& candidates, const Unit& u,
                 GridPlanOutput* out) {
  sim::GridRuntimePlanRequest request;
  request.grid = r;
  request.start_ramp_s = f.start_ramp_s;
  const std::optional<sim::GridRuntimePlan> runtime = sim::PlanGridRuntime(
      o.schedule, profile, o.request.job, o.frontier, candidates, plan, request);
  if (!runtime) {
    throw model::InputError(
        "--grid-plan-out",
        Printf("--grid-plan-out: no plan within the deadline (%.6g s) keeps %s without a floor; "
               "it takes a power floor (joulepipe's plan + %.3f %s), which only filler load or "
               "the GPU firmware's power floor burns, and joulepipe's runtime runs neither. "
               "Loosen the limit, or allow slower plans (--slowdown)",
               r.deadline_s, GridLimitsText(r.limits).c_str(), plan.chosen.floor_w / u.scale,
               u.power));
  }
  const sim::CandidatePlan& c = runtime->candidate;
  const sim::ShapedPoint& pick = runtime->point;
  const model::GridShape& shape = *runtime->file.grid;
  std::string ramp_text = "no start ramp";
  if (const std::optional<sim::StartRamp>& sr = runtime->start_ramp) {
    switch (runtime->ramp) {
      case sim::GridRuntimePlan::Ramp::kNotNeeded:
        ramp_text = Printf(
            "no start ramp needed: idle (%.3f %s) to computing (%.3f %s) is within the limit",
            sr->idle_w / u.scale, u.power, sr->power_w.back() / u.scale, u.power);
        break;
      case sim::GridRuntimePlan::Ramp::kCannotHelp:
        ramp_text = Printf(
            "no start ramp: idle (%.3f %s) to the profile's lowest clock (%.3f %s) is already "
            "beyond the limit, so caps cannot help (profile lower clocks)",
            sr->idle_w / u.scale, u.power, sr->lowest_w / u.scale, u.power);
        break;
      case sim::GridRuntimePlan::Ramp::kSteps:
        ramp_text = Printf(
            "start ramp %.3g s in %zu steps, %d..%d MHz: %.3f to %.3f %s, largest step %.3f %s "
            "(%.2f %s/s%s)",
            sr->seconds(), sr->mhz.size(), sr->mhz.front(), sr->mhz.back(), sr->idle_w / u.scale,
            sr->power_w.back() / u.scale, u.power, sr->largest_step_w / u.scale, u.power,
            sr->ramp_w_per_s / u.scale, u.power,
            runtime->ramp_meets ? ""
            : sr->first_is_largest
                ? ", misses the limit: the profile's lowest clock is its first step"
                : ", misses the limit: the profile's clocks are too far apart");
        break;
      case sim::GridRuntimePlan::Ramp::kNone:
        break;
    }
  }
  out->plan_file = model::PlanToJson(runtime->file);
  out->text += Printf(
      "  runtime plan %s: plan %.3f s%s, %+.1f%% energy, no floor; waits held at the "
      "stage's highest clock; %s\n",
      f.plan_out.c_str(), c.time_s,
      pick.offset_s > 0 ? Printf(" + offsets %.3g ms", pick.offset_s * 1e3).c_str() : "",
      100 * (pick.energy_j / plan.unshaped.front().energy_j - 1), ramp_text.c_str());
  out->text +=
      shape.stop_ramp_s > 0
          ? Printf(
                "  (the stop: the same caps descending over the job's last %.3g s, when the "
                "session knows the last iteration, last_iteration= or Megatron-LM's "
                "--train-iters; then its last step, the lowest cap to idle)\n",
                shape.stop_ramp_s)
          : std::string(
                "  (no stop ramp: the job's power falls to idle at once when training "
                "ends)\n");
  out->json["runtime_plan"] = {{"file", f.plan_out},
                               {"plan_time_s", c.time_s},
                               {"energy_j", pick.energy_j},
                               {"grid", MetricsJson(pick.grid)},
                               {"hold_mhz", shape.hold_mhz},
                               {"start_ramp_s", shape.start_ramp_s},
                               {"start_ramp_mhz", shape.start_ramp_mhz},
                               {"pipeline_offset_s", shape.pipeline_offset_s},
                               {"stop_ramp_s", shape.stop_ramp_s}};
}

}  // namespace

void AddGridPlanOutFlags(CLI::App* c, GridFlags* f) {
  c->add_option("--grid-plan-out", f->plan_out,
                "With a grid limit: write the plan the runtime runs for it (the least-energy "
                "clocks that keep the limit, waits held, a start ramp) as plan JSON")
      ->type_name("FILE");
  c->add_option("--start-ramp-s", f->start_ramp_s,
                "The --grid-plan-out plan's start ramp, seconds (0: none; default: sized for "
                "--max-ramp-mw-per-s, none without it)")
      ->type_name("S");
  c->add_flag("--force", f->force, "Replace an existing --grid-plan-out file");
}

void CheckGridPlanOut(const GridFlags& f) {
  if (f.start_ramp_s >= 0 && f.plan_out.empty()) {
    throw model::InputError("--start-ramp-s",
                            "--start-ramp-s shapes the --grid-plan-out plan; add --grid-plan-out "
                            "FILE");
  }
  if (!(f.start_ramp_s < 0 || f.start_ramp_s <= model::kMaxRampS)) {
    throw model::InputError("--start-ramp-s", "--start-ramp-s must be seconds in 0..3600");
  }
  if (f.plan_out.empty()) return;
  if (!f.limits.any()) {
    throw model::InputError(
        "--grid-plan-out",
        "--grid-plan-out writes the plan for a grid limit; add --max-ramp-mw-per-s, "
        "--max-swing-mw, --min-power-fraction or --max-band-mw");
  }
  RefuseToReplace("--grid-plan-out", f.plan_out, f.force);
}

GridPlanOutput GridPlanReport(const sim::SimulateOutcome& o, const model::Profile& profile,
                              const GridFlags& f, const sim::GridOptions& options, double dt_s) {
  sim::GridPlanRequest r;
  r.limits = GridLimitsOf(f.limits);
  r.options = options;
  r.iterations = kGridPlanIterations;
  r.waveform_dt_s = dt_s;
  // The plans the healthy job may run: as fast as the operating point.
  r.deadline_s = std::max(o.max_clock.time_s * (1 + o.request.slowdown), o.intrinsic.time_s);
  if (f.offsets)
    r.offsets_s = sim::SpreadingOffsets(o.request.job.pipelines, options.ramp_window_s);
  const std::vector<sim::CandidatePlan> candidates = sim::GridCandidates(o.frontier, r.deadline_s);
  const sim::GridPlan plan = sim::PlanForGrid(o.schedule, profile, o.request.job, candidates, 0, r);
  const sim::ShapedPoint& base = plan.unshaped.front();
  const sim::ShapedPoint& energy_plan = plan.unshaped.back();  // the least-energy plan
  GridPlanOutput out;
  out.text = Printf(
      "grid plan     the healthy job (%d iterations per plan, %zu plans within %.6g s); limits: "
      "%s\n",
      r.iterations, candidates.size(), r.deadline_s, GridLimitsText(r.limits).c_str());
  out.text += Printf("  %-42s %10s %11s %7s %11s %10s %11s %6s\n", "plan", "iteration", "energy",
                     "change", "for grid", "swing", "ramp", "trough");
  const Unit u = UnitFor(base.grid.peak_w);
  const double k = u.scale;
  out.text += PointRow("baseline, full clocks", base, base.energy_j, u);
  out.text += PointRow("joulepipe energy plan", energy_plan, base.energy_j, u);
  out.text += PointRow(
      Printf("firmware: baseline + floor %.3f %s", plan.firmware.floor_w / k, u.power).c_str(),
      plan.firmware, base.energy_j, u);
  const std::string offsets =
      plan.chosen.offset_s > 0 ? Printf(" + offsets %.3g ms", plan.chosen.offset_s * 1e3) : "";
  out.text += PointRow(Printf("joulepipe: plan %.3f s%s + floor %.3f %s",
                              candidates[static_cast<std::size_t>(plan.chosen.candidate)].time_s,
                              offsets.c_str(), plan.chosen.floor_w / k, u.power)
                           .c_str(),
                       plan.chosen, base.energy_j, u);
  if (f.offsets) {
    out.text += o.request.job.pipelines > 1
                    ? Printf(
                          "  (offsets tried: pipeline p starts p x %s ms late, within the "
                          "deadline)\n",
                          [&] {
                            std::string list;
                            for (double x : r.offsets_s)
                              list += (list.empty() ? "" : ", ") + Printf("%.3g", x * 1e3);
                            return list;
                          }()
                              .c_str())
                    : "  (offsets: one pipeline, nothing to offset)\n";
  }
  out.text +=
      "  (\"for grid\": energy burnt by the floor, filler load or the firmware's power "
      "floor, per iteration)\n";
  out.json["limits"] = {{"max_swing_w", r.limits.max_swing_w},
                        {"max_ramp_w_per_s", r.limits.max_ramp_w_per_s},
                        {"min_power_fraction", r.limits.min_power_fraction},
                        {"max_band_rms_w", r.limits.max_band_rms_w}};
  out.json["deadline_s"] = r.deadline_s;
  out.json["baseline"] = PointJson(base, candidates);
  out.json["energy_plan"] = PointJson(energy_plan, candidates);
  out.json["firmware"] = PointJson(plan.firmware, candidates);
  out.json["chosen"] = PointJson(plan.chosen, candidates);
  if (!f.plan_out.empty()) RuntimePlan(o, profile, f, r, plan, candidates, u, &out);
  if (f.frontier) {
    const double ramp = base.grid.ramp_w_per_s;
    std::vector<double> ramps;
    for (double share : {1.0, 0.5, 0.25, 0.1, 0.05, 0.02}) ramps.push_back(share * ramp);
    const std::vector<sim::GridFrontierRow> rows =
        sim::RampFrontier(o.schedule, profile, o.request.job, candidates, 0, r, ramps);
    out.text += Printf(
        "energy-smoothness frontier (ramp limits as shares of the baseline's %.2f %s/s; "
        "energy per iteration against the baseline's)\n",
        ramp / k, u.power);
    out.text += Printf("  %-12s %-30s %s\n", "ramp limit", "firmware floor on baseline",
                       "joulepipe plan + floor");
    nlohmann::ordered_json sweep = nlohmann::ordered_json::array();
    for (const sim::GridFrontierRow& row : rows) {
      out.text += Printf(
          "  %6.2f %s/s  %7.3f %s %+6.1f%% (floor %.3f %s)   %7.3f %s %+6.1f%% (plan %.3f s, "
          "floor %.3f %s)\n",
          row.max_ramp_w_per_s / k, u.power, row.firmware.energy_j / k, u.energy,
          100 * (row.firmware.energy_j / base.energy_j - 1), row.firmware.floor_w / k, u.power,
          row.chosen.energy_j / k, u.energy, 100 * (row.chosen.energy_j / base.energy_j - 1),
          candidates[static_cast<std::size_t>(row.chosen.candidate)].time_s, row.chosen.floor_w / k,
          u.power);
      sweep.push_back({{"max_ramp_w_per_s", row.max_ramp_w_per_s},
                       {"firmware", PointJson(row.firmware, candidates)},
                       {"chosen", PointJson(row.chosen, candidates)}});
    }
    out.json["ramp_frontier"] = sweep;
  }
  return out;
}

}  // namespace joulepipe::cli
