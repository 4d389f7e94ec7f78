// The minimum cuts inside the exact relaxation (the part of the planner that
// runs them): same input, same relaxation, three ways to cut each step:
//   warm   the planner's: Dinic warm-started from the last step's flow
//          (WarmMinCut) on the uncontracted critical network;
//   dinic  Dinic from scratch on each step's series-contracted network (the
//          planner before the warm start);
//   lemon  LEMON's Preflow from scratch (the test oracle).
// Prints the median wall time of each over --repeat runs and the ratios, on
// Perseus's measured GPT-3 175B and BLOOM profiles (8 stages, 1F1B). Checks
// that all reach the same relaxed energy at the fastest makespan.
//
// Usage: bench_max_flow [--repeat N] [--microbatches M ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../src/solver/activity_graph.hpp"
#include "../src/solver/relaxation.hpp"
#include "../tests/solver/oracle/min_cut_lemon.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

using joulepipe::solver::MinCutFunction;

namespace {

double MedianSeconds(const joulepipe::solver::ActivityGraph& g, double p_block,
                     MinCutFunction backend, int repeat, double* bound) {
  std::vector<double> seconds;
  for (int r = 0; r < repeat; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const auto relaxation = joulepipe::solver::SolveRelaxation(g, p_block, backend);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    *bound = relaxation.curve.back().energy_j;
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  std::vector<int> microbatches;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--microbatches") && i + 1 < argc) {
      microbatches.push_back(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--repeat N] [--microbatches M ...]\n", argv[0]);
      return 2;
    }
  }
  if (microbatches.empty()) microbatches = {12, 24};
  struct Workload {
    const char* label;
    const char* file;
    double p_block;
  };
  const Workload workloads[] = {{"GPT-3 A100-SXM", "gpt3-175b+a100_sxm_bf16.csv", 83.64},
                                {"BLOOM A40", "bloom+a40_bf16.csv", 70.38}};
  std::printf("exact relaxation, all deadlines: median of %d runs\n", repeat);
  std::printf("%-15s %4s %9s %9s %9s %11s %11s %s\n", "workload", "M", "warm_s", "dinic_s",
              "lemon_s", "dinic/warm", "lemon/warm", "same bound");
  for (const Workload& w : workloads) {
    const auto profile = joulepipe::model::ReadProfileCsv(std::string(JOULEPIPE_SOURCE_DIR) +
                                                          "/data/profiles/" + w.file);
    for (int m : microbatches) {
      const auto schedule = joulepipe::schedule::Build({joulepipe::schedule::Kind::k1F1B, 8, m, 1});
      const auto g = joulepipe::solver::BuildActivityGraph(schedule, profile, w.p_block);
      double warm_bound = 0, dinic_bound = 0, lemon_bound = 0;
      const double warm = MedianSeconds(g, w.p_block, nullptr, repeat, &warm_bound);
      const double dinic = MedianSeconds(g, w.p_block, joulepipe::solver::MinCutWithLowerBounds,
                                         repeat, &dinic_bound);
      const double lemon = MedianSeconds(
          g, w.p_block, joulepipe::solver::MinCutWithLowerBoundsLemon, repeat, &lemon_bound);
      const auto same = [&](double a) { return std::abs(a - lemon_bound) <= 1e-6 * lemon_bound; };
      std::printf("%-15s %4d %9.3f %9.3f %9.3f %10.1fx %10.1fx %s\n", w.label, m, warm, dinic,
                  lemon, dinic / warm, lemon / warm,
                  same(warm_bound) && same(dinic_bound) ? "yes" : "NO");
    }
  }
  return 0;
}
