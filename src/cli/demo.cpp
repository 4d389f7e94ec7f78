// `joulepipe demo`: fixed inputs, an explanation and a frontier table.
#include "joulepipe/cli/demo.hpp"

#include <cstddef>
#include <vector>

#include "joulepipe/cli/embedded.hpp"
#include "joulepipe/cli/format.hpp"

namespace joulepipe::cli {

PlanRequest DemoRequest() {
  PlanRequest request;
  request.profile_name = std::string(kEmbeddedDemoProfileName);
  request.spec.kind = schedule::Kind::k1F1B;
  request.spec.stages = 8;
  request.spec.microbatches = 48;
  request.spec.chunks = 1;
  request.p_block_w = 83.64;  // A100-SXM power while blocked (Perseus)
  request.slowdown = 0;
  // A 5 ms grid keeps the demo quick; the chosen plan does not depend on it
  // (its deadline is planned exactly).
  request.resolution_s = 5e-3;
  request.max_plans = 256;
  return request;
}

std::string FormatDemoIntro(const PlanOutcome& outcome) {
  const schedule::Spec& spec = outcome.request.spec;
  std::string s;
  s += "joulepipe demo: per-instruction GPU SM clocks for pipeline-parallel training\n\n";
  s += "What was done: the measured stage profile from the Perseus SOSP'24 artifact,\n";
  s += "GPT-3 175B on A100-SXM (bf16; time and energy of every forward and backward\n";
  s += "of each of 8 pipeline stages at every SM clock), is built into this binary.\n";
  s += Printf("joulepipe laid out one %s iteration of %d stages x %d microbatches (%d\n",
              std::string(schedule::KindName(spec.kind)).c_str(), spec.stages, spec.microbatches,
              outcome.schedule.num_nodes());
  s += "instructions), computed its whole time-energy frontier (the least energy for\n";
  s += "every iteration time) and chose the least-energy plan that is no slower than\n";
  s += "running every instruction at the highest clock. Instructions off the critical\n";
  s += "path run at lower clocks and fill the pipeline's bubbles instead of waiting,\n";
  s += Printf("so the iteration keeps its speed and uses less energy. P_block = %g W is\n",
              outcome.request.p_block_w);
  s += "the A100-SXM's power while it waits (from Perseus).\n\n";
  return s;
}

std::string FormatFrontierTable(const PlanOutcome& outcome, int rows) {
  const std::vector<solver::FrontierPoint>& points = outcome.frontier.points;
  const std::vector<std::size_t> shown = SelectPoints(points, outcome.chosen, rows);
  const double t0 = outcome.baseline.time_s, e0 = outcome.baseline.energy_j;
  std::string s = Printf("frontier: %zu of %zu points, evenly spaced in time (* = chosen)\n",
                         shown.size(), points.size());
  s += Printf("  %10s %9s %12s %8s\n", "time_s", "slowdown", "energy_j", "saving");
  for (std::size_t index : shown) {
    const solver::FrontierPoint& p = points[index];
    s += Printf("  %10.4f %8.2f%% %12.1f %7.2f%%%s\n", p.time_s, SlowdownPercent(p.time_s, t0),
                p.energy_j, SavingPercent(p.energy_j, e0), index == outcome.chosen ? " *" : "");
  }
  return s;
}

}  // namespace joulepipe::cli
