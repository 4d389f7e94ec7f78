#include "joulepipe/coord/plan_task.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/solver/cost_hull.hpp"

namespace joulepipe::coord {

namespace {

struct Sized {
  double nodes = 0, options = 0, deadlines = 0;
};

Sized SizeOf(const model::Profile& profile, const solver::PlanRequest& request) {
  const model::Profile plannable = PlannableProfile(profile, request.profile_name, nullptr);
  const solver::PipelinePlan prepared = solver::PreparePipelinePlan(plannable, request);
  Sized out;
  out.deadlines = std::max(
      1.0, (prepared.slowest_s - prepared.baseline.time_s) / prepared.request.resolution_s);
  // Every instruction's options: the clocks of its (stage, kind) that no
  // other clock beats on both time and effective energy (the cost hull's
  // Pareto list, what the solver plans with), not every row of the profile.
  const schedule::Schedule& sched = prepared.schedule;
  std::map<std::pair<int, model::Kind>, std::size_t> options;
  for (const model::Instruction& ins : sched.nodes) {
    const int stage = schedule::ProfileStage(sched.spec, plannable.num_stages(), ins);
    auto it = options.find({stage, ins.kind});
    if (it == options.end()) {
      const solver::CostHull hull =
          solver::BuildCostHull(plannable.Points(stage, ins.kind), prepared.p_block_w);
      it = options.emplace(std::pair{stage, ins.kind}, hull.pareto.size()).first;
    }
    out.options += static_cast<double>(it->second);
  }
  out.nodes = sched.num_nodes();
  return out;
}

}  // namespace

double PlanOptions(const model::Profile& profile, const solver::PlanRequest& request) {
  return SizeOf(profile, request).options;
}

double PlanWork(const model::Profile& profile, const solver::PlanRequest& request) {
  // The solver rounds every deadline of the grid and refines a sample of
  // them (solver::Options: at least refined_samples, refine_budget /
  // instructions when more; a refinement costs about 64 roundings); each
  // pass weighs every instruction's options, superlinearly (the exponent
  // fitted by bench_plan_work).
  const Sized s = SizeOf(profile, request);
  const solver::Options defaults;
  const double refined = std::min(
      s.deadlines, std::max(static_cast<double>(defaults.refined_samples),
                            static_cast<double>(defaults.refine_budget) / std::max(1.0, s.nodes)));
  const double per_node = s.options / std::max(1.0, s.nodes);
  return s.nodes * std::pow(per_node, 1.3) * (refined + s.deadlines / 64);
}

solver::PipelinePlan PlanTask::Run(
    const std::atomic<bool>* cancel,
    std::function<void(const char* phase, double fraction)> progress) const {
  solver::PlanRequest r = request;
  r.cancel = cancel;
  r.progress = std::move(progress);
  return solver::PlanPipeline(*profile, r);
}

PlanTask PlanTaskOf(const Job& job) {
  return PlanTask{job.shared_profile(), job.PlanRequest()};
}

}  // namespace joulepipe::coord
