// Quality and speed of the frontier planner on Perseus's measured stage
// profiles (SOSP'24 artifact; data/profiles/): GPT-3 175B and BLOOM 176B on
// A100-SXM (P_block 83.64 W) and A40 (P_block 70.38 W), 8 stages, 1F1B,
// 12/24/48/96 microbatches.
//
// For each configuration it prints the zero-slowdown energy saving versus
// the all-max-clock plan for: joulepipe (exact figures of a real plan), the
// Perseus paper (Table 6), and the bound (the relaxation every discrete plan
// is above), plus the wall time of the full frontier (median of --repeat
// runs; 1 ms grid), its size and the relaxation's step count.
//
// Then the knob-tuple check (issue 15, item 5): each configuration solved
// again on the same profile with a knob column holding one value on every
// row (knob.overlap=1); the frontier must be identical (every point's time,
// energy and clocks) and the plans must name that setting.
//
// Usage: bench_perseus_table [--repeat N] [--resolution-ms R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace {

struct Workload {
  const char* label;
  const char* file;
  double p_block_w;
  double perseus_pct[4];  // Perseus paper Table 6, microbatches 12/24/48/96
};

const Workload kWorkloads[] = {
    {"GPT-3 A100-SXM", "gpt3-175b+a100_sxm_bf16.csv", 83.64, {15.2, 14.2, 13.6, 13.3}},
    {"GPT-3 A40", "gpt3-175b+a40_bf16.csv", 70.38, {11.8, 10.2, 9.3, 8.9}},
    {"BLOOM A100-SXM", "bloom+a100_sxm_bf16.csv", 83.64, {10.5, 7.1, 5.2, 4.3}},
    {"BLOOM A40", "bloom+a40_bf16.csv", 70.38, {7.0, 4.5, 3.1, 2.4}},
};
const int kMicrobatches[] = {12, 24, 48, 96};

// `profile` with knobs "overlap=1" on every row.
joulepipe::model::Profile WithOneKnob(const joulepipe::model::Profile& profile) {
  joulepipe::model::Profile out;
  for (int s = 0; s < profile.num_stages(); ++s) {
    for (auto kind : {joulepipe::model::Kind::kForward, joulepipe::model::Kind::kBackward}) {
      for (joulepipe::model::ClockPoint point : profile.Points(s, kind)) {
        point.knobs = "overlap=1";
        out.Add(s, kind, point);
      }
    }
  }
  return out;
}

bool SameFrontier(const joulepipe::solver::Frontier& a, const joulepipe::solver::Frontier& b) {
  if (a.points.size() != b.points.size()) return false;
  for (size_t i = 0; i < a.points.size(); ++i) {
    if (a.points[i].time_s != b.points[i].time_s || a.points[i].energy_j != b.points[i].energy_j ||
        a.points[i].mhz != b.points[i].mhz) {
      return false;
    }
  }
  return a.max_clock.time_s == b.max_clock.time_s && a.max_clock.energy_j == b.max_clock.energy_j;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  double resolution_ms = 1.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc)
      repeat = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--resolution-ms") && i + 1 < argc)
      resolution_ms = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--repeat N] [--resolution-ms R]\n", argv[0]);
      return 2;
    }
  }
  std::printf(
      "Zero-slowdown energy saving vs all-max-clock (GPU energy, exact evaluation of real "
      "plans)\n");
  std::printf("%-15s %4s %9s %9s %9s %8s %8s %8s %7s %9s\n", "workload", "M", "joulepipe",
              "Perseus", "bound", "gap(pp)", "solve_s", "points", "steps", "T_base_s");
  double worst_gap = 0, worst_time = 0;
  for (const Workload& w : kWorkloads) {
    const std::string path = std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + w.file;
    const joulepipe::model::Profile profile = joulepipe::model::ReadProfileCsv(path);
    for (int mi = 0; mi < 4; ++mi) {
      const int m = kMicrobatches[mi];
      const auto schedule = joulepipe::schedule::Build({joulepipe::schedule::Kind::k1F1B, 8, m, 1});
      joulepipe::solver::Options options;
      options.p_block_w = w.p_block_w;
      options.resolution_s = resolution_ms * 1e-3;
      std::vector<double> seconds;
      joulepipe::solver::Frontier frontier;
      for (int r = 0; r < repeat; ++r) {
        const auto start = std::chrono::steady_clock::now();
        frontier = joulepipe::solver::SolveFrontier(schedule, profile, options);
        seconds.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::sort(seconds.begin(), seconds.end());
      const double median = seconds[seconds.size() / 2];
      const double t0 = frontier.max_clock.time_s, e0 = frontier.max_clock.energy_j;
      const auto* best = frontier.BestWithin(t0);
      const double ours = 100 * (1 - best->energy_j / e0);
      const double bound = 100 * (1 - frontier.BoundAt(t0) / e0);
      worst_gap = std::max(worst_gap, bound - ours);
      worst_time = std::max(worst_time, median);
      std::printf("%-15s %4d %8.2f%% %8.1f%% %8.2f%% %8.3f %8.3f %8zu %7d %9.3f\n", w.label, m,
                  ours, w.perseus_pct[mi], bound, bound - ours, median, frontier.points.size(),
                  frontier.stats.relaxation_steps, t0);
    }
  }
  std::printf("worst gap to bound: %.3f pp; slowest full frontier: %.3f s (median of %d)\n",
              worst_gap, worst_time, repeat);

  std::printf("\nKnob tuples: the same profiles with a knob column, one value per row\n");
  std::printf("%-15s %4s %9s %9s %8s %9s %s\n", "workload", "M", "no knobs", "one knob", "points",
              "named", "frontier");
  int unequal = 0;
  for (const Workload& w : kWorkloads) {
    const std::string path = std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + w.file;
    const joulepipe::model::Profile profile = joulepipe::model::ReadProfileCsv(path);
    const joulepipe::model::Profile knobbed = WithOneKnob(profile);
    for (int m : kMicrobatches) {
      const auto schedule = joulepipe::schedule::Build({joulepipe::schedule::Kind::k1F1B, 8, m, 1});
      joulepipe::solver::Options options;
      options.p_block_w = w.p_block_w;
      options.resolution_s = resolution_ms * 1e-3;
      const auto plain = joulepipe::solver::SolveFrontier(schedule, profile, options);
      const auto knob = joulepipe::solver::SolveFrontier(schedule, knobbed, options);
      const double t0 = plain.max_clock.time_s;
      const auto* a = plain.BestWithin(t0);
      const auto* b = knob.BestWithin(knob.max_clock.time_s);
      const auto plan = joulepipe::solver::ToPlan(schedule, *b);
      size_t named = 0, total = 0;
      for (const auto& stage : plan.stages) {
        for (const auto& planned : stage) {
          named += planned.knobs == "overlap=1" ? 1 : 0;
          ++total;
        }
      }
      const bool same = SameFrontier(plain, knob);
      unequal += same ? 0 : 1;
      std::printf("%-15s %4d %8.4f%% %8.4f%% %8zu %4zu/%-4zu %s\n", w.label, m,
                  100 * (1 - a->energy_j / plain.max_clock.energy_j),
                  100 * (1 - b->energy_j / knob.max_clock.energy_j), knob.points.size(), named,
                  total, same ? "identical" : "DIFFERENT");
    }
  }
  std::printf("knob tuples: %d of 16 configurations differ\n", unequal);
  return unequal == 0 ? 0 : 1;
}
