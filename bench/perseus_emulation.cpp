// Perseus's emulation (SOSP'24, Fig. 7), reproduced with joulepipe's planner
// and simulator: GPT-3 175B and BLOOM 176B on A100-SXM and A40 from the
// measured stage profiles (data/profiles/; P_block 83.64 W and 70.38 W, used
// unscaled), 16 pipelines x 8 stages x 96 microbatches (1F1B), TP 8 (1,024
// GPUs; TP multiplies every energy, so it does not change a saving), one
// straggler pipeline slowed to T' = s * T.
//
// Baseline: every pipeline at the highest clocks. joulepipe: the straggler
// runs the intrinsic plan (least energy at T), the other 15 run the
// least-energy frontier plan whose time is <= T'. Whole-cluster GPU energy
// of one iteration, simulated (sim/simulator.hpp accounting: the straggler's
// extra time and every wait are charged at P_block).
//
// Prints, per workload: the whole-cluster saving for s = 1.05 .. 1.5, the
// chosen non-straggler plan's time / T, the intrinsic-only saving (no
// straggler), and a check of the s = 1.2 figure against Perseus's (27.0,
// 29.9, 23.6, 21.1 %) with the iteration time no longer than the baseline's.
// Exit code 1 if a check fails.
//
// Usage: bench_perseus_emulation [--resolution-ms R] [--pipelines D] [--microbatches M]
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

struct Workload {
  const char* label;
  const char* file;
  double p_block_w;
  double perseus_pct;    // Fig. 7, T'/T = 1.2, whole cluster
  double perseus_tstar;  // Perseus's chosen plan time / T at 1.2
};

const Workload kWorkloads[] = {
    {"GPT-3 A100-SXM", "gpt3-175b+a100_sxm_bf16.csv", 83.64, 27.0, 1.15},
    {"BLOOM A100-SXM", "bloom+a100_sxm_bf16.csv", 83.64, 29.9, 1.20},
    {"GPT-3 A40", "gpt3-175b+a40_bf16.csv", 70.38, 23.6, 1.11},
    {"BLOOM A40", "bloom+a40_bf16.csv", 70.38, 21.1, 1.14},
};
constexpr double kSlowdowns[] = {1.05, 1.1, 1.2, 1.3, 1.4, 1.5};
constexpr int kChecked = 2;  // index of 1.2

struct Cell {
  double saving_pct = 0;
  double tstar = 0;  // chosen non-straggler plan time / T
  bool time_ok = false;
};

}  // namespace

int main(int argc, char** argv) {
  double resolution_ms = 1.0;
  int pipelines = 16, microbatches = 96;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--resolution-ms") && i + 1 < argc) {
      resolution_ms = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--pipelines") && i + 1 < argc) {
      pipelines = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--microbatches") && i + 1 < argc) {
      microbatches = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--resolution-ms R] [--pipelines D] [--microbatches M]\n",
                   argv[0]);
      return 2;
    }
  }
  constexpr int kStages = 8, kTp = 8;
  std::printf(
      "Perseus emulation (Fig. 7): %d pipelines x %d stages x %d microbatches, 1F1B, TP %d "
      "(%d GPUs), one straggler at T' = s*T.\n"
      "Whole-cluster GPU energy saving vs all-max-clock, simulated from the measured profiles "
      "(P_block unscaled); frontier grid %g ms.\n\n",
      pipelines, kStages, microbatches, kTp, pipelines * kStages * kTp, resolution_ms);

  std::vector<std::vector<Cell>> cells;
  std::vector<double> intrinsic_pct, solve_s;
  for (const Workload& w : kWorkloads) {
    const std::string path = std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + w.file;
    const model::Profile profile = model::ReadProfileCsv(path);
    const schedule::Schedule schedule =
        schedule::Build({schedule::Kind::k1F1B, kStages, microbatches, 1});
    const auto max_clock = schedule::UniformClocks(schedule, profile, true);
    const double t0 = solver::EvaluateClocks(schedule, profile, w.p_block_w, max_clock).time_s;
    solver::Options options;
    options.p_block_w = w.p_block_w;
    options.resolution_s = resolution_ms * 1e-3;
    options.extra_deadlines_s = {t0};
    for (double s : kSlowdowns) options.extra_deadlines_s.push_back(s * t0);
    const auto started = std::chrono::steady_clock::now();
    const solver::Frontier frontier = solver::SolveFrontier(schedule, profile, options);
    solve_s.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());

    std::vector<sim::CandidatePlan> candidates;
    for (const auto& p : frontier.points) candidates.push_back({p.mhz, p.time_s, p.energy_j});
    const int baseline = static_cast<int>(candidates.size());
    candidates.push_back(
        {frontier.max_clock.mhz, frontier.max_clock.time_s, frontier.max_clock.energy_j});
    const int intrinsic = static_cast<int>(frontier.BestWithin(t0) - frontier.points.data());

    auto simulate = [&](double slowdown, Cell* cell) {
      sim::JobSpec job;
      job.pipelines = pipelines;
      job.gpus_per_stage = kTp;
      job.p_block_w = w.p_block_w;
      job.iterations = 1;
      if (slowdown > 1) job.straggler = {0, slowdown, 0, 0, 0};
      const sim::Simulator simulator(schedule, profile, job, candidates, baseline, intrinsic);
      const sim::SimulationResult base = simulator.Run(sim::Policy::kBaseline);
      const sim::SimulationResult ours = simulator.Run(sim::Policy::kJoulepipe);
      cell->saving_pct = 100 * (1 - ours.MeanEnergy() / base.MeanEnergy());
      cell->tstar = candidates[ours.plan[pipelines > 1 ? 1 : 0]].time_s / t0;
      cell->time_ok = ours.MeanTime() <= base.MeanTime() * (1 + 1e-12);
    };
    Cell none;
    simulate(1.0, &none);
    intrinsic_pct.push_back(none.saving_pct);
    std::vector<Cell> row;
    for (double s : kSlowdowns) {
      Cell cell;
      simulate(s, &cell);
      row.push_back(cell);
    }
    cells.push_back(row);
  }

  std::printf("whole-cluster saving (%%) by T'/T\n%-15s", "workload");
  for (double s : kSlowdowns) std::printf(" %7.2f", s);
  std::printf(" %10s %12s %8s\n", "intrinsic", "Perseus@1.2", "check");
  bool all_ok = true;
  for (std::size_t w = 0; w < cells.size(); ++w) {
    std::printf("%-15s", kWorkloads[w].label);
    bool time_ok = true;
    for (const Cell& c : cells[w]) {
      std::printf(" %7.2f", c.saving_pct);
      time_ok = time_ok && c.time_ok;
    }
    const bool ok = cells[w][kChecked].saving_pct >= kWorkloads[w].perseus_pct && time_ok;
    all_ok = all_ok && ok;
    std::printf(" %10.2f %12.1f %8s\n", intrinsic_pct[w], kWorkloads[w].perseus_pct,
                ok ? "ok" : "FAIL");
  }
  std::printf("\nchosen non-straggler plan time / T by T'/T\n%-15s", "workload");
  for (double s : kSlowdowns) std::printf(" %7.2f", s);
  std::printf(" %12s %9s\n", "Perseus@1.2", "solve_s");
  for (std::size_t w = 0; w < cells.size(); ++w) {
    std::printf("%-15s", kWorkloads[w].label);
    for (const Cell& c : cells[w]) std::printf(" %7.3f", c.tstar);
    std::printf(" %12.2f %9.2f\n", kWorkloads[w].perseus_tstar, solve_s[w]);
  }
  std::printf(
      "\ncheck: saving at T'/T = 1.2 >= Perseus's and joulepipe's iteration time <= the "
      "baseline's at every T'/T: %s\n",
      all_ok ? "ok" : "FAIL");
  return all_ok ? 0 : 1;
}
