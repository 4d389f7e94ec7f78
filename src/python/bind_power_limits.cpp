// plan_power_limits: the task solver::PlanPowerLimits, as `joulepipe plan
// --lever power-limit`, without the clock comparison (plan_pipeline gives
// that).
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "cancellable.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/solver/power_limit_plan.hpp"
#include "plan_inputs.hpp"

namespace joulepipe::python {
namespace {

py::dict PlanPowerLimitsTask(const py::handle& profile_arg, int stages, int microbatches,
                             const std::string& schedule, int chunks,
                             std::optional<double> p_block_w, double slowdown, bool least_energy,
                             std::optional<double> min_power_limit_w,
                             std::optional<double> max_power_limit_w) {
  model::GoalChoice choice;
  if (slowdown != 0) choice.slowdown = slowdown;
  choice.least_energy = least_energy;
  double chosen_slowdown = 0;
  const model::Objective objective = ChooseGoalAsKeywords(choice, &chosen_slowdown);
  solver::PlanRequest request;
  request.spec = SpecFrom(schedule, stages, microbatches, chunks);
  request.p_block_w = p_block_w;
  request.slowdown = slowdown;
  solver::CheckPlanRequest(request);
  request.profile_name = ProfileName(profile_arg);
  const model::RowRuleResult rows = PlannableFrom(profile_arg);  // as `joulepipe plan`
  const model::Profile& profile = rows.profile;
  request.objective = objective;
  solver::PowerLimitRequest limits;
  limits.plan = request;
  // The GPU's accepted range: the keywords where given, else the
  // catalogue's figures for the profile's GPU (as `joulepipe plan`).
  static constexpr std::pair<std::string_view, std::string_view> kKeywords[] = {
      {"PowerLimitRequest::min_limit_w", "min_power_limit_w"},
      {"PowerLimitRequest::max_limit_w", "max_power_limit_w"},
  };
  physics::PowerLimitRange range;
  try {
    range = physics::PowerLimitRangeFor(profile.metadata.gpu, min_power_limit_w.value_or(0),
                                        max_power_limit_w.value_or(0));
  } catch (const model::InputError& e) {
    throw model::RenameFields(e, kKeywords);
  }
  limits.min_limit_w = range.min_w;
  limits.max_limit_w = range.max_w;
  limits.compare_clocks = false;  // the clock plan is plan_pipeline's
  // One call, cancellable (its input checks come first and are cheap).
  const solver::PowerLimitPlan plan = RunCancellable<solver::PowerLimitPlan>(
      [&](const std::atomic<bool>* cancel, ProgressFn) {
        solver::PowerLimitRequest cancellable = limits;
        cancellable.plan.cancel = cancel;
        solver::PowerLimitPlan p = solver::PlanPowerLimits(profile, cancellable);
        p.request.plan.cancel = nullptr;
        return p;
      },
      py::none());
  const solver::PipelinePlan& prepared = plan.clocks;
  const solver::LimitFrontier& f = plan.limits;
  const solver::LimitPoint* chosen = &f.points[plan.chosen];
  py::dict out;
  out["baseline_time_s"] = prepared.baseline.time_s;
  out["baseline_energy_j"] = prepared.baseline.energy_j;
  out["deadline_s"] = prepared.deadline_s;
  out["p_block_w"] = prepared.p_block_w;
  out["time_s"] = chosen->time_s;
  out["energy_j"] = chosen->energy_j;
  out["saving"] = 1 - chosen->energy_j / prepared.baseline.energy_j;
  out["power_limits_w"] = chosen->watts;
  out["plan"] = solver::ToPlan(prepared.schedule, *chosen);
  py::list frontier;
  for (const solver::LimitPoint& p : f.points) {
    frontier.append(py::make_tuple(p.time_s, p.energy_j, p.watts));
  }
  out["frontier"] = frontier;
  out["evaluations"] = f.evaluations;
  out["power_limit_range_w"] = range.max_w > 0 || range.min_w > 0
                                   ? py::object(py::make_tuple(range.min_w, range.max_w))
                                   : py::object(py::none());
  out["power_limit_range_from"] = model::RenameFields(range.source, kKeywords);
  return out;
}

}  // namespace

void BindPowerLimits(py::module_& m) {
  m.def("plan_power_limits", &PlanPowerLimitsTask, py::arg("profile"), py::kw_only(),
        py::arg("stages"), py::arg("microbatches"), py::arg("schedule") = "1f1b",
        py::arg("chunks") = 1, py::arg("p_block_w") = py::none(), py::arg("slowdown") = 0.0,
        py::arg("least_energy") = false, py::arg("min_power_limit_w") = py::none(),
        py::arg("max_power_limit_w") = py::none());
}

}  // namespace joulepipe::python
