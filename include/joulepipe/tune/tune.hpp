// The task "tune a job": which pipeline configuration of the same training
// job, with which clocks, uses the least GPU energy at today's speed.
//
// Candidates keep the job's GPUs and global batch (so every candidate trains
// the same computation): every PP x TP x DP = GPUs with TP within a node,
// every microbatch size that divides the batch per pipeline, and the
// schedules GPipe, 1F1B and interleaved 1F1B with each V up to max_chunks
// (Megatron's rules: layers % (PP x V) == 0, microbatches % PP == 0).
// `keep` pins any of these to the current configuration's value.
//
// Per candidate, all simulated (physics/workload.hpp):
//   profile     the workload model's stage profile (interleaved: one row per
//               virtual stage, chunk x PP + stage), with each forward's and
//               backward's pipeline send added as clock-independent time at
//               P_block: mbs x seq x hidden elements / TP (Megatron scatters
//               the send over the TP ranks) at p2p_gbps (Megatron's default
//               rank order puts a pipeline's stages on different nodes
//               whenever TP x DP fills a node);
//   memory      physics::EstimateMemory at the schedule's peak; a candidate
//               that does not fit with memory_margin is never solved;
//   job figures T = pipeline time + the gradient all-reduce (not overlapped,
//               the slowest GPU's, DpAllReduceSeconds over its chunks), E =
//               DP x TP x (pipeline energy + PP x P_block x all-reduce), the
//               accounting of sim::SimulateJob on a noiseless job.
//
// Search: the current configuration is solved first (its zero-slowdown
// point is the clocks-only answer), then the others in ascending order of a
// lower bound on their job energy within the target time (src/tune/
// energy_bound.hpp: per stage, a fractional knapsack of its instructions'
// clock hulls in the time the pipeline's unavoidable waits leave it). A
// candidate whose bound is nowhere below the envelope found so far, over
// [its fastest time, the envelope's end], cannot put a point below the
// envelope, so it is skipped: the envelope is the same as solving every
// candidate. Frontiers are solved on a grid from the candidate's fastest time
// up to the envelope's end, (1 + envelope_span) x the target time, plus the
// target exactly.
//
// Every figure is simulated, never measured.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/memory.hpp"
#include "joulepipe/physics/workload.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::tune {

// One configuration of the job.
struct TuneConfig {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int microbatch_size = 1;
  schedule::Kind kind = schedule::Kind::k1F1B;
  int chunks = 1;  // V: interleaved only (>= 2), else 1

  friend bool operator==(const TuneConfig&, const TuneConfig&) = default;
};

// "TP 8 x PP 8 x DP 16, mbs 1, 1f1b" (", V 2" for interleaved).
std::string ConfigText(const TuneConfig& config);

// Which of the current configuration's values every candidate keeps.
struct TuneKeep {
  bool tp = false;
  bool pp = false;
  bool dp = false;
  bool microbatch_size = false;
  bool schedule = false;  // the kind and V
};

// Parses "tp,dp,..." (names tp, pp, dp, mbs or microbatch-size, schedule;
// empty = none). Throws model::InputError naming `field` and the bad name.
TuneKeep ParseTuneKeep(const std::string& text, const std::string& field = "TuneRequest::keep");

struct TuneRequest {
  // The model, sequence, framework, precision and recompute every candidate
  // shares; its parallel and microbatch_size fields are ignored (`current`
  // holds them).
  physics::WorkloadSpec workload;
  physics::GpuSpec gpu;
  std::int64_t gpus = 0;  // of the job: current.tp x pp x dp
  int global_batch = 0;   // sequences per iteration, all pipelines
  TuneConfig current;
  TuneKeep keep;
  int gpus_per_node = 8;         // TP stays within a node: tp <= this
  int max_chunks = 4;            // interleaved V considered: 2..max_chunks
  int max_microbatch_size = 16;  // candidates' microbatch sizes: 1..this
  double memory_margin = 0.10;   // of GPU memory, left for what the estimate omits, 0..0.9
  double slowdown = 0;           // target time = (1 + slowdown) x the current all-max time
  double envelope_span = 0.10;   // the envelope covers up to (1 + span) x the target time
  int grid_points = 60;          // frontier deadlines per candidate over the envelope's range
  int max_instructions = 4096;   // larger schedules are bounded, not solved
  double dp_gbps = physics::kDefaultInterNodeGbps;   // gradient all-reduce, per GPU
  double p2p_gbps = physics::kDefaultInterNodeGbps;  // pipeline sends, per GPU
  physics::MemoryOptions memory;
  // false: solve every candidate that fits and reaches the envelope's range,
  // bound or not (the same envelope, slower; for tests and benchmarks).
  bool prune = true;
  // Called from the calling thread: the candidate being solved (1-based of
  // `of`), its text, and after the solve its seconds (< 0 before it).
  std::function<void(int index, int of, const std::string& config, double seconds)> progress;
  // Once true, solving stops and Tune returns what it has (cancelled = true).
  const std::atomic<bool>* cancel = nullptr;
};

// The plausible ranges (docs/limits.md).
inline constexpr int kMaxTuneChunks = 16;
inline constexpr int kMaxTuneGridPoints = 10'000;
inline constexpr int kMaxTuneInstructions = 5'000'000;

// Checks every number and the current configuration (it must keep the GPUs
// and the global batch, and be a valid workload and schedule). Throws
// model::InputError naming the TuneRequest / TuneConfig field and the fix.
void CheckTuneRequest(const TuneRequest& request);

// The candidates the request allows, current first (an allowed value of
// every field the request keeps), each a valid workload and schedule.
std::vector<TuneConfig> TuneCandidates(const TuneRequest& request);

struct JobPoint {
  double time_s = 0;    // whole job, one iteration
  double energy_j = 0;  // every GPU, one iteration
};

struct Candidate {
  enum class Status {
    kSolved,      // frontier solved
    kDominated,   // its energy bound is above the envelope: cannot help
    kNoMemory,    // does not fit in GPU memory with the margin
    kTooSlow,     // even at full clocks slower than the envelope's end
    kTooLarge,    // more instructions than max_instructions: figures and bound only
    kNotReached,  // not solved: the search was cancelled first
  };
  TuneConfig config;
  int microbatches = 0;  // per pipeline and iteration
  int instructions = 0;
  Status status = Status::kNotReached;
  physics::MemoryEstimate memory;
  double allreduce_s = 0;  // per iteration, the slowest GPU's
  double p2p_s = 0;        // per pipeline send
  JobPoint max_clock;      // every instruction at its highest clock
  double fastest_s = 0;    // job time with every instruction at its quickest clock
  double bound_j = 0;      // lower bound on its job energy within the target time
                           // (+infinity when it cannot reach it)
  double solve_seconds = 0;
  // Solved only: the pipeline's frontier (GPU energy of one GPU per stage)
  // and the least-energy job point within the target time, if any.
  solver::Frontier frontier;
  std::optional<JobPoint> at_target;
  int at_target_point = -1;  // index into frontier.points
  // kTooLarge only: its bound is below the final envelope somewhere, so
  // solving it (a larger max_instructions) might improve the answer.
  bool might_improve = false;
};

std::string_view StatusName(Candidate::Status status);

struct EnvelopePoint {
  JobPoint job;
  int candidate = 0;  // index into TuneResult::candidates
  int point = 0;      // index into that candidate's frontier.points
};

struct TuneResult {
  TuneRequest request;
  std::vector<Candidate> candidates;  // [0] is the current configuration
  double p_block_w = 0;
  double target_s = 0;  // (1 + slowdown) x the current all-max job time
  double envelope_end_s = 0;
  // Ascending time, strictly descending energy: the lower envelope over every
  // solved candidate within [fastest, envelope_end_s].
  std::vector<EnvelopePoint> envelope;
  // The least-energy envelope point within target_s (always exists: the
  // current configuration's full-clock plan is one), and the current
  // configuration's own (clocks only).
  EnvelopePoint best;
  EnvelopePoint clocks_only;
  int solved = 0;
  int too_large_might_improve = 0;  // kTooLarge candidates with might_improve
  // The most their bounds allow them below the answer at the target, in %
  // of the current full-clock energy (0 when none could beat it there).
  double too_large_gain_bound_pct = 0;
  bool cancelled = false;
  double seconds = 0;

  const Candidate& current() const { return candidates[0]; }
  const Candidate& chosen() const { return candidates[best.candidate]; }
  // Savings against the current configuration at full clocks, in % of its
  // energy: total = clocks + configuration.
  double SavingPct(const JobPoint& p) const;
};

// The job-level point of a pipeline frontier point of `candidate`.
JobPoint ToJobPoint(const Candidate& candidate, const solver::FrontierPoint& point,
                    double p_block_w);

// The candidate's simulated stage profile with its pipeline sends (see the
// header comment), and its schedule. Throws model::InputError on a bad
// config.
model::Profile CandidateProfile(const TuneRequest& request, const TuneConfig& config);
schedule::Spec CandidateSpec(const TuneRequest& request, const TuneConfig& config);

// Checks the request, enumerates, bounds, solves. Throws model::InputError
// on bad input; a cancel returns what is done (cancelled = true) once the
// current configuration is solved, and throws model::Cancelled before.
TuneResult Tune(const TuneRequest& request);

}  // namespace joulepipe::tune
