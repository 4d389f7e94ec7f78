// What the energy bound buys `joulepipe tune`: the search with pruning
// (the default) against solving every candidate that fits and reaches the
// envelope's range, on the same request, in the same run. Prints, per job,
// the candidates solved and the wall time of each (median of --repeat), the
// ratio, and whether the two envelopes and answers are the same (they must
// be: the pruning is exact).
//
// Usage: bench_tune_search [--repeat N] [--demo]
//   default  GPT-3 6.7B on 64 A100-SXM (today TP 4 x PP 4 x DP 4, 1f1b),
//            global batch 256, and GPT-3 XL on 32 A40 (TP 1 x PP 8 x DP 4),
//            global batch 128
//   --demo   also the demo job: GPT-3 175B on 1,024 A100-SXM, TP 8 x PP 8
//            x DP 16, batch 1,536 (the exhaustive search takes many minutes)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "joulepipe/tune/tune.hpp"

namespace {

using namespace joulepipe;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

struct Job {
  const char* name;
  const char* model;
  const char* gpu;
  int gpus, global_batch;
  tune::TuneConfig current;
};

tune::TuneRequest Request(const Job& job) {
  tune::TuneRequest r;
  r.workload.model = physics::FindTransformer(job.model);
  r.gpu = physics::FindGpu(job.gpu);
  r.gpus = job.gpus;
  r.global_batch = job.global_batch;
  r.current = job.current;
  return r;
}

// Runs `repeat` searches; returns the last result and the median seconds.
tune::TuneResult Timed(const tune::TuneRequest& r, int repeat, double* median_s) {
  std::vector<double> seconds;
  tune::TuneResult result;
  for (int k = 0; k < repeat; ++k) {
    const auto started = std::chrono::steady_clock::now();
    result = tune::Tune(r);
    seconds.push_back(Seconds(started));
  }
  *median_s = Median(seconds);
  return result;
}

// The largest relative difference between the two envelopes' points, or
// infinity when they differ in length.
double EnvelopeDifference(const tune::TuneResult& a, const tune::TuneResult& b) {
  if (a.envelope.size() != b.envelope.size()) return INFINITY;
  double worst = 0;
  for (std::size_t k = 0; k < a.envelope.size(); ++k) {
    const tune::JobPoint& p = a.envelope[k].job;
    const tune::JobPoint& q = b.envelope[k].job;
    worst = std::max(
        {worst, std::fabs(p.time_s / q.time_s - 1), std::fabs(p.energy_j / q.energy_j - 1)});
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  bool demo = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--demo")) {
      demo = true;
    } else {
      std::fprintf(stderr, "usage: bench_tune_search [--repeat N] [--demo]\n");
      return 2;
    }
  }
  std::vector<Job> jobs = {
      {"GPT-3 6.7B, 64 A100-SXM",
       "gpt3-6.7b",
       "a100-sxm",
       64,
       256,
       {4, 4, 4, 1, schedule::Kind::k1F1B, 1}},
      {"GPT-3 XL, 32 A40", "gpt3-1.3b", "a40", 32, 128, {1, 8, 4, 1, schedule::Kind::k1F1B, 1}},
  };
  if (demo) {
    jobs.push_back({"GPT-3 175B, 1024 A100-SXM",
                    "gpt3-175b",
                    "a100-sxm",
                    1024,
                    1536,
                    {8, 8, 16, 1, schedule::Kind::k1F1B, 1}});
  }
  std::printf(
      "tune search: pruning by the energy bound vs solving every candidate (median of %d; "
      "the exhaustive search once)\n\n",
      repeat);
  std::printf("%-28s %6s %8s %9s %8s %9s %8s %9s %9s\n", "job", "cands", "solved", "pruned s",
              "solved", "all s", "ratio", "env diff", "saving");
  int failures = 0;
  for (const Job& job : jobs) {
    tune::TuneRequest r = Request(job);
    double pruned_s = 0, all_s = 0;
    const tune::TuneResult pruned = Timed(r, repeat, &pruned_s);
    r.prune = false;
    const tune::TuneResult all = Timed(r, 1, &all_s);
    const double diff = EnvelopeDifference(pruned, all);
    const bool same = diff <= 1e-12 && pruned.best.job.energy_j == all.best.job.energy_j;
    failures += !same;
    std::printf("%-28s %6zu %8d %8.1fs %8d %8.1fs %7.1fx %9.1e %8.1f%%%s\n", job.name,
                pruned.candidates.size(), pruned.solved, pruned_s, all.solved, all_s,
                all_s / pruned_s, diff, pruned.SavingPct(pruned.best.job),
                same ? "" : "  DIFFERENT");
    std::printf("  chosen %s; clocks %.1f%% + configuration %.1f pp\n",
                tune::ConfigText(pruned.chosen().config).c_str(),
                pruned.SavingPct(pruned.clocks_only.job),
                pruned.SavingPct(pruned.best.job) - pruned.SavingPct(pruned.clocks_only.job));
  }
  return failures == 0 ? 0 : 1;
}
