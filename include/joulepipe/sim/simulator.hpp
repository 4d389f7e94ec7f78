// Discrete-event simulation of data-parallel pipeline training: D pipelines,
// each running one schedule (S stages x M microbatches) under a frequency
// plan, then a gradient all-reduce that every GPU waits for. Reports, per
// iteration, the time and the GPU energy of every GPU and of the whole job.
//
// What one iteration is:
//   * every pipeline starts at 0 (or later by a data-loader stall);
//   * an instruction starts when its stage's previous instruction and its
//     data dependency on another stage have ended (plus the P2P latency on an
//     edge between different physical stages); it takes
//         d = t(f) * speed factor of its GPU * straggler slowdown of its pipeline
//     where t(f) is the profiled time at its planned clock f;
//   * the iteration ends when the slowest pipeline's last instruction ends,
//     plus the all-reduce time. The next iteration starts there.
//
// Energy accounting (model/energy.hpp), for one GPU in an iteration of length T:
//     E = sum_i [ e_i(f_i) + P_block * (d_i - t_i(f_i)) ] + P_block * (T - sum_i d_i)
//       = sum_i e_i(f_i) + P_block * (T - sum_i t_i(f_i)).
// A slowed instruction (straggler, slow GPU) does the same work; its extra
// time d - t is charged as stalled at P_block, which is Perseus's accounting
// of a straggler (its extra time is blocking). A faster GPU (speed factor
// < 1) gets that time back at P_block (JobSpec::waits: a calibrated wait
// model lowers some waits). Waiting for dependencies, data-loader
// stalls and the all-reduce are charged at P_block. Busy energy is the first
// sum (the instruction part), blocking energy the rest. Every GPU of a
// stage's tensor-parallel group (gpus_per_stage of them) runs the same work,
// so job totals count each stage gpus_per_stage times. GPU energy only,
// simulated from the profile.
//
// With one pipeline and no faults, latency or all-reduce, an iteration's
// time and energy equal schedule::Replay of the same plan (up to round-off).
//
// Policies:
//   kBaseline   every pipeline runs the baseline candidate (all max clocks).
//   kJoulepipe  straggler response (extrinsic bloat). In iteration i the
//               policy knows each pipeline's straggler slowdown s_p as of
//               iteration i - detection_lag (1 before the job started), or
//               as coord::StragglerDetector measured it (Detection).
//               Noiseless pipelines (no clock variability, no P2P latency):
//               T' = max_p s_p * time(intrinsic); a pipeline with the
//               largest s_p runs the intrinsic (zero-slowdown) candidate,
//               every other one the least-energy candidate whose predicted
//               time * s_p <= T'. This is Perseus's rule, and the
//               coordinator's: coord::CandidateIndex::Choose.
//               With clock variability or P2P latency (persistent, so a real
//               system measures them), predicted times are not what a
//               pipeline takes: a slowed plan has less slack, so a slow GPU
//               stretches it more than the max-clock plan. The policy then
//               measures (a noiseless walk on p's own GPUs, slowed by s_p):
//               T' = max_p measured time of the baseline candidate on p, and
//               every pipeline, the slowest included, runs the least-energy
//               Pareto candidate whose measured time on p is <= T' (binary
//               search along the Pareto chain). Either way, without stalls,
//               no pipeline takes longer than the baseline's iteration once
//               the slowdowns are known. Data-loader stalls are random and
//               not foreseen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "joulepipe/coord/plan_choice.hpp"
#include "joulepipe/coord/straggler.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/timeline.hpp"
#include "joulepipe/sim/waveform.hpp"

namespace joulepipe::sim {

// One frequency plan the policies may deploy, e.g. a frontier point.
struct CandidatePlan {
  std::vector<std::uint16_t> mhz;  // SM clock per schedule node id; each profiled
  double time_s = 0;               // predicted iteration time of one noiseless pipeline, > 0
  double energy_j = 0;             // predicted energy of it (one GPU per stage); informational
};

// A straggler pipeline: its instructions take `slowdown` times as long while
// it is active. Active in iteration i when i >= from_iteration and
//   for_iterations == 0:  always from then on;
//   period == 0:          i < from_iteration + for_iterations (one episode);
//   period > 0:           (i - from_iteration) % period < for_iterations.
struct Straggler {
  int pipeline = -1;       // -1: none; else 0..pipelines-1
  double slowdown = 1;     // T'/T, finite, >= 1
  int from_iteration = 0;  // >= 0
  int for_iterations = 0;  // >= 0; 0 = until the end
  int period = 0;          // >= 0; if > 0, >= for_iterations >= 1

  bool ActiveAt(int iteration) const;
  // The slowdown of `pipeline` in `iteration`: `slowdown` or 1.
  double SlowdownOf(int pipeline, int iteration) const;
};

struct JobSpec {
  int pipelines = 1;         // D, data-parallel pipelines, >= 1
  int gpus_per_stage = 1;    // tensor-parallel degree: GPUs per stage, >= 1
  double p_block_w = 0;      // GPU power while blocked or idle (W), finite, >= 0
  double p2p_latency_s = 0;  // added to each dependency between physical stages, >= 0
  double allreduce_s = 0;    // gradient all-reduce after the slowest pipeline, >= 0
  int iterations = 1;        // >= 1
  Straggler straggler;
  // Per-GPU speed: each GPU's instruction times are multiplied by a factor
  // drawn once per job, 1 + clock_variability * z, z standard normal
  // truncated to |z| <= 3. In [0, 0.2].
  double clock_variability = 0;
  // Data-loader stalls: in each iteration each pipeline independently, with
  // this probability, starts stall_s late (waiting at P_block).
  double stall_probability = 0;  // [0, 1]
  double stall_s = 0;            // finite, >= 0
  std::uint64_t seed = 1;        // variability and stalls are a function of the seed only
  // A checkpoint save every `checkpoint_every` iterations (0: none): after
  // that iteration's all-reduce the whole job pauses checkpoint_s, every GPU
  // waiting at P_block (the save is the hosts' and the storage's work): the
  // longest trough the grid sees. Part of that iteration's time and energy,
  // for both policies alike.
  int checkpoint_every = 0;  // >= 0
  double checkpoint_s = 0;   // finite, >= 0
  // Offsets between the pipelines' schedules (a grid lever, none by
  // default): pipeline p starts each iteration p x pipeline_offset_s late,
  // waiting at P_block, so the pipelines finish (and drop to the
  // all-reduce) one after another instead of at once. Training is
  // unchanged (the all-reduce still waits for every pipeline); the
  // iteration takes up to (pipelines - 1) x the offset longer.
  double pipeline_offset_s = 0;  // finite, >= 0
  // Clocks while waiting (model/wait_model.hpp; its p_block_w is ignored:
  // p_block_w above is P_block). Uncalibrated (the default): every wait at
  // P_block, exactly as without it. Calibrated: the wait after each
  // instruction (to its stage's next instruction, or to the end of the
  // pipelines' compute) is lowered as the runtime lowers it: the plan marks
  // the waits of its own noiseless walk that are long enough (LoweredS of
  // the planned gap p) and restores after p - L - margin; a wait that turns
  // out shorter (g < p) is lowered for max(0, g - L - margin) only, a longer
  // one (a straggler elsewhere) for the planned time only. The wait before a
  // stage's first instruction (the pipeline fill) is lowered the same way
  // from the step's beginning (Plan::head_waits; a data-loader stall, which
  // nobody foresees, lengthens it but is not lowered beyond the plan). The
  // all-reduce stays at P_block. Only the kJoulepipe policy lowers waits
  // (kBaseline is the job without joulepipe).
  model::WaitModel waits;
};

enum class Policy { kBaseline, kJoulepipe };
const char* PolicyName(Policy policy);  // "baseline" | "joulepipe"

// How kJoulepipe learns of a straggler.
//   kOracle    it knows each pipeline's slowdown detection_lag iterations
//              late (the experiment's knob: what a perfect detector gives).
//   kMeasured  coord::StragglerDetector sees each iteration's simulated
//              per-pipeline compute times against the plans' predicted
//              times, exactly as the coordinator sees ranks' reports, and
//              the plans are chosen again whenever its verdict changes.
//              Noiseless, with window w, this equals kOracle with lag w.
enum class Detection { kOracle, kMeasured };
const char* DetectionName(Detection detection);  // "oracle" | "measured"

struct RunOptions {
  Detection detection = Detection::kOracle;
  int detection_lag = 0;                // kOracle: iterations until a slowdown is known, >= 0
  protocol::StragglerOptions detector;  // kMeasured
  int timeline_iterations = 0;          // record the timeline of the first N iterations
  std::size_t max_timeline_events = 1'000'000;  // stop recording beyond this
  // > 0: the whole job's GPU power over time in bins of this many seconds
  // (SimulationResult::waveform, waveform.hpp), 1e-4..10; 0: none.
  double waveform_dt_s = 0;
};

// The most bins a waveform may have (5e7 doubles, 400 MB).
inline constexpr double kMaxWaveformBins = 5e7;

struct IterationResult {
  double time_s = 0;             // iteration start to the end of the all-reduce
  double compute_s = 0;          // the slowest pipeline's finish (stall included)
  double energy_j = 0;           // whole job, every GPU (x gpus_per_stage)
  double busy_energy_j = 0;      // whole job: instruction energies
  double blocking_energy_j = 0;  // whole job: time not computing (P_block, less lowered waits)
  double lowered_wait_s = 0;     // whole job, GPU-seconds spent at the wait clock (x TP)
  double target_s = 0;           // kJoulepipe: T' planned for; kBaseline: baseline time
  bool straggler_active = false;
};

struct SimulationResult {
  Policy policy = Policy::kBaseline;
  int pipelines = 0, stages = 0, gpus_per_stage = 1;
  std::vector<IterationResult> iterations;
  // [(iteration * pipelines + pipeline) * stages + stage]: energy of ONE GPU
  // of that stage (its TP group uses gpus_per_stage times this).
  std::vector<double> gpu_energy_j;
  // [iteration * pipelines + pipeline]: the candidate it ran, and when its
  // last instruction ended (from the iteration's start).
  std::vector<int> plan;
  std::vector<double> finish_s;
  std::vector<TimelineEvent> timeline;  // first RunOptions::timeline_iterations
  bool timeline_truncated = false;      // max_timeline_events was reached
  // RunOptions::waveform_dt_s > 0: every GPU's power over the whole run
  // (its integral is TotalEnergy()).
  Waveform waveform;

  double GpuEnergy(int iteration, int pipeline, int stage) const {
    return gpu_energy_j[(static_cast<std::size_t>(iteration) * pipelines + pipeline) * stages +
                        stage];
  }
  double TotalTime() const;    // sum of iteration times
  double TotalEnergy() const;  // sum of iteration energies
  double MeanTime() const { return TotalTime() / static_cast<double>(iterations.size()); }
  double MeanEnergy() const { return TotalEnergy() / static_cast<double>(iterations.size()); }
};

class Simulator {
 public:
  // Checks everything and resolves clocks; throws model::InputError naming
  // the field (e.g. "pipelines", "straggler.slowdown", "candidate 3") and the
  // fix. `baseline` and `intrinsic` index `candidates`. `schedule` and
  // `profile` are referenced, not copied: they must outlive the Simulator.
  Simulator(const schedule::Schedule& schedule, const model::Profile& profile, const JobSpec& job,
            std::vector<CandidatePlan> candidates, int baseline, int intrinsic);

  // Simulates job.iterations iterations. Deterministic: the same inputs give
  // bit-identical results, and both policies see the same variability and
  // stalls. Throws model::InputError on bad options.
  SimulationResult Run(Policy policy, const RunOptions& options = {}) const;

  // The candidate each pipeline runs in `iteration` (kJoulepipe with
  // `detection_lag`), and the target T' it was chosen for.
  std::vector<int> Choose(Policy policy, int iteration, int detection_lag,
                          double* target_s = nullptr) const;

  // Time multiplier of GPU (pipeline, stage), drawn from the seed.
  double SpeedFactor(int pipeline, int stage) const {
    return speed_[static_cast<std::size_t>(pipeline) * stages_ + stage];
  }
  const std::vector<CandidatePlan>& candidates() const { return candidates_; }
  const schedule::Schedule& schedule() const { return schedule_; }
  const JobSpec& job() const { return job_; }

 private:
  struct Tables;  // per-candidate flat arrays (simulator.cpp)
  struct Cache;   // what a Run has computed: tables, measured times, choices
  Tables BuildTables(int candidate) const;
  double LoweredS(double planned_s, double gap_s) const;
  const Tables& TablesOf(int candidate, Cache* cache) const;
  std::vector<int> Choose(Policy policy, int iteration, int detection_lag, double* target_s,
                          Cache* cache) const;
  // kJoulepipe's plans for known slowdowns (one per pipeline, >= 1).
  std::vector<int> ChooseFor(const std::vector<double>& slow, double* target_s, Cache* cache) const;
  // Noisy jobs: the time of `candidate` on `pipeline`'s own GPUs, slowed by
  // `slowdown` (no stall); and the least-energy candidate on the Pareto
  // chain whose measured time is <= limit_s (binary search).
  double Measure(int pipeline, int candidate, double slowdown, Cache* cache) const;
  int MeasuredBestWithin(int pipeline, double slowdown, double limit_s, Cache* cache) const;
  // One pipeline's iteration under plan `t`: `factor` per stage multiplies
  // durations, the first instructions wait `stall`; fills start/finish by
  // topological position and returns the last finish.
  double Walk(const Tables& t, const double* factor, double stall, double* start,
              double* finish) const;

  const schedule::Schedule& schedule_;
  const model::Profile& profile_;
  JobSpec job_;
  std::vector<CandidatePlan> candidates_;
  int baseline_ = 0, intrinsic_ = 0, stages_ = 0;

  // The candidates' least-energy-within lookup and Pareto chain (time up,
  // energy strictly down): the coordinator's rule.
  std::optional<coord::CandidateIndex> index_;
  bool measure_ = false;  // clock variability or P2P latency: measure plans on each pipeline

  // The DAG in topological order: position -> node and stage; predecessor
  // positions (CSR) with the latency of each edge (p2p_latency_s between
  // physical stages, else 0).
  std::vector<int> node_at_, stage_at_, position_of_;  // position_of_: node -> position
  std::vector<int> pred_begin_, pred_;
  std::vector<double> pred_latency_;
  std::vector<double> speed_;  // [pipeline * stages + stage]

  // Dense clock lookup: the profile row (stage, kind) of each position and,
  // per row, the profiled point of each MHz from that row's lowest clock.
  std::vector<int> row_at_;
  std::vector<int> row_min_mhz_;
  std::vector<std::vector<const model::ClockPoint*>> row_points_;
  const model::ClockPoint* PointAt(int position, int mhz) const;
};

}  // namespace joulepipe::sim
