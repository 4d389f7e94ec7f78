#include "joulepipe/coord/plan_task.hpp"

#include <algorithm>
#include <utility>

namespace joulepipe::coord {

double PlanWork(const model::Profile& profile, const solver::PlanRequest& request) {
  const solver::PipelinePlan prepared =
      solver::PreparePipelinePlan(PlannableProfile(profile, nullptr), request);
  const double deadlines = std::max(
      1.0, (prepared.slowest_s - prepared.baseline.time_s) / prepared.request.resolution_s);
  return static_cast<double>(prepared.schedule.num_nodes()) * deadlines;
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
