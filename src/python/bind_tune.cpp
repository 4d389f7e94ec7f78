// tune(): tune::Tune, the job's configurations with clocks on one envelope
// (what `joulepipe tune` computes), as a dict; the chosen plan as a Plan.
#include <atomic>
#include <string>
#include <utility>

#include <pybind11/stl.h>

#include "cancellable.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/tune/tune.hpp"

namespace joulepipe::python {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

py::dict PointDict(const tune::TuneResult& r, const tune::JobPoint& p) {
  py::dict out;
  out["time_s"] = p.time_s;
  out["energy_j"] = p.energy_j;
  out["saving_pct"] = r.SavingPct(p);
  return out;
}

py::dict ConfigDict(const tune::Candidate& c) {
  py::dict out;
  out["tp"] = c.config.tp;
  out["pp"] = c.config.pp;
  out["dp"] = c.config.dp;
  out["microbatch_size"] = c.config.microbatch_size;
  out["schedule"] = std::string(schedule::KindName(c.config.kind));
  out["chunks"] = c.config.chunks;
  out["microbatches"] = c.microbatches;
  out["text"] = tune::ConfigText(c.config);
  return out;
}

// Parameters in the order of BindTune's py::arg list.
py::dict TuneTask(const std::string& model_id, const std::string& gpu_id, long long gpus, int tp,
                  int pp, int microbatch_size, const std::string& schedule_name, int chunks,
                  int global_batch, int seq_length, const std::string& framework,
                  const std::string& precision, const std::string& recompute,
                  const std::string& keep, int gpus_per_node, int max_chunks,
                  int max_microbatch_size, double memory_margin, double slowdown,
                  double envelope_span, int grid_points, int max_instructions, double dp_gbps,
                  double p2p_gbps, const py::object& progress) {
  tune::TuneRequest request;
  request.gpu = physics::FindGpu(gpu_id);
  request.workload.model = physics::FindTransformer(model_id);
  request.workload.seq_length = seq_length;
  request.workload.framework = physics::ParseFramework(framework);
  request.workload.precision = physics::ParsePrecision(precision);
  request.workload.recompute = physics::ParseRecompute(recompute);
  request.gpus = gpus;
  request.global_batch = global_batch;
  if (tp < 1 || pp < 1 || gpus % (static_cast<long long>(tp) * pp) != 0) {
    throw model::InputError("TuneRequest::current",
                            "TuneRequest::current: gpus must be a multiple of tp x pp (got " +
                                std::to_string(gpus) + " GPUs, tp " + std::to_string(tp) + ", pp " +
                                std::to_string(pp) + ")");
  }
  request.current.tp = tp;
  request.current.pp = pp;
  request.current.dp = static_cast<int>(gpus / (static_cast<long long>(tp) * pp));
  request.current.microbatch_size = microbatch_size;
  if (!schedule::ParseKind(schedule_name, &request.current.kind)) {
    throw model::InputError(
        "Spec::kind",
        "schedule must be 'gpipe', '1f1b' or 'interleaved' (got '" + schedule_name + "')");
  }
  request.current.chunks = chunks;
  request.keep = tune::ParseTuneKeep(keep);
  request.gpus_per_node = gpus_per_node;
  request.max_chunks = max_chunks;
  request.max_microbatch_size = max_microbatch_size;
  request.memory_margin = memory_margin;
  request.slowdown = slowdown;
  request.envelope_span = envelope_span;
  request.grid_points = grid_points;
  request.max_instructions = max_instructions;
  request.dp_gbps = dp_gbps;
  request.p2p_gbps = p2p_gbps;
  tune::CheckTuneRequest(request);
  tune::TuneResult r = RunCancellable<tune::TuneResult>(
      [request](const std::atomic<bool>* cancel, ProgressFn report) {
        tune::TuneRequest q = request;
        q.cancel = cancel;
        q.progress = [report](int index, int of, const std::string& config, double seconds) {
          if (report && seconds < 0) report(("tuning " + config).c_str(), double(index - 1) / of);
        };
        return tune::Tune(q);
      },
      progress);

  const tune::Candidate& now = r.current();
  const tune::Candidate& chosen = r.chosen();
  py::dict out;
  out["figures"] = "simulated (workload model), not measured";
  py::dict current = ConfigDict(now);
  current["full_clocks"] = PointDict(r, now.max_clock);
  current["clocks_only"] = PointDict(r, r.clocks_only.job);
  out["current"] = current;
  py::dict best = ConfigDict(chosen);
  best["full_clocks"] = PointDict(r, chosen.max_clock);
  best["with_plan"] = PointDict(r, r.best.job);
  best["peak_memory_gib"] = chosen.memory.peak_bytes() / kGiB;
  best["headroom_gib"] = chosen.memory.headroom_bytes() / kGiB;
  best["plan"] = solver::ToPlan(schedule::Build(tune::CandidateSpec(r.request, chosen.config)),
                                chosen.frontier.points[r.best.point]);
  out["chosen"] = best;
  const double clocks = r.SavingPct(r.clocks_only.job), total = r.SavingPct(r.best.job);
  py::dict saving;
  saving["total"] = total;
  saving["clocks"] = clocks;
  saving["configuration"] = total - clocks;
  out["saving_pct"] = saving;
  out["target_time_s"] = r.target_s;
  py::list envelope;
  for (const tune::EnvelopePoint& p : r.envelope) {
    py::dict d = PointDict(r, p.job);
    d["config"] = tune::ConfigText(r.candidates[p.candidate].config);
    envelope.append(d);
  }
  out["envelope"] = envelope;
  py::list candidates;
  for (const tune::Candidate& c : r.candidates) {
    py::dict d = ConfigDict(c);
    d["status"] = std::string(tune::StatusName(c.status));
    d["peak_memory_gib"] = c.memory.peak_bytes() / kGiB;
    if (c.max_clock.time_s > 0) d["full_clocks"] = PointDict(r, c.max_clock);
    if (c.at_target) d["at_target"] = PointDict(r, *c.at_target);
    candidates.append(d);
  }
  out["candidates"] = candidates;
  out["solved"] = r.solved;
  out["too_large_gain_bound_pct"] = r.too_large_gain_bound_pct;
  out["cancelled"] = r.cancelled;
  out["seconds"] = r.seconds;
  return out;
}

}  // namespace

void BindTune(py::module_& m) {
  m.def("tune", &TuneTask, py::arg("model"), py::arg("gpu"), py::kw_only(), py::arg("gpus"),
        py::arg("tp") = 8, py::arg("pp") = 8, py::arg("microbatch_size") = 1,
        py::arg("schedule") = "1f1b", py::arg("chunks") = 1, py::arg("global_batch") = 1536,
        py::arg("seq_length") = 0, py::arg("framework") = "megatron", py::arg("precision") = "bf16",
        py::arg("recompute") = "none", py::arg("keep") = "", py::arg("gpus_per_node") = 8,
        py::arg("max_chunks") = 4, py::arg("max_microbatch_size") = 8,
        py::arg("memory_margin") = 0.10, py::arg("slowdown") = 0.0, py::arg("envelope_span") = 0.10,
        py::arg("grid_points") = 60, py::arg("max_instructions") = 4096, py::arg("dp_gbps") = 25.0,
        py::arg("p2p_gbps") = 25.0, py::arg("progress") = py::none());
}

}  // namespace joulepipe::python
