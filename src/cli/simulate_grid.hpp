// `simulate --grid`: what the grid sees of the simulated job, both policies
// (sim/waveform.hpp): text rows, a JSON object and the waveform as CSV.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/sim/grid_plan.hpp"
#include "joulepipe/sim/simulate_job.hpp"
#include "joulepipe/sim/waveform.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// A utility's limits as `simulate` and `site` take them (MW, MW/s; 0: no
// limit).
struct GridLimitFlags {
  double max_swing_mw = 0, max_ramp_mw_per_s = 0, max_band_mw = 0;
  double min_power_fraction = 0;
  bool any() const {
    return max_swing_mw > 0 || max_ramp_mw_per_s > 0 || max_band_mw > 0 || min_power_fraction > 0;
  }
};

// Adds --max-ramp-mw-per-s, --max-swing-mw, --min-power-fraction and
// --max-band-mw; `whose` ("the job's", "the site's") and `then` (what the
// command does with them) make their help.
void AddGridLimitFlags(CLI::App* command, GridLimitFlags* flags, const char* whose,
                       const char* then);
// The limits in W, checked: model::InputError naming the flag.
sim::GridLimits GridLimitsOf(const GridLimitFlags& flags);
// "ramp <= 5 MW/s, trough >= 50 % of peak", or "none".
std::string GridLimitsText(const sim::GridLimits& limits);

struct GridFlags {
  bool grid = false;
  double waveform_ms = 10;  // bin width
  double band_lo_hz = 0.1, band_hi_hz = 20;
  std::string waveform_csv;  // FILE: time_s,baseline_w,joulepipe_w
  GridLimitFlags limits;     // for a grid plan
  bool frontier = false;     // --grid-frontier: the energy-smoothness frontier over ramp limits
  bool offsets = false;      // --grid-offsets: also offsets between the pipelines' starts
  // --grid-plan-out FILE: the plan the runtime runs for the limits (clocks
  // alone, waits held, a start ramp); --start-ramp-s: its length (< 0:
  // sized for --max-ramp-mw-per-s, none without it; 0: none); --force:
  // replace an existing FILE.
  std::string plan_out;
  double start_ramp_s = -1;
  bool force = false;
  bool plans() const { return limits.any() || frontier; }
};

// Adds --grid-plan-out, --start-ramp-s and --force.
void AddGridPlanOutFlags(CLI::App* command, GridFlags* flags);
// Before any work: --grid-plan-out needs a limit and must not replace a
// file without --force; --start-ramp-s is 0..3600. model::InputError
// naming the flag.
void CheckGridPlanOut(const GridFlags& flags);

// The grid plan and, with --grid-frontier, the sweep: text and JSON.
struct GridPlanOutput {
  std::string text;
  nlohmann::ordered_json json;
  // With --grid-plan-out: the plan file's contents (model::PlanToJson).
  std::string plan_file;
};
GridPlanOutput GridPlanReport(const sim::SimulateOutcome& outcome, const model::Profile& profile,
                              const GridFlags& flags, const sim::GridOptions& options, double dt_s);

// Whether the run needs a waveform, and the bin width (s) it needs;
// throws model::InputError naming --waveform-ms or --band-*-hz.
double GridWaveformDtS(const GridFlags& flags);

// The options MeasureGrid is given: the band, and the job's host power
// (host_power_w per GPU x its GPUs) so the figures are the node's.
sim::GridOptions GridOptionsOf(const GridFlags& flags, const sim::SimulateOutcome& outcome,
                               double host_power_w);

// For the report (SimulationJson adds it when the runs have waveforms):
// both policies' GPU power from the job's start over its first iteration
// and a quarter more, a lead of 1 s at the job's idle power (P_block on
// every GPU) before it, their amplitude spectra from 0.02 to 20 Hz (at
// most 400 points, each the largest of the bins it stands for) and their
// grid figures.
nlohmann::ordered_json WaveformExcerptJson(const sim::SimulateOutcome& outcome);

// `o` with the job's start and stop: 2 s before and after it at its idle
// power (P_block on every GPU, and the host's power).
sim::GridOptions WithStartAndStop(const sim::SimulateOutcome& outcome, sim::GridOptions o);

// "grid ..." rows for FormatSimulationSummary's output.
std::string GridText(const sim::SimulateOutcome& outcome, const sim::GridOptions& options,
                     double dt_s);
nlohmann::ordered_json GridJson(const sim::SimulateOutcome& outcome,
                                const sim::GridOptions& options, double dt_s);
// time_s (the bin's start), baseline_w, joulepipe_w; node power when the
// options count the host.
std::string WaveformCsv(const sim::SimulateOutcome& outcome, const sim::GridOptions& options);

}  // namespace joulepipe::cli
