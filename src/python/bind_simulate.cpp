// simulate(): sim::SimulateJob, the data-parallel job simulated under the
// baseline and joulepipe policies, as a dict of figures.
#include <atomic>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/stl.h>

#include "cancellable.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/wait_model.hpp"
#include "joulepipe/sim/simulate_job.hpp"
#include "plan_inputs.hpp"

namespace joulepipe::python {

namespace {

py::dict ResultDict(const sim::SimulationResult& r) {
  py::dict out;
  out["time_s"] = r.TotalTime();
  out["energy_j"] = r.TotalEnergy();
  out["mean_time_s"] = r.MeanTime();
  out["mean_energy_j"] = r.MeanEnergy();
  return out;
}

py::dict PointDict(double time_s, double energy_j) {
  py::dict out;
  out["time_s"] = time_s;
  out["energy_j"] = energy_j;
  return out;
}

// Parameters in the order of BindSimulate's py::arg list (pybind11 names them
// by position).
py::dict SimulateTask(const py::handle& profile_arg, int stages, int microbatches,
                      const std::string& schedule, int chunks, std::optional<double> p_block_w,
                      int pipelines, int gpus_per_stage, int iterations, double p2p_latency_s,
                      double allreduce_s, int straggler_pipeline, double straggler_slowdown,
                      int straggler_from_iteration, int straggler_for_iterations,
                      int straggler_period, double clock_variability, double stall_probability,
                      double stall_s, std::uint64_t seed, const std::string& detection,
                      int detection_lag, double resolution_s, const py::object& wait_model,
                      const py::object& progress, int checkpoint_every, double checkpoint_s) {
  sim::SimulateRequest request;
  request.spec = SpecFrom(schedule, stages, microbatches, chunks);
  request.p_block_w = p_block_w;
  request.job.pipelines = pipelines;
  request.job.gpus_per_stage = gpus_per_stage;
  request.job.iterations = iterations;
  request.job.p2p_latency_s = p2p_latency_s;
  request.job.allreduce_s = allreduce_s;
  request.job.straggler.pipeline = straggler_pipeline;
  request.job.straggler.slowdown = straggler_slowdown;
  request.job.straggler.from_iteration = straggler_from_iteration;
  request.job.straggler.for_iterations = straggler_for_iterations;
  request.job.straggler.period = straggler_period;
  request.job.clock_variability = clock_variability;
  request.job.stall_probability = stall_probability;
  request.job.stall_s = stall_s;
  request.job.checkpoint_every = checkpoint_every;
  request.job.checkpoint_s = checkpoint_s;
  request.job.seed = seed;
  if (detection == "oracle") {
    request.detection = sim::Detection::kOracle;
  } else if (detection == "measured") {
    request.detection = sim::Detection::kMeasured;
  } else {
    throw model::InputError(
        "SimulateRequest::detection",
        "SimulateRequest::detection must be 'oracle' or 'measured' (got '" + detection + "')");
  }
  request.detection_lag = detection_lag;
  request.resolution_s = resolution_s;
  if (!wait_model.is_none())
    request.job.waits = model::ReadWaitModelFile(py::str(wait_model).cast<std::string>());
  request.profile_name = ProfileName(profile_arg);
  sim::CheckSimulateRequest(request);
  const model::RowRuleResult rows = PlannableFrom(profile_arg);  // as `joulepipe simulate`
  const model::Profile& profile = rows.profile;
  sim::SimulateOutcome o = RunCancellable<sim::SimulateOutcome>(
      [&profile, request](const std::atomic<bool>* cancel, ProgressFn report) {
        sim::SimulateRequest r = request;
        r.cancel = cancel;
        r.progress = std::move(report);
        return sim::SimulateJob(profile, r);
      },
      progress);
  py::dict out;
  out["gpus"] = o.gpus();
  out["iterations"] = o.request.job.iterations;
  out["p_block_w"] = o.request.job.p_block_w;
  out["p_block_source"] = o.p_block_source;
  out["max_clock"] = PointDict(o.max_clock.time_s, o.max_clock.energy_j);
  out["intrinsic"] = PointDict(o.intrinsic.time_s, o.intrinsic.energy_j);
  out["has_straggler"] = o.has_straggler();
  if (o.has_straggler()) {
    out["straggler_plan"] = PointDict(o.straggler_plan.time_s, o.straggler_plan.energy_j);
    out["straggler_target_s"] = o.straggler_target_s;
  } else {
    out["straggler_plan"] = py::none();
    out["straggler_target_s"] = py::none();
  }
  out["frontier_points"] = o.frontier_points;
  out["solve_seconds"] = o.solve_seconds;
  out["simulate_seconds"] = o.simulate_seconds;
  out["baseline"] = ResultDict(o.baseline);
  out["joulepipe"] = ResultDict(o.joulepipe);
  double lowered = 0;
  for (const sim::IterationResult& it : o.joulepipe.iterations) lowered += it.lowered_wait_s;
  out["joulepipe"]["lowered_wait_s"] = lowered;  // whole job, all iterations (GPU-seconds)
  out["wait_model"] = o.request.job.waits.Describe();
  const double e0 = o.baseline.TotalEnergy();
  out["saving_pct"] = e0 > 0 ? 100 * (e0 - o.joulepipe.TotalEnergy()) / e0 : 0.0;
  std::vector<std::string> notes = rows.notes;
  notes.insert(notes.end(), o.notes.begin(), o.notes.end());
  out["notes"] = notes;
  return out;
}

}  // namespace

void BindSimulate(py::module_& m) {
  m.def("simulate", &SimulateTask, py::arg("profile"), py::kw_only(), py::arg("stages"),
        py::arg("microbatches"), py::arg("schedule") = "1f1b", py::arg("chunks") = 1,
        py::arg("p_block_w") = py::none(), py::arg("pipelines") = 1, py::arg("gpus_per_stage") = 1,
        py::arg("iterations") = 1, py::arg("p2p_latency_s") = 0.0, py::arg("allreduce_s") = 0.0,
        py::arg("straggler_pipeline") = -1, py::arg("straggler_slowdown") = 1.0,
        py::arg("straggler_from_iteration") = 0, py::arg("straggler_for_iterations") = 0,
        py::arg("straggler_period") = 0, py::arg("clock_variability") = 0.0,
        py::arg("stall_probability") = 0.0, py::arg("stall_s") = 0.0, py::arg("seed") = 1,
        py::arg("detection") = "oracle", py::arg("detection_lag") = 0,
        py::arg("resolution_s") = 5e-3, py::arg("wait_model") = py::none(),
        py::arg("progress") = py::none(), py::arg("checkpoint_every") = 0,
        py::arg("checkpoint_s") = 0.0);
}

}  // namespace joulepipe::python
