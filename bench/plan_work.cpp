// bench_plan_work: does the service's work estimate (coord::PlanWork) predict
// what a solve costs? `joulepipe serve` orders its planner queue and keeps a
// planner free for light jobs by this estimate, so a job rated light must
// solve quickly whatever its shape: stages, microbatches, grid resolution,
// and how many clock settings its profile has.
//
// For a grid of synthetic jobs it solves each frontier (solver::PlanPipeline,
// as a planner thread does) and prints the measured seconds beside the
// estimate, then the spread of seconds per unit of estimate across jobs
// (max / min), for the estimate and for the old one that ignored the clock
// settings (instructions x grid deadlines). A good estimate has a small
// spread; the light threshold (coord::kLightPlanWork) is then a time.
//
//   bench_plan_work [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace {

using namespace joulepipe;

// A plausible GPU curve sampled at `settings` clocks from 600 to 1980 MHz:
// time ~ a fixed part plus a part inversely proportional to the clock,
// power ~ static + dynamic ~ f^2.4; later stages a little slower.
model::Profile SyntheticProfile(int stages, int settings) {
  model::Profile p;
  for (int s = 0; s < stages; ++s) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const double t_top = (kind == model::Kind::kForward ? 0.010 : 0.020) * (1 + 0.03 * s);
      for (int k = 0; k < settings; ++k) {
        const int mhz =
            settings == 1 ? 1980 : 600 + static_cast<int>(std::lround(1380.0 * k / (settings - 1)));
        const double x = mhz / 1980.0;
        model::ClockPoint point;
        point.mhz = mhz;
        point.time_s = t_top * (0.35 + 0.65 / x);
        point.energy_j = (90 + 300 * std::pow(x, 2.4)) * point.time_s;
        p.Add(s, kind, point);
      }
    }
  }
  return p;
}

struct Case {
  int stages, microbatches, settings;
  double resolution_s;
};

}  // namespace

// Least squares of log(seconds) on [1, log x1, log x2, log x3]: the
// exponents of seconds ~ k x1^a x2^b x3^c (normal equations, 4 x 4).
std::vector<double> FitPowerLaw(const std::vector<std::vector<double>>& x,
                                const std::vector<double>& seconds) {
  double m[4][5] = {};
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    const double row[4] = {1, std::log(x[i][0]), std::log(x[i][1]), std::log(x[i][2])};
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) m[r][c] += row[r] * row[c];
      m[r][4] += row[r] * std::log(seconds[i]);
    }
  }
  for (int p = 0; p < 4; ++p) {
    for (int r = p + 1; r < 4; ++r) {
      const double f = m[r][p] / m[p][p];
      for (int c = p; c < 5; ++c) m[r][c] -= f * m[p][c];
    }
  }
  std::vector<double> beta(4);
  for (int r = 3; r >= 0; --r) {
    double v = m[r][4];
    for (int c = r + 1; c < 4; ++c) v -= m[r][c] * beta[c];
    beta[r] = v / m[r][r];
  }
  return beta;
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::vector<Case> cases;
  for (int stages : {2, 8}) {
    for (int microbatches : quick ? std::vector<int>{4} : std::vector<int>{4, 16}) {
      for (int settings : quick ? std::vector<int>{8, 64} : std::vector<int>{8, 32, 128, 512}) {
        for (double resolution : {4e-3, 5e-4}) {
          cases.push_back({stages, microbatches, settings, resolution});
        }
      }
    }
  }
  std::printf("%-6s %-6s %-8s %-8s %10s %10s %10s %12s %9s\n", "stages", "micro", "settings",
              "grid_s", "nodes", "options", "deadlines", "PlanWork", "solve_s");
  std::vector<std::vector<double>> x;
  std::vector<double> seconds, old_work, linear_work, plan_work;
  for (const Case& c : cases) {
    const model::Profile profile = SyntheticProfile(c.stages, c.settings);
    solver::PlanRequest request;
    request.spec.kind = schedule::Kind::k1F1B;
    request.spec.stages = c.stages;
    request.spec.microbatches = c.microbatches;
    request.p_block_w = 80;
    request.resolution_s = c.resolution_s;
    request.profile_name = "synthetic";
    const solver::PipelinePlan prepared = solver::PreparePipelinePlan(profile, request);
    const double nodes = prepared.schedule.num_nodes();
    const double deadlines = std::max(
        1.0, (prepared.slowest_s - prepared.baseline.time_s) / prepared.request.resolution_s);
    // The options per instruction: what PlanWork counts, per node.
    const double options = coord::PlanOptions(profile, request) / nodes;
    std::vector<double> times;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const solver::PipelinePlan plan = solver::PlanPipeline(profile, request);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (plan.frontier.points.empty()) return 1;
      if (times.back() > 2) break;  // long solves vary little: one sample
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    x.push_back({nodes, options, deadlines});
    seconds.push_back(t);
    old_work.push_back(nodes * deadlines);
    linear_work.push_back(nodes * options * deadlines);
    plan_work.push_back(coord::PlanWork(profile, request));
    std::printf("%-6d %-6d %-8d %-8g %10.0f %10.1f %10.0f %12.3g %9.4f\n", c.stages, c.microbatches,
                c.settings, c.resolution_s, nodes, options, deadlines, plan_work.back(), t);
    std::fflush(stdout);
  }
  auto spread = [&](const std::vector<double>& work) {
    double lo = 1e300, hi = 0;
    for (std::size_t i = 0; i < work.size(); ++i) {
      lo = std::min(lo, seconds[i] / work[i]);
      hi = std::max(hi, seconds[i] / work[i]);
    }
    return hi / lo;
  };
  const std::vector<double> beta = FitPowerLaw(x, seconds);
  std::printf("\nfitted: seconds ~ nodes^%.2f x options^%.2f x deadlines^%.2f\n", beta[1], beta[2],
              beta[3]);
  std::printf("seconds per unit of estimate, max / min over %zu jobs (1 is perfect):\n",
              cases.size());
  std::printf("  instructions x deadlines (the old estimate):         %8.1f\n", spread(old_work));
  std::printf("  instructions x options x deadlines:                  %8.1f\n",
              spread(linear_work));
  std::printf("  coord::PlanWork:                                     %8.1f\n", spread(plan_work));
  double most = 0;
  for (std::size_t i = 0; i < seconds.size(); ++i) most = std::max(most, seconds[i] / plan_work[i]);
  std::printf(
      "  a job at serve's light threshold (coord::kLightPlanWork %.3g) solves in at most "
      "%.2f s here\n",
      coord::kLightPlanWork, coord::kLightPlanWork * most);
  return 0;
}
