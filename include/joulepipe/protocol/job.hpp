// The job side of the coordination protocol, each message defined once: what
// a job registers (JobConfig, with its straggler options), what each rank
// registers (RankInfo), a plan switch (PlanSwitch) and a job's status
// (JobStatus), with the ranges the protocol puts on them. The rank side (an
// iteration report, a rank's plan) is protocol/messages.hpp; the JSON of
// both, protocol/json.hpp.
//
// These are shapes. The rules that need the job (is this rank's coordinate
// free, may this schedule be planned) are coord's: coord::CheckJobConfig,
// coord::Job::RegisterRank, coord::CheckStragglerOptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::protocol {

// Ranges (docs/limits.md).
inline constexpr int kMaxDegree = 100'000;  // each of pp/dp/tp
inline constexpr std::int64_t kMaxWorldSize = 10'000'000;
inline constexpr std::size_t kMaxJobIdLength = 256;
inline constexpr std::size_t kMaxMetadataLength = 4096;
inline constexpr std::size_t kMaxFrequencies = 4096;  // RankInfo::available_mhz

// When a data-parallel pipeline counts as a straggler, and as recovered
// (coord/straggler.hpp explains the detector).
struct StragglerOptions {
  double threshold = 1.05;      // relative slowdown that counts as slow, (1, 100]
  double recover_below = 1.03;  // relative slowdown that counts as recovered, [1, threshold]
  int window = 2;               // consecutive iterations to switch either way, 1..100
  double min_change = 0.05;     // relative estimate change that re-plans, [0, 10]

  friend bool operator==(const StragglerOptions&, const StragglerOptions&) = default;
};

// POST /jobs; what coord::Job is made from.
struct JobConfig {
  std::string job_id;               // 1..kMaxJobIdLength printable ASCII characters, no '/'
  int pp_degree = 1;                // pipeline stages, = spec.stages
  int dp_degree = 1;                // data-parallel pipelines
  int tp_degree = 1;                // GPUs per stage
  std::int64_t world_size = 0;      // pp * dp * tp (0: computed)
  schedule::Spec spec;              // spec.stages = pp_degree
  std::optional<double> p_block_w;  // unset: the profile's metadata
  double resolution_s = 5e-3;       // frontier grid
  // Iteration time the intrinsic plan may add over the all-max-clock time T,
  // a fraction (PlanRequest::slowdown): 0 plans for the same speed.
  double slowdown = 0;
  std::string gpu;       // informational, e.g. "A100-SXM4-80GB"
  std::string metadata;  // free text (Zeus's job_metadata)
  StragglerOptions straggler;

  friend bool operator==(const JobConfig&, const JobConfig&) = default;
};

// POST /jobs/{id}/ranks: where a rank sits in the job.
struct RankInfo {
  int rank = -1;                   // 0..world_size-1
  int dp_rank = -1;                // 0..dp_degree-1: the pipeline
  int pp_rank = -1;                // 0..pp_degree-1: the stage
  int tp_rank = -1;                // 0..tp_degree-1
  std::vector<int> available_mhz;  // the GPU's SM clocks (informational), each 1..10000

  friend bool operator==(const RankInfo&, const RankInfo&) = default;
};

// A new plan version of the job: the initial plan (version 1) or a switch
// the straggler detector caused.
struct PlanSwitch {
  int version = 0;             // the plan version it created (1: the initial plan)
  std::int64_t iteration = 0;  // first iteration it is meant for
  double time_unix_s = 0;
  std::string reason;
  std::vector<double> slowdowns;  // per pipeline, as estimated (1 = on time)
  double target_s = 0;            // T'
  std::vector<int> point_of_pipeline;
  // Predicted GPU energy saved per iteration (J) against every pipeline
  // running the intrinsic plan through the same T', all GPUs (x tp).
  double predicted_saving_j = 0;

  friend bool operator==(const PlanSwitch&, const PlanSwitch&) = default;
};

// GET /jobs/{id}: everything a status page shows of a job (no frontier
// clocks).
struct JobStatus {
  JobConfig config;
  std::string phase;  // coord::JobPhaseName: "waiting_for_ranks", ..., "planned", "failed"
  int registered_ranks = 0;
  bool has_profile = false;
  int plan_version = 0;  // 0: not planned
  std::int64_t completed_iterations = 0;
  std::int64_t dropped_iterations = 0;
  std::string failure;  // "" unless planning failed
  // The profile's rows left out of planning, one line each
  // (coord::Job::profile_notes).
  std::vector<std::string> profile_notes;

  // Once planned: the frontier's points (time, energy), which of them is
  // the intrinsic plan, what each pipeline runs and why.
  struct Frontier {
    double baseline_time_s = 0;  // all max clocks
    double max_clock_energy_j = 0;
    double p_block_w = 0;
    int intrinsic = 0;
    std::vector<model::Prediction> points;
  };
  std::optional<Frontier> frontier;
  std::vector<int> point_of_pipeline;
  std::vector<double> slowdowns;
  std::vector<PlanSwitch> switches;
};

// GET /jobs/{id} as `joulepipe serve` answers it: the job's status and
// what serving it adds (activity, waits, the planner's state, Zeus's
// schedule barrier).
struct ServedJobStatus {
  JobStatus job;
  double created_unix_s = 0;
  double last_active_unix_s = 0;
  int waiting_requests = 0;  // parked requests on the job
  struct Planning {
    std::string state = "idle";       // "idle", "queued" or "running"
    std::optional<double> running_s;  // while running
    double time_limit_s = 0;          // ServerOptions::plan_time_limit_s
    std::int64_t instructions = 0;    // of one pipeline iteration
    std::optional<double> work;       // coord::PlanWork; unset: unknown
    bool heavy = false;
  } planning;
  struct Zeus {
    std::int64_t schedule_asked = 0;  // ranks that asked GET /schedule
    bool schedule_released = false;
  } zeus;
};

// GET /jobs: one entry per job, in the order they were registered.
struct JobListing {
  std::string job_id;
  std::string phase;
  int registered_ranks = 0;
  std::int64_t world_size = 0;
  int plan_version = 0;
  double created_unix_s = 0;
  double last_active_unix_s = 0;
};

}  // namespace joulepipe::protocol
