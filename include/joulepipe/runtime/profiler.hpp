// In-situ profiler: measures one pipeline stage's instructions at a sweep of
// SM clocks during the first iterations of the real job, and turns the
// measurements into the profile `joulepipe plan` reads (docs/profiling.md).
//
//   auto profiler = std::make_shared<runtime::InSituProfiler>(options);
//   agent.SetProfiler(profiler);           // the agent drives it (agent.hpp)
//   ... train until profiler->done() ...
//   runtime::ProfileReport report = profiler->Report();
//   // rank 0: MergeReports(all ranks' reports) -> WriteProfileCsv / ToProfile
//   // (the profile carries P_block and the GPU: `plan` needs no flag for them)
//
// Sweep (one clock per kind per iteration, so clocks change only at the
// first instruction of each kind in an iteration):
//   * warm-up: the first `warmup_iterations` run at the highest clock and are
//     discarded;
//   * then the clocks of `clocks` are visited from the highest down; a clock
//     of a kind is finished once `samples_per_clock` samples of that kind
//     were kept (the first sample of each kind after its clock changed is
//     dropped: on real GPUs the clock switch may land inside it);
//   * early stop per kind: once the kind's robust energy has been above its
//     lowest so far for `stop_after_rises` consecutive clocks, lower clocks
//     cannot be on the time-energy Pareto frontier (they are slower and cost
//     more), so the kind stops and from then on runs at the highest clock;
//   * re-measure: once both kinds stopped or ran out of clocks, the rows the
//     planner's plausibility check would leave out (model::ImplausibleRows:
//     a noisy sample, a clock switch that landed in the samples) are
//     measured again, one clock per kind per iteration, each over
//     `remeasure_iterations` iterations (more samples), replacing the old
//     row; said in the report's notes. Once only: what is still implausible
//     afterwards the planner leaves out, said (coord::PlannableProfile);
//   * done() once both kinds stopped or ran out of clocks and the
//     re-measure (if any) is over.
//
// Noise: each row's time and energy are the trimmed mean of its samples
// (the `trim` share dropped at each end: the interquartile mean by
// default); its spread is the relative median absolute deviation (MAD /
// median, scaled by 1.4826 to a standard deviation), and its 95 %
// confidence half-width 1.96 * spread / sqrt(n). A clock whose confidence
// is worse than `repeat_above` is repeated (more samples) up to
// `max_repeats` more iterations.
//
// P_block: the waits the agent reports (gaps between instructions) of at
// least `min_wait_s` give one power each (J / s); P_block is their median.
//
// Threads: the ClockSource calls come from the rank's training thread (the
// agent's hooks); they never throw; OnInstruction and OnWait never
// allocate (OnStepEnd may, once per iteration). done() may be read from any
// thread. Report() must not run concurrently with the hooks (call it between
// iterations or after the agent left profile mode).
#pragma once

#include <array>
#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/runtime/clock_source.hpp"

namespace joulepipe::runtime {

struct ProfilerOptions {
  int stage = 0;  // the pipeline stage this rank runs (the profile's stage id)
  // Clocks to sweep, highest first (e.g. CandidateClocks below). Must not be
  // empty; the first is the "max clock" used for warm-up and stopped kinds.
  std::vector<int> clocks;
  // Samples kept per (kind, clock); 0 = one iteration's worth (every
  // instruction of that kind in one iteration, less the dropped first one).
  int samples_per_clock = 0;
  int warmup_iterations = 1;  // at clocks[0], discarded
  int stop_after_rises = 3;   // early stop per kind (see top); 0 = never
  double trim = 0.25;         // share trimmed at each end for the mean, [0, 0.5)
  // Repeats: a clock whose energy confidence (relative 95 % half-width) is
  // above repeat_above stays for another iteration, collecting more samples,
  // at most max_repeats times (a noisy iteration does not decide a row).
  double repeat_above = 0.02;
  int max_repeats = 2;
  // Re-measure implausible rows (see top) with this many iterations' worth
  // of samples each; 0 = never re-measure.
  int remeasure_iterations = 3;
  double min_wait_s = 1e-3;  // shorter waits do not count toward P_block
  bool drop_first_after_change = true;
  // The GPU's name as NVML gives it (gpu::Device::name()), recorded in the
  // profile's metadata; empty = not known (the profile then names none).
  std::string gpu;
};

// Candidate clocks: those of `supported` (any order) in
// [max(floor_fraction * max, floor_mhz), max], taking every
// `stride_mhz / step`-th one from the max down, highest first. With the
// defaults: every supported clock from the max down to 0.6 x max.
std::vector<int> CandidateClocks(const std::vector<int>& supported, double floor_fraction = 0.6,
                                 int stride_mhz = 0, int floor_mhz = 0);

// One profiled (stage, kind, clock).
struct ProfileRow {
  int stage = 0;
  model::Kind kind = model::Kind::kForward;
  // The clock the row stands for: the one the GPU ran (the median of the
  // clocks it reported at each sample's end) when known, else the one
  // requested. A GPU that throttles below what it is asked (its power or
  // thermal cap) runs no plan's request above that clock, so requests that
  // ran at one clock are one row (InSituProfiler::Report).
  int mhz = 0;
  std::vector<int> requested_mhz;  // the clocks requested for it, highest first
  double time_s = 0;               // trimmed mean per instruction
  double energy_j = 0;             // trimmed mean per instruction (GPU only)
  int samples = 0;                 // samples kept
  double time_spread = 0;          // relative robust standard deviation (1.4826 MAD / median)
  double energy_spread = 0;        // same for energy
  double confidence = 0;           // 95 % half-width of the energy mean, relative
  bool approximate = false;        // some energy samples were instant power x time
};

struct ProfileReport {
  std::vector<ProfileRow> rows;  // by stage, kind, clock descending
  // Per (stage, kind) whose requests ran at other clocks: what was asked,
  // what ran, and the rows that became one, in words.
  std::vector<std::string> notes;
  double p_block_w = 0;     // median wait power; 0 when no wait qualified
  int p_block_samples = 0;  // waits behind p_block_w
  int iterations = 0;       // iterations seen (max over merged ranks)
  // Worst row confidence (relative 95 % half-width of energy) and worst
  // relative time spread: the profile's overall confidence.
  double max_confidence = 0;
  double max_time_spread = 0;
  int approximate_rows = 0;
  std::string gpu;  // ProfilerOptions::gpu; merged: the ranks' distinct names, ", "-joined
};

class InSituProfiler : public ClockSource {
 public:
  // Throws model::InputError on invalid options (empty clocks, clocks not
  // descending, trim out of range, negative counts).
  explicit InSituProfiler(ProfilerOptions options);

  // ClockSource (agent hooks; never throw).
  int ClockFor(model::Kind kind) override;
  void OnInstruction(model::Kind kind, int mhz, double seconds, double joules, bool approximate,
                     int actual_mhz = 0) override;
  void OnWait(double seconds, double joules) override;
  void OnStepEnd() override;

  // Both kinds finished sweeping.
  bool done() const { return done_.load(std::memory_order_acquire); }
  int iterations() const { return iterations_; }
  // The fewest iterations the sweep still needs from here: the warm-up
  // left, then one per clock each kind has yet to visit and its queued
  // re-measures (the kinds advance together, so the larger); 0 once done.
  // A noisy clock is repeated (up to max_repeats more each) and an early
  // stop ends a kind sooner: the real count may differ either way. Training
  // thread (reads the sweep's state).
  int IterationsLeft() const;

  // The rows measured so far (finished clocks only) and P_block. Rows
  // whose requests ran at another clock are named by the clock that ran,
  // and requests that ran at one clock are merged into one row
  // (sample-weighted, as MergeReports), each case said in `notes`.
  ProfileReport Report() const;

 private:
  struct KindState {
    size_t clock_index = 0;       // into options_.clocks
    bool finished = false;        // stopped early or ran out of clocks
    bool seen_this_step = false;  // a sample of this kind arrived this iteration
    int dropped = 0;              // samples dropped at this clock
    int repeats = 0;              // extra iterations spent at this clock
    int rises = 0;                // consecutive clocks above the lowest energy
    double lowest_energy_j = 0;   // lowest robust energy so far (0: none yet)
    int lowest_mhz = 0;           // the clock that row ran at
    bool approximate = false;     // at the current clock
    std::vector<double> times, energies;
    std::vector<int> actual_mhz;  // the clock the GPU reported, per sample (when known)
    std::vector<size_t> redo;     // clocks to re-measure after clock_index, in order
    bool remeasuring = false;     // clock_index is a re-measure
  };

  void FinishClock(model::Kind kind, KindState& k);
  static void ClearSamples(KindState& k);  // for the next clock
  // Queues the implausible rows' requested clocks for a re-measure (once);
  // false when there is none.
  bool QueueRemeasures();

  ProfilerOptions options_;
  std::array<KindState, 2> kinds_;
  std::vector<double> scratch_;  // deviations for the spread
  std::vector<ProfileRow> rows_;
  bool remeasure_queued_ = false;   // QueueRemeasures ran
  std::vector<std::string> notes_;  // rows re-measured, in words
  static constexpr size_t kWaitCapacity = 4096;
  std::vector<double> wait_powers_;  // J/s of qualifying waits, a ring of the latest
  size_t waits_seen_ = 0;
  int iterations_ = 0;
  std::atomic<bool> done_{false};
};

// The iterations a whole sweep with `options` takes: `least` when no clock
// is repeated, stopped early or re-measured (warm-up + one per clock);
// `most` when every clock is repeated max_repeats times (re-measures and
// early stops aside). What a job should run at least, and at most expect.
struct SweepLength {
  int least = 0;
  int most = 0;
};
SweepLength SweepIterations(const ProfilerOptions& options);

// Combines the reports of several ranks (one stage each; a stage reported
// twice, e.g. by data-parallel replicas, is averaged per (kind, clock) over
// the replicas that have it, weighting by samples). P_block is the median
// of the ranks' values (ranks without waits are skipped).
ProfileReport MergeReports(const std::vector<ProfileReport>& reports);

// P_block for planning when no wait of the job was long enough to measure
// it (a pipeline of one stage has no bubbles): the GPU catalogue's figure
// for `gpu_name` (physics/gpu_model.hpp), with the note that says so.
// nullopt when `merged` measured it, or the catalogue lacks the GPU (the
// planner then says what is missing).
struct PBlockFallback {
  double watts = 0;
  std::string note;
};
std::optional<PBlockFallback> UnmeasuredPBlock(const ProfileReport& merged,
                                               std::string_view gpu_name);

// The planner's view: time and energy per (stage, kind, clock), with each
// row's samples, spreads, confidence and approximate flag as ClockPoint
// statistics, and the metadata: source "measured", the GPU's name (when
// known), P_block (when some wait qualified and the value is a plausible
// power, 0..5000 W: a broken reading must not cost the rows), the date (UTC
// now) and the joulepipe version. Throws model::InputError as
// model::Profile::Add does.
model::Profile ToProfile(const ProfileReport& report);

// model::ProfileToCsv(ToProfile(report)): the profile CSV (docs/formats.md)
// with the metadata lines, the columns stage,instruction,frequency,time,
// energy (what Perseus/Zeus readers need) then samples,time_spread,
// energy_spread,confidence,approximate.
std::string ProfileCsv(const ProfileReport& report);

// model::WriteProfileCsv(path, ToProfile(report)): written atomically.
// Throws model::InputError naming the path on failure.
void WriteProfileCsv(const std::string& path, const ProfileReport& report);

}  // namespace joulepipe::runtime
