// The `simulate` command without its argument parsing: plan one pipeline's
// frontier, then simulate a data-parallel job of D such pipelines (sim/
// simulator.hpp) under two policies and compare them.
//
//   baseline   every pipeline runs every instruction at its highest clock.
//   joulepipe  every pipeline runs the intrinsic plan (least energy at the
//              all-max-clock time); while a straggler is known, the
//              straggler keeps it and every other pipeline runs the
//              least-energy frontier plan whose time is <= T' (the
//              straggler's iteration time), switching back when it recovers.
//
// All figures are GPU energy simulated from the profile (not measured).
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/simulator.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// Said next to every figure `simulate` prints.
inline constexpr char kSimulatedFigures[] =
    "GPU energy, simulated from the profile (not measured); CPU and DRAM not included";

struct SimulateRequest {
  std::string profile_name;  // for summaries
  schedule::Spec spec;       // one pipeline's schedule
  // Pipelines, TP degree, P_block, faults, iterations, seed. A straggler
  // with slowdown 1 is no straggler (straggler.pipeline is ignored then).
  sim::JobSpec job;
  int detection_lag = 0;        // iterations until the policy knows a slowdown
  double resolution_s = 5e-3;   // frontier grid; the T and T' deadlines are exact
  int timeline_iterations = 0;  // > 0: record the first N iterations of both policies
};

// Checks the numbers of a request (not the profile). Throws model::InputError
// naming the flag (--pipelines, --straggler-slowdown, ...) and the fix.
void CheckSimulateRequest(const SimulateRequest& request);

struct SimulateOutcome {
  SimulateRequest request;
  schedule::Schedule schedule;
  solver::Evaluation max_clock;          // one pipeline, every instruction at its highest clock
  solver::FrontierPoint intrinsic;       // least energy within max_clock.time_s
  solver::FrontierPoint straggler_plan;  // what non-stragglers run while one is known
  double straggler_target_s = 0;         // T' = slowdown * intrinsic time
  std::size_t frontier_points = 0;
  solver::Frontier frontier;    // one pipeline's, as solved
  double solve_seconds = 0;     // SolveFrontier
  double simulate_seconds = 0;  // both policies
  sim::SimulationResult baseline, joulepipe;

  int gpus() const {
    return request.job.pipelines * request.spec.stages * request.job.gpus_per_stage;
  }
  bool has_straggler() const {
    return request.job.straggler.pipeline >= 0 && request.job.straggler.slowdown > 1;
  }
};

// Checks the request and that the profile fits, solves one pipeline's
// frontier (deadlines T and T' exact), simulates both policies. Long solves
// (> 2 s) report progress on `progress` (may be null). Throws
// model::InputError on bad input.
SimulateOutcome RunSimulation(const SimulateRequest& request, const model::Profile& profile,
                              std::FILE* progress);

// The comparison for people: inputs, the two policies' iteration time,
// energy per iteration and saving, GPU count, and the methodology line.
std::string FormatSimulationSummary(const SimulateOutcome& outcome);

// One JSON object and a newline:
//   {"baseline":{"time_s":..,"energy_j":..},"joulepipe":{...},"saving_pct":..,
//    ...inputs, gpus, per-pipeline and per-iteration figures}
// time_s and energy_j are means per iteration over the whole job.
std::string SimulationJson(const SimulateOutcome& outcome);

// Chrome trace-event JSON of the recorded iterations: joulepipe pipelines
// as pid p, baseline pipelines as pid D + p, stages as tid.
std::string SimulationTimeline(const SimulateOutcome& outcome);

// The subcommand itself: registers `simulate`, its flags and help on `app`
// (app.cpp); Run() checks the flags, reads the profile, simulates and prints
// (and writes --timeline). Run() throws model::InputError on bad input.
struct SimulateFlags;
class SimulateSubcommand {
 public:
  explicit SimulateSubcommand(CLI::App* app);
  ~SimulateSubcommand();
  SimulateSubcommand(const SimulateSubcommand&) = delete;
  SimulateSubcommand& operator=(const SimulateSubcommand&) = delete;

  bool parsed() const;
  int Run() const;  // the exit code

 private:
  std::unique_ptr<SimulateFlags> flags_;
  CLI::App* command_ = nullptr;
};

}  // namespace joulepipe::cli
