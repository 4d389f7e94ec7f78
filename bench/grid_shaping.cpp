// bench_grid_shaping: the published problem (Llama 3's data-center power
// swings, "Power Stabilization for AI Training Datacenters", arXiv
// 2508.14318) on simulated jobs: at every iteration's end all GPUs wait at
// the gradient all-reduce at once, and the job's power drops and comes back.
//
// For GPT-3 175B on A100-SXM (the measured Perseus stage profile, 1F1B 8 x
// 96, TP 8, all-reduce 0.85 s as `site` puts it for this job), on the
// demo's 1,024 GPUs (16 pipelines) and on 16,384 GPUs (256 pipelines), each
// with per-GPU clock variability (sigma 0.02) so pipelines are not in
// perfect lockstep, it prints the swing (MW within 1 s) and the ramp (MW/s
// between 0.1 s means) of the job's GPU power, in 10 ms bins over 4 healthy
// iterations:
//   * without joulepipe (every clock at maximum);
//   * with its energy plan (the same-time plan);
//   * shaped at two ramp limits (half and a tenth of the baseline's ramp):
//     the firmware floor on the baseline, and joulepipe's plan + floor,
//     with the energy each costs against the baseline.
//
// Usage: bench_grid_shaping [--pipelines D ...]  (default: 16 256)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/clock_plans.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/sim/grid_plan.hpp"
#include "joulepipe/sim/simulator.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace {

using namespace joulepipe;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Mw(double w) {
  return w / 1e6;
}

void Row(const char* label, const sim::ShapedPoint& p, double base_j) {
  std::printf("  %-46s %7.3f MW %8.2f MW/s %9.3f MJ %+7.1f%% %8.3f MJ %s\n", label,
              Mw(p.grid.swing_w), Mw(p.grid.ramp_w_per_s), Mw(p.energy_j),
              100 * (p.energy_j / base_j - 1), Mw(p.filler_j), p.meets ? "" : "(misses)");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> pipelines;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--pipelines") && i + 1 < argc) {
      while (i + 1 < argc && argv[i + 1][0] != '-') pipelines.push_back(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--pipelines D ...]\n", argv[0]);
      return 2;
    }
  }
  if (pipelines.empty()) pipelines = {16, 256};
  constexpr int kStages = 8, kMicrobatches = 96, kTp = 8;
  constexpr double kPBlock = 83.64, kAllreduceS = 0.85;
  const model::Profile profile = model::ReadProfileCsv(
      std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv");
  const schedule::Schedule schedule =
      schedule::Build({schedule::Kind::k1F1B, kStages, kMicrobatches, 1});
  const double t0 = solver::EvaluateClocks(schedule, profile, kPBlock,
                                           schedule::UniformClocks(schedule, profile, true))
                        .time_s;
  solver::Options options;
  options.p_block_w = kPBlock;
  options.resolution_s = 5e-3;
  const solver::Frontier frontier = solver::SolveFrontier(schedule, profile, options);
  const std::vector<sim::CandidatePlan> candidates = sim::GridCandidates(frontier, t0);
  // With 5 % more time: slower plans, and room for offsets between pipelines.
  const std::vector<sim::CandidatePlan> slack = sim::GridCandidates(frontier, 1.05 * t0);
  std::printf(
      "grid shaping: GPT-3 175B, A100-SXM measured profile, 1F1B %d x %d, TP %d, all-reduce "
      "%.2f s, clock variability 0.02; the job's GPU power in 10 ms bins over 4 healthy "
      "iterations; %zu plans at the same speed (%.6g s)\n",
      kStages, kMicrobatches, kTp, kAllreduceS, candidates.size(), t0);
  for (int d : pipelines) {
    sim::JobSpec job;
    job.pipelines = d;
    job.gpus_per_stage = kTp;
    job.p_block_w = kPBlock;
    job.allreduce_s = kAllreduceS;
    job.clock_variability = 0.02;
    job.seed = 1;
    sim::GridPlanRequest request;
    request.deadline_s = t0;
    request.iterations = 4;
    const auto started = std::chrono::steady_clock::now();
    const sim::GridPlan free = sim::PlanForGrid(schedule, profile, job, candidates, 0, request);
    const sim::ShapedPoint& base = free.unshaped.front();
    const sim::ShapedPoint& energy_plan = free.unshaped.back();
    std::printf("\n%d GPUs (%d pipelines x %d stages x TP %d):\n", d * kStages * kTp, d, kStages,
                kTp);
    std::printf("  %-46s %10s %13s %12s %8s %11s\n", "", "swing", "ramp", "energy/iter", "change",
                "for grid");
    Row("without joulepipe (max clocks)", base, base.energy_j);
    Row("joulepipe energy plan", energy_plan, base.energy_j);
    for (double share : {0.5, 0.1}) {
      request.limits.max_ramp_w_per_s = share * base.grid.ramp_w_per_s;
      const sim::GridPlan plan = sim::PlanForGrid(schedule, profile, job, candidates, 0, request);
      std::printf("  ramp limit %.2f MW/s (%.0f %% of the baseline's):\n",
                  Mw(request.limits.max_ramp_w_per_s), 100 * share);
      const std::string firmware =
          "  firmware floor " + std::to_string(Mw(plan.firmware.floor_w)).substr(0, 5) + " MW";
      const std::string chosen = "  joulepipe plan + floor " +
                                 std::to_string(Mw(plan.chosen.floor_w)).substr(0, 5) + " MW";
      Row(firmware.c_str(), plan.firmware, base.energy_j);
      Row(chosen.c_str(), plan.chosen, base.energy_j);
      // The same limit with 5 % more time, offsets between pipelines tried.
      sim::GridPlanRequest more = request;
      more.deadline_s = 1.05 * t0;
      more.offsets_s = sim::SpreadingOffsets(d, more.options.ramp_window_s);
      const sim::GridPlan wide = sim::PlanForGrid(schedule, profile, job, slack, 0, more);
      const std::string offset =
          "  5 % slack: offsets " + std::to_string(wide.chosen.offset_s * 1e3).substr(0, 5) +
          " ms + floor " + std::to_string(Mw(wide.chosen.floor_w)).substr(0, 5) + " MW";
      Row(offset.c_str(), wide.chosen, base.energy_j);
      if (const sim::ShapedPoint* floorless = sim::FloorlessChoice(wide)) {
        const std::string runtime = "  5 % slack, no floor: offsets " +
                                    std::to_string(floorless->offset_s * 1e3).substr(0, 5) + " ms";
        Row(runtime.c_str(), *floorless, base.energy_j);
      } else {
        std::printf("    5 %% slack, no floor: none meets it\n");
      }
    }
    std::printf("  (%.1f s for the plans' simulations and floors)\n", Seconds(started));
  }
  return 0;
}
