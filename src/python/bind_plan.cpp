// Planning: Kind, plan_pipeline / PipelinePlan (solver::PlanPipeline) and
// evaluate_plan (schedule::EvaluatePlan), plus the stage-plan conversions
// every other file uses.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "cancellable.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "joulepipe/solver/wait_plan.hpp"
#include "plan_inputs.hpp"

namespace joulepipe::python {

py::list StagePlanToList(const std::vector<model::PlannedInstruction>& plan) {
  py::list out(plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const model::PlannedInstruction& p = plan[i];
    // The wait clock only where the plan lowers the wait after it, so plans
    // without wait clocks read as before.
    if (!p.knobs.empty())  // a knob profile's plan: the 7-tuple
      out[i] = py::make_tuple(p.instruction.kind, p.instruction.microbatch, p.instruction.chunk,
                              p.mhz, p.wait_mhz, p.wait_restore_s, p.knobs);
    else if (p.wait_mhz > 0)
      out[i] = py::make_tuple(p.instruction.kind, p.instruction.microbatch, p.instruction.chunk,
                              p.mhz, p.wait_mhz, p.wait_restore_s);
    else
      out[i] =
          py::make_tuple(p.instruction.kind, p.instruction.microbatch, p.instruction.chunk, p.mhz);
  }
  return out;
}

std::vector<model::PlannedInstruction> StagePlanFromList(const py::handle& list, int stage,
                                                         const char* field) {
  if (!py::isinstance<py::sequence>(list) || py::isinstance<py::str>(list)) {
    throw model::InputError(
        field, std::string(field) + " must be a list of (Kind, microbatch, chunk, mhz) tuples");
  }
  std::vector<model::PlannedInstruction> out;
  std::size_t i = 0;
  for (py::handle item : list) {
    try {
      // (kind, microbatch, chunk, mhz[, wait_mhz, wait_restore_s[, knobs]]);
      // in a 7-tuple the wait may be 0, 0 (not lowered).
      const std::size_t n = py::len(item);
      if (n != 4 && n != 6 && n != 7) throw py::cast_error();
      const py::sequence t = py::reinterpret_borrow<py::sequence>(item);
      model::PlannedInstruction p;
      p.instruction = {stage, t[2].cast<int>(), t[1].cast<int>(), t[0].cast<model::Kind>()};
      p.mhz = t[3].cast<int>();
      if (n >= 6) {
        p.wait_mhz = t[4].cast<int>();
        p.wait_restore_s = t[5].cast<double>();
        const bool no_wait = n == 7 && p.wait_mhz == 0 && p.wait_restore_s == 0;
        if (!no_wait && (p.wait_mhz <= 0 || !(p.wait_restore_s >= 0)))
          throw model::InputError(field, std::string(field) + " entry " + std::to_string(i) +
                                             ": the wait clock must be > 0 MHz and its restore "
                                             ">= 0 s" +
                                             (n == 7 ? ", or both 0 (no wait clock)"
                                                     : " (or give a 4-tuple: no wait clock)"));
      }
      if (n == 7) {
        p.knobs = t[6].cast<std::string>();
        const std::string problem = model::KnobsProblem(p.knobs);
        if (!problem.empty())
          throw model::InputError(field, std::string(field) + " entry " + std::to_string(i) +
                                             ": knobs '" + p.knobs + "' " + problem);
      }
      out.push_back(std::move(p));
    } catch (const py::error_already_set&) {  // len() of a non-sequence
      throw model::InputError(field, std::string(field) + " entry " + std::to_string(i) + " (" +
                                         std::string(py::repr(item)) +
                                         ") is not a (Kind, microbatch, chunk, mhz[, wait_mhz, "
                                         "wait_restore_s[, knobs]]) tuple");
    } catch (const py::cast_error&) {
      throw model::InputError(field, std::string(field) + " entry " + std::to_string(i) + " (" +
                                         std::string(py::repr(item)) +
                                         ") is not a (Kind, microbatch, chunk, mhz[, wait_mhz, "
                                         "wait_restore_s[, knobs]]) tuple");
    }
    ++i;
  }
  return out;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

schedule::Spec SpecFrom(const std::string& schedule, int stages, int microbatches, int chunks) {
  schedule::Spec spec;
  if (!schedule::ParseKind(schedule, &spec.kind)) {
    throw model::InputError("Spec::kind",
                            "Spec::kind '" + schedule + "' is not one of gpipe, 1f1b, interleaved");
  }
  spec.stages = stages;
  spec.microbatches = microbatches;
  spec.chunks = chunks;
  return spec;
}

namespace {

constexpr const char* kHeadWaitDoc =
    "The lowered wait before the stage's first instruction, (wait_mhz, restore_s after the "
    "step begins), or None; pass it to Agent.set_plan(head_wait=...)";

std::optional<std::pair<int, double>> HeadWaitOf(const model::Plan& p, int stage) {
  if (stage < 0 || stage >= static_cast<int>(p.stages.size())) {
    throw model::InputError("stage", "stage must be 0.." + std::to_string(p.stages.size() - 1) +
                                         " (got " + std::to_string(stage) + ")");
  }
  if (p.head_waits.empty() || p.head_waits[stage].mhz <= 0) return std::nullopt;
  return std::make_pair(p.head_waits[stage].mhz, p.head_waits[stage].restore_s);
}

// A solved plan and its chosen point as a plan file. Held by shared_ptr so
// that a Frontier view keeps it alive.
struct PlanResult {
  solver::PipelinePlan plan;
  model::Plan chosen;  // solver::ToPlan of the chosen point (its waits annotated with a wait model)
};

// The frontier as a read-only (n, 2) buffer of doubles, (time_s, energy_j)
// per point, ascending time, straight over the solver's points: numpy.asarray
// makes no copy. It keeps its plan alive.
struct FrontierView {
  std::shared_ptr<const PlanResult> owner;
  const std::vector<solver::FrontierPoint>& points() const { return owner->plan.frontier.points; }
};

py::buffer_info FrontierBuffer(const FrontierView& v) {
  const std::vector<solver::FrontierPoint>& p = v.points();
  static const double kEmpty[2] = {0, 0};
  if (p.empty()) {
    return py::buffer_info(const_cast<double*>(kEmpty), sizeof(double),
                           py::format_descriptor<double>::format(), 2,
                           {py::ssize_t{0}, py::ssize_t{2}},
                           {py::ssize_t{2 * sizeof(double)}, py::ssize_t{sizeof(double)}},
                           /*readonly=*/true);
  }
  const char* base = reinterpret_cast<const char*>(&p[0].time_s);
  const py::ssize_t column = reinterpret_cast<const char*>(&p[0].energy_j) - base;
  return py::buffer_info(const_cast<double*>(&p[0].time_s), sizeof(double),
                         py::format_descriptor<double>::format(), 2,
                         {static_cast<py::ssize_t>(p.size()), py::ssize_t{2}},
                         {static_cast<py::ssize_t>(sizeof(solver::FrontierPoint)), column},
                         /*readonly=*/true);
}

std::shared_ptr<PlanResult> PlanPipelineTask(
    const py::handle& profile_arg, int stages, int microbatches, const std::string& schedule,
    int chunks, std::optional<double> p_block_w, double slowdown, double resolution_s,
    const py::object& progress, std::optional<std::string> profile_name, bool least_energy,
    std::optional<double> energy_budget_j, std::optional<double> power_budget_w,
    double host_power_w, const py::object& wait_model) {
  solver::PlanRequest request;
  request.spec = SpecFrom(schedule, stages, microbatches, chunks);
  request.p_block_w = p_block_w;
  request.slowdown = slowdown;
  model::GoalChoice choice;
  if (slowdown != 0) choice.slowdown = slowdown;
  choice.least_energy = least_energy;
  choice.energy_budget_j = energy_budget_j;
  choice.power_budget_w = power_budget_w;
  request.objective = ChooseGoalAsKeywords(choice, &request.slowdown);
  request.objective.host_power_w = host_power_w;
  request.resolution_s = resolution_s;
  solver::CheckPlanRequest(request);  // numbers before the profile, as the CLI
  request.profile_name = profile_name ? *profile_name : ProfileName(profile_arg);
  if (!wait_model.is_none())
    request.waits = model::ReadWaitModelFile(py::str(wait_model).cast<std::string>());
  const model::RowRuleResult rows = PlannableFrom(profile_arg);  // as `joulepipe plan`
  const model::Profile& profile = rows.profile;
  const std::vector<std::string>& profile_notes = rows.notes;
  auto result = std::make_shared<PlanResult>();
  result->plan = RunCancellable<solver::PipelinePlan>(
      [&profile, request](const std::atomic<bool>* cancel, ProgressFn report) {
        solver::PlanRequest r = request;
        r.cancel = cancel;
        r.progress = std::move(report);
        return solver::PlanPipeline(profile, r);
      },
      progress);
  result->plan.request.progress = nullptr;  // the callback's state ends with the call
  result->plan.request.cancel = nullptr;
  result->plan.notes.insert(result->plan.notes.end(), profile_notes.begin(), profile_notes.end());
  if (result->plan.waits) {
    // With a wait model, the chosen plan's waits annotated.
    result->chosen = result->plan.waits->chosen_plan;
  } else {
    result->chosen = solver::ToPlan(result->plan.schedule, result->plan.chosen_point());
  }
  return result;
}

py::dict EvaluatePlanTask(const py::handle& profile_arg, const std::string& plan_json,
                          std::optional<double> p_block_w, const std::string& plan_name) {
  const model::RowRuleResult rows = PlannableFrom(profile_arg);  // as `joulepipe evaluate`
  const model::Profile& profile = rows.profile;
  const model::Plan plan = model::PlanFromJson(plan_json, plan_name);
  schedule::EvaluateRequest request;
  request.p_block_w = p_block_w;
  request.profile_name = ProfileName(profile_arg);
  request.plan_name = plan_name;
  schedule::PlanEvaluation e;
  {
    py::gil_scoped_release release;
    e = schedule::EvaluatePlan(profile, plan, request);
  }
  e.notes.insert(e.notes.begin(), rows.notes.begin(), rows.notes.end());
  py::dict out;
  out["schedule"] = std::string(schedule::KindName(e.spec.kind));
  out["stages"] = e.spec.stages;
  out["microbatches"] = e.spec.microbatches;
  out["chunks"] = e.spec.chunks;
  out["time_s"] = e.replay.time_s;
  out["energy_j"] = e.replay.energy_j;
  out["busy_energy_j"] = e.replay.busy_energy_j;
  out["blocking_energy_j"] = e.replay.blocking_energy_j;
  out["p_block_w"] = e.p_block_w;
  out["p_block_source"] = e.p_block_source;
  out["notes"] = e.notes;
  if (plan.predicted) {
    out["predicted_time_s"] = plan.predicted->time_s;
    out["predicted_energy_j"] = plan.predicted->energy_j;
  } else {
    out["predicted_time_s"] = py::none();
    out["predicted_energy_j"] = py::none();
  }
  return out;
}

}  // namespace

void BindPlan(py::module_& m) {
  // The planner's range of PlanRequest::slowdown (a fraction): the Python
  // package's max_slowdown (a factor) is checked against it, not a copy.
  m.attr("MAX_PLAN_SLOWDOWN") = solver::kMaxSlowdown;
  py::enum_<model::Kind>(m, "Kind", "An instruction's kind: one forward or one backward.")
      .value("FORWARD", model::Kind::kForward)
      .value("BACKWARD", model::Kind::kBackward);

  py::class_<model::Plan>(m, "Plan",
                          "A plan file (what `joulepipe plan` writes): one clock per "
                          "instruction of every stage, in execution order.")
      .def_static(
          "read",
          [](const std::filesystem::path& path) {
            std::filesystem::path file = path;
            std::error_code error;
            if (std::filesystem::is_directory(file, error)) file /= "chosen.json";
            if (!std::filesystem::exists(file, error)) {
              PyErr_SetObject(
                  PyExc_FileNotFoundError,
                  py::make_tuple(2, "No such file or directory (the plan)", file.string()).ptr());
              throw py::error_already_set();
            }
            return model::ReadPlanFile(file.string());
          },
          py::arg("path"),
          "Reads a plan file, or DIR/chosen.json when `path` is a `joulepipe plan --out` DIR.")
      .def_static("parse", &model::PlanFromJson, py::arg("text"), py::arg("source") = "plan")
      .def_readonly("schedule", &model::Plan::schedule)
      .def_readonly("stages", &model::Plan::num_stages)
      .def_readonly("microbatches", &model::Plan::num_microbatches)
      .def_readonly("chunks", &model::Plan::num_chunks)
      .def_readonly("power_limits_w", &model::Plan::power_limits_w,
                    "A power-limit plan's limit per stage (W, 0 = default); [] for a clock plan")
      .def_property_readonly("predicted_time_s",
                             [](const model::Plan& p) -> std::optional<double> {
                               if (!p.predicted) return std::nullopt;
                               return p.predicted->time_s;
                             })
      .def_property_readonly("predicted_energy_j",
                             [](const model::Plan& p) -> std::optional<double> {
                               if (!p.predicted) return std::nullopt;
                               return p.predicted->energy_j;
                             })
      .def(
          "stage_plan",
          [](const model::Plan& p, int stage) {
            if (stage < 0 || stage >= static_cast<int>(p.stages.size())) {
              throw model::InputError("stage", "stage must be 0.." +
                                                   std::to_string(p.stages.size() - 1) + " (got " +
                                                   std::to_string(stage) + ")");
            }
            return StagePlanToList(p.stages[stage]);
          },
          py::arg("stage"))
      .def("head_wait", &HeadWaitOf, py::arg("stage"), kHeadWaitDoc)
      .def_property_readonly(
          "pipeline_offset_s",
          [](const model::Plan& p) { return p.grid ? p.grid->pipeline_offset_s : 0.0; },
          "A grid plan's offset between the pipelines' starts (s): data-parallel pipeline p "
          "starts each iteration p x this late; 0 for other plans")
      .def_property_readonly(
          "stop_ramp_s", [](const model::Plan& p) { return p.grid ? p.grid->stop_ramp_s : 0.0; },
          "A grid plan's stop ramp (s): the start ramp's clocks descending over the job's last "
          "this many seconds; 0 for none")
      .def("to_json", &model::PlanToJson)
      .def("__repr__", [](const model::Plan& p) {
        return "<Plan " + p.schedule + ": " + std::to_string(p.num_stages) + " stages x " +
               std::to_string(p.num_microbatches) + " microbatches>";
      });

  py::class_<FrontierView>(m, "Frontier", py::buffer_protocol(),
                           "The iteration time-energy frontier: n points (time_s, energy_j), "
                           "ascending time. numpy.asarray(f) is an (n, 2) view, no copy.")
      .def_buffer(&FrontierBuffer)
      .def("__len__", [](const FrontierView& v) { return v.points().size(); })
      .def("__getitem__",
           [](const FrontierView& v, py::ssize_t i) {
             const auto n = static_cast<py::ssize_t>(v.points().size());
             if (i < 0) i += n;
             if (i < 0 || i >= n) throw py::index_error("frontier index out of range");
             const solver::FrontierPoint& p = v.points()[static_cast<std::size_t>(i)];
             return py::make_tuple(p.time_s, p.energy_j);
           })
      .def("tolist", [](const FrontierView& v) {
        py::list out;
        for (const solver::FrontierPoint& p : v.points())
          out.append(py::make_tuple(p.time_s, p.energy_j));
        return out;
      });

  using R = PlanResult;
  py::class_<R, std::shared_ptr<R>>(m, "PipelinePlan",
                                    "A solved pipeline plan: the frontier, the chosen point (least "
                                    "energy within the deadline) and one clock per instruction.")
      .def_property_readonly(
          "schedule",
          [](const R& r) { return std::string(schedule::KindName(r.plan.request.spec.kind)); })
      .def_property_readonly("stages", [](const R& r) { return r.plan.request.spec.stages; })
      .def_property_readonly("microbatches",
                             [](const R& r) { return r.plan.request.spec.microbatches; })
      .def_property_readonly("chunks", [](const R& r) { return r.plan.request.spec.chunks; })
      .def_property_readonly("instructions", [](const R& r) { return r.plan.schedule.num_nodes(); })
      .def_property_readonly("baseline_time_s", [](const R& r) { return r.plan.baseline.time_s; })
      .def_property_readonly("baseline_energy_j",
                             [](const R& r) { return r.plan.baseline.energy_j; })
      .def_property_readonly("time_s", [](const R& r) { return r.plan.chosen_point().time_s; })
      .def_property_readonly("energy_j", [](const R& r) { return r.plan.chosen_point().energy_j; })
      .def_property_readonly("saving",
                             [](const R& r) {
                               const double e0 = r.plan.baseline.energy_j;
                               return e0 > 0 ? 1 - r.plan.chosen_point().energy_j / e0 : 0.0;
                             })
      .def_property_readonly("bound_energy_j", [](const R& r) { return r.plan.bound_energy_j; })
      .def_property_readonly("deadline_s", [](const R& r) { return r.plan.deadline_s; })
      .def_property_readonly("slowdown", [](const R& r) { return r.plan.request.slowdown; })
      .def_property_readonly(
          "goal",
          [](const R& r) { return std::string(model::GoalName(r.plan.request.objective.goal)); })
      .def_property_readonly(
          "energy_scope", [](const R& r) { return model::EnergyScope(r.plan.request.objective); })
      .def_property_readonly("counted_energy_j",
                             [](const R& r) {
                               const solver::FrontierPoint& p = r.plan.chosen_point();
                               return model::CountedEnergyJ(p.time_s, p.energy_j,
                                                            r.plan.request.objective,
                                                            r.plan.request.spec.stages);
                             })
      .def_property_readonly("chosen_index", [](const R& r) { return r.plan.chosen; })
      .def_property_readonly("wait_model",
                             [](const R& r) {
                               return r.plan.waits ? r.plan.waits->waits.Describe()
                                                   : model::FlatWaitModel(0).Describe();
                             })
      .def_property_readonly("energy_with_lowered_waits_j",
                             [](const R& r) {
                               return r.plan.waits ? r.plan.waits->energy_j[r.plan.chosen]
                                                   : r.plan.chosen_point().energy_j;
                             })
      .def_property_readonly(
          "lowered_waits",
          [](const R& r) { return r.plan.waits ? r.plan.waits->lowered_waits : 0; })
      .def_property_readonly(
          "lowered_wait_s",
          [](const R& r) { return r.plan.waits ? r.plan.waits->lowered_wait_s : 0.0; })
      .def_property_readonly("p_block_w", [](const R& r) { return r.plan.p_block_w; })
      .def_property_readonly("p_block_source", [](const R& r) { return r.plan.p_block_source; })
      .def_property_readonly("solve_seconds", [](const R& r) { return r.plan.solve_seconds; })
      .def_property_readonly("notes", [](const R& r) { return r.plan.notes; })
      .def_property_readonly("frontier",
                             [](const std::shared_ptr<R>& r) { return FrontierView{r}; })
      .def(
          "stage_plan",
          [](const R& r, int stage) {
            if (stage < 0 || stage >= static_cast<int>(r.chosen.stages.size())) {
              throw model::InputError("stage", "stage must be 0.." +
                                                   std::to_string(r.chosen.stages.size() - 1) +
                                                   " (got " + std::to_string(stage) + ")");
            }
            return StagePlanToList(r.chosen.stages[stage]);
          },
          py::arg("stage"))
      .def(
          "head_wait", [](const R& r, int stage) { return HeadWaitOf(r.chosen, stage); },
          py::arg("stage"), kHeadWaitDoc)
      .def(
          "to_json", [](const R& r) { return model::PlanToJson(r.chosen); },
          "The chosen plan as a plan file (what `joulepipe plan` writes as chosen.json).")
      .def(
          "point_json",
          [](const R& r, py::ssize_t i) {
            const auto n = static_cast<py::ssize_t>(r.plan.frontier.points.size());
            if (i < 0) i += n;
            if (i < 0 || i >= n) {
              throw model::InputError("index", "index must be 0.." + std::to_string(n - 1) +
                                                   " (got " + std::to_string(i) + ")");
            }
            return model::PlanToJson(solver::ToPlan(
                r.plan.schedule, r.plan.frontier.points[static_cast<std::size_t>(i)]));
          },
          py::arg("index"), "The plan file of frontier point `index`.")
      .def("__repr__", [](const R& r) {
        const double e0 = r.plan.baseline.energy_j;
        return "<PipelinePlan " + std::string(schedule::KindName(r.plan.request.spec.kind)) + " " +
               std::to_string(r.plan.request.spec.stages) + "x" +
               std::to_string(r.plan.request.spec.microbatches) + ": " +
               std::to_string(r.plan.frontier.points.size()) + " frontier points, saving " +
               std::to_string(e0 > 0 ? 100 * (1 - r.plan.chosen_point().energy_j / e0) : 0.0) +
               " %>";
      });

  m.def("plan_pipeline", &PlanPipelineTask, py::arg("profile"), py::kw_only(), py::arg("stages"),
        py::arg("microbatches"), py::arg("schedule") = "1f1b", py::arg("chunks") = 1,
        py::arg("p_block_w") = py::none(), py::arg("slowdown") = 0.0,
        py::arg("resolution_s") = 1e-3, py::arg("progress") = py::none(),
        py::arg("profile_name") = py::none(), py::arg("least_energy") = false,
        py::arg("energy_budget_j") = py::none(), py::arg("power_budget_w") = py::none(),
        py::arg("host_power_w") = 0.0, py::arg("wait_model") = py::none());
  m.def("evaluate_plan", &EvaluatePlanTask, py::arg("profile"), py::arg("plan_json"), py::kw_only(),
        py::arg("p_block_w") = py::none(), py::arg("plan_name") = "plan");
}

model::Objective ChooseGoalAsKeywords(const model::GoalChoice& choice, double* slowdown) {
  try {
    return model::ChooseGoal(choice, slowdown);
  } catch (const model::InputError& e) {
    static constexpr std::pair<std::string_view, std::string_view> kKeywords[] = {
        {"PlanRequest::slowdown", "slowdown"},
        {"Objective::least_energy", "least_energy"},
        {"Objective::energy_budget_j", "energy_budget_j"},
        {"Objective::power_budget_w", "power_budget_w"},
    };
    throw model::RenameFields(e, kKeywords);
  }
}

}  // namespace joulepipe::python
