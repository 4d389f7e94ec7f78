// Speed of the training simulator: 100 iterations of 128 pipelines x 8
// stages x 96 microbatches (1F1B; 1,536 instructions per pipeline, 19.7 M
// instruction steps per policy), measured GPT-3 175B A100-SXM profile, one
// straggler (T'/T = 1.2) and per-GPU clock variability (sigma 0.02) on.
//
// The frontier solve (one pipeline; what the candidate plans come from) is
// timed once and reported separately. The simulation alone, per policy, is
// the median of --repeat runs (default 5), with ns per simulated instruction.
//
// Usage: bench_sim_scale [--repeat N] [--pipelines D] [--iterations N] [--resolution-ms R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/clock_plans.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/simulator.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace {

using namespace joulepipe;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5, pipelines = 128, iterations = 100;
  double resolution_ms = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--pipelines") && i + 1 < argc) {
      pipelines = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--iterations") && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--resolution-ms") && i + 1 < argc) {
      resolution_ms = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--repeat N] [--pipelines D] [--iterations N] [--resolution-ms R]\n",
                   argv[0]);
      return 2;
    }
  }
  constexpr int kStages = 8, kMicrobatches = 96;
  constexpr double kPBlock = 83.64, kSlowdown = 1.2;
  const model::Profile profile = model::ReadProfileCsv(
      std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv");
  const schedule::Schedule schedule =
      schedule::Build({schedule::Kind::k1F1B, kStages, kMicrobatches, 1});
  const double t0 = solver::EvaluateClocks(schedule, profile, kPBlock,
                                           schedule::UniformClocks(schedule, profile, true))
                        .time_s;

  solver::Options options;
  options.p_block_w = kPBlock;
  options.resolution_s = resolution_ms * 1e-3;
  options.extra_deadlines_s = {t0, kSlowdown * t0};
  const auto solve_start = std::chrono::steady_clock::now();
  const solver::Frontier frontier = solver::SolveFrontier(schedule, profile, options);
  const double solve_s = Seconds(solve_start);

  std::vector<sim::CandidatePlan> candidates;
  for (const auto& p : frontier.points) candidates.push_back({p.mhz, p.time_s, p.energy_j});
  const int baseline = static_cast<int>(candidates.size());
  candidates.push_back(
      {frontier.max_clock.mhz, frontier.max_clock.time_s, frontier.max_clock.energy_j});
  const int intrinsic = static_cast<int>(frontier.BestWithin(t0) - frontier.points.data());

  sim::JobSpec job;
  job.pipelines = pipelines;
  job.p_block_w = kPBlock;
  job.iterations = iterations;
  job.straggler = {0, kSlowdown, 0, 0, 0};
  job.clock_variability = 0.02;
  job.seed = 1;
  const auto setup_start = std::chrono::steady_clock::now();
  const sim::Simulator simulator(schedule, profile, job, candidates, baseline, intrinsic);
  const double setup_s = Seconds(setup_start);

  const double steps = static_cast<double>(iterations) * pipelines * schedule.num_nodes();
  std::printf(
      "simulator scale: %d iterations x %d pipelines x %d stages x %d microbatches (1F1B, %d "
      "instructions per pipeline, %.3g instruction steps per policy)\n",
      iterations, pipelines, kStages, kMicrobatches, schedule.num_nodes(), steps);
  std::printf(
      "frontier solve (one pipeline, %g ms grid, %zu points): %.2f s (not included below)\n",
      resolution_ms, frontier.points.size(), solve_s);
  std::printf("simulator setup (checks %zu candidates, draws variability): %.4f s\n",
              candidates.size(), setup_s);
  double total = 0;
  for (sim::Policy policy : {sim::Policy::kBaseline, sim::Policy::kJoulepipe}) {
    std::vector<double> runs;
    sim::SimulationResult result;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      result = simulator.Run(policy);
      runs.push_back(Seconds(start));
    }
    std::sort(runs.begin(), runs.end());
    const double median = runs[runs.size() / 2];
    total += median;
    std::printf(
        "%-10s median %.4f s of %d runs (min %.4f, max %.4f), %.2f ns per instruction; "
        "mean iteration %.4f s, %.1f J\n",
        sim::PolicyName(policy), median, repeat, runs.front(), runs.back(), median / steps * 1e9,
        result.MeanTime(), result.MeanEnergy());
  }
  std::printf("both policies: %.4f s (target < 5 s)\n", total);
  return total < 5 ? 0 : 1;
}
