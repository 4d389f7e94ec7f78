// Measurement: Monitor, Measurement, StepLogger (monitor::*).
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/output_files.hpp"
#include "joulepipe/monitor/command_window.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/monitor/power_trace.hpp"
#include "joulepipe/monitor/step_logger.hpp"
#include "joulepipe/sim/waveform.hpp"

namespace joulepipe::python {

namespace {

std::unique_ptr<monitor::Monitor> MakeMonitor(std::optional<std::vector<int>> gpus, bool cpu,
                                              double counter_period_s, double sampling_period_s,
                                              bool short_windows_sampled) {
  monitor::MonitorOptions options;
  options.gpus = std::move(gpus);
  options.cpu = cpu ? monitor::CpuMode::kIfAvailable : monitor::CpuMode::kOff;
  options.counter_period_s = counter_period_s;
  options.sampling_period_s = sampling_period_s;
  options.short_windows_sampled = short_windows_sampled;
  return std::make_unique<monitor::Monitor>(options);
}

std::unique_ptr<monitor::StepLogger> MakeStepLogger(monitor::Monitor& monitor,
                                                    const std::string& path,
                                                    const std::string& format,
                                                    double tokens_per_step) {
  monitor::StepLoggerOptions options;
  options.path = path;
  if (format == "csv") {
    options.format = monitor::LogFormat::kCsv;
  } else if (format == "jsonl") {
    options.format = monitor::LogFormat::kJsonl;
  } else {
    throw model::InputError(
        "StepLoggerOptions::format",
        "StepLoggerOptions::format must be 'csv' or 'jsonl' (got '" + format + "')");
  }
  options.tokens_per_step = tokens_per_step;
  return std::make_unique<monitor::StepLogger>(monitor, std::move(options));
}

py::dict RecordDict(const monitor::StepRecord& r) {
  py::dict out;
  out["step"] = r.step;
  out["time_s"] = r.measurement.duration_s;
  out["gpu_energy_j"] = r.measurement.gpu_energy_j;
  out["energy_j"] = r.energy_j();
  out["avg_power_w"] = r.avg_power_w;
  out["tokens"] = r.tokens;
  out["tokens_per_s"] = r.tokens_per_s;
  out["j_per_token"] = r.j_per_token;
  out["approximate"] = r.measurement.approximate();
  return out;
}

py::dict SummaryDict(const monitor::StepSummary& s) {
  py::dict out;
  out["steps"] = s.steps;
  out["time_s"] = s.time_s;
  out["gpu_energy_j"] = s.gpu_energy_j;
  out["energy_j"] = s.energy_j;
  out["tokens"] = s.tokens;
  out["approximate_steps"] = s.approximate_steps;
  out["avg_power_w"] = s.avg_power_w();
  out["tokens_per_s"] = s.tokens_per_s();
  out["j_per_token"] = s.j_per_token();
  return out;
}

// joulepipe.measure_command: the CLI's `measure` supervisor (RunInWindow).
// The GIL is released while the command runs; the signals are taken (so a
// Ctrl-C goes to the command, whose exit code, 130, comes back).
py::dict MeasureCommand(const std::vector<std::string>& command,
                        std::optional<std::vector<int>> gpus, bool cpu, double interval_ms) {
  if (command.empty()) {
    throw model::InputError("command",
                            "command must name a program and its arguments, e.g. "
                            "['python', 'train.py']");
  }
  if (!(interval_ms >= 1)) {
    throw model::InputError("MonitorOptions::sampling_period_s",
                            "interval_ms must be >= 1 (got " + std::to_string(interval_ms) + ")");
  }
  monitor::CommandRun run;
  std::string scope, methodology;
  {
    py::gil_scoped_release release;
    const std::unique_ptr<monitor::TakenSignals> signals = monitor::TakeSignalsForCommand();
    monitor::MonitorOptions options;
    options.gpus = std::move(gpus);
    options.cpu = cpu ? monitor::CpuMode::kRequired : monitor::CpuMode::kIfAvailable;
    options.sampling_period_s = interval_ms * 1e-3;
    options.tolerate_gpu_failures = true;
    monitor::Monitor meter(options);  // after the signals: its thread inherits the mask
    scope = meter.scope();
    methodology = meter.methodology();
    run = monitor::RunInWindow(meter, command, *signals);
  }
  py::dict out;
  out["started"] = run.started;
  out["not_run"] = run.not_run;
  out["exit_code"] = run.exit_code;
  out["exit_note"] = run.exit_note;
  out["measurement"] = run.measurement;
  out["measure_error"] = run.measure_error;
  out["scope"] = scope;
  out["methodology"] = methodology;
  return out;
}

}  // namespace

void BindMonitor(py::module_& m) {
  using monitor::Measurement;
  py::class_<Measurement>(m, "Measurement", "One measured window (read-only).")
      .def_property_readonly("name", [](const Measurement& x) { return x.name; })
      .def_property_readonly("duration_s", [](const Measurement& x) { return x.duration_s; })
      .def_property_readonly("gpu_energy_j", [](const Measurement& x) { return x.gpu_energy_j; })
      .def_property_readonly("total_energy_j", &Measurement::total_energy_j)
      .def_property_readonly("approximate", &Measurement::approximate)
      .def_property_readonly("gpus",
                             [](const Measurement& x) {
                               std::vector<std::pair<int, double>> out;
                               for (const monitor::GpuEnergy& g : x.gpus) {
                                 out.emplace_back(g.index, g.energy_j);
                               }
                               return out;
                             })
      .def_property_readonly("gpu_sources",
                             [](const Measurement& x) {
                               std::vector<std::string> out;
                               for (const monitor::GpuEnergy& g : x.gpus) {
                                 out.emplace_back(monitor::EnergySourceName(g.source));
                               }
                               return out;
                             })
      .def_property_readonly("cpu_energy_j",
                             [](const Measurement& x) -> std::optional<double> {
                               if (!x.cpu_measured) return std::nullopt;
                               return x.cpu_energy_j;
                             })
      .def_property_readonly("dram_energy_j",
                             [](const Measurement& x) -> std::optional<double> {
                               if (!x.cpu_measured) return std::nullopt;
                               for (const monitor::CpuEnergy& c : x.cpus) {
                                 if (c.has_dram) return x.dram_energy_j;
                               }
                               return std::nullopt;
                             })
      .def_property_readonly("methodology", [](const Measurement& x) { return x.methodology; })
      .def("__repr__", [](const Measurement& x) {
        return "<Measurement " + x.name + ": " + std::to_string(x.duration_s) + " s, " +
               std::to_string(x.total_energy_j()) + " J>";
      });

  m.def("measure_command", &MeasureCommand, py::arg("command"), py::kw_only(),
        py::arg("gpus") = py::none(), py::arg("cpu") = false, py::arg("interval_ms") = 100.0,
        "Runs a command inside one measurement window, as `joulepipe measure` does: its own "
        "process group, signals forwarded, its exit code kept. Returns a dict (started, "
        "not_run, exit_code, exit_note, measurement, measure_error, scope, methodology).");

  py::class_<monitor::Monitor>(m, "Monitor", "Named energy-measurement windows over GPUs (NVML).")
      .def(py::init(&MakeMonitor), py::arg("gpus") = py::none(), py::arg("cpu") = false,
           py::arg("counter_period_s") = 0.1, py::arg("sampling_period_s") = 0.1,
           py::arg("short_windows_sampled") = false)
      .def(
          "begin", [](monitor::Monitor& m, const std::string& name) { m.Begin(name); },
          py::arg("name"))
      .def(
          "end", [](monitor::Monitor& m, const std::string& name) { return m.End(name); },
          py::arg("name"))
      .def("is_open", &monitor::Monitor::IsOpen, py::arg("name"))
      .def_property_readonly("gpu_indices",
                             [](const monitor::Monitor& m) {
                               std::vector<int> out;
                               for (int i = 0; i < m.gpu_count(); ++i)
                                 out.push_back(m.gpu_index(i));
                               return out;
                             })
      .def_property_readonly("methodology", &monitor::Monitor::methodology)
      .def_property_readonly("scope", &monitor::Monitor::scope);

  py::class_<monitor::StepLogger>(m, "StepLogger", "Per-step energy log over a Monitor.")
      .def(py::init(&MakeStepLogger), py::arg("monitor"), py::arg("path") = "",
           py::arg("format") = "csv", py::arg("tokens_per_step") = 0.0, py::keep_alive<1, 2>())
      .def("begin_step", &monitor::StepLogger::BeginStep)
      .def(
          "end_step",
          [](monitor::StepLogger& l, double tokens) { return RecordDict(l.EndStep(tokens)); },
          py::arg("tokens") = -1.0)
      .def("summary", [](const monitor::StepLogger& l) { return SummaryDict(l.summary()); })
      .def("format_summary", &monitor::StepLogger::FormatSummary);

  py::class_<monitor::PowerTrace>(m, "PowerTrace",
                                  "One GPU's power over time, recorded on a thread of its own "
                                  "(monitor/power_trace.hpp); join ranks' traces with "
                                  "`joulepipe power --join`.")
      .def(py::init([](int nvml_index, double interval_s, double duration_s) {
             monitor::PowerTraceOptions o;
             o.interval_s = interval_s;
             o.duration_s = duration_s;
             return std::make_unique<monitor::PowerTrace>(
                 monitor::NvmlGpuMeterByNvmlIndex(nvml_index), o);
           }),
           py::arg("nvml_index"), py::kw_only(), py::arg("interval_s") = 0.01,
           py::arg("duration_s") = 60.0)
      .def("mark_step_end", &monitor::PowerTrace::MarkStepEnd, py::arg("iteration"))
      .def_property_readonly("done", &monitor::PowerTrace::done)
      .def(
          "write",
          [](monitor::PowerTrace& t, const std::filesystem::path& path, int rank,
             const std::string& gpu) {
            monitor::PowerTraceData d;
            {
              py::gil_scoped_release release;
              d = t.Finish(rank, gpu);
              model::WriteFileAtomically(path, monitor::PowerTraceToJson(d));
            }
            py::dict out;
            out["samples"] = d.t_s.size();
            out["read_errors"] = d.read_errors;
            out["step_ends"] = d.step_ends.size();
            out["seconds"] = d.t_s.empty() ? 0.0 : d.t_s.back() - d.t_s.front();
            return out;
          },
          py::arg("path"), py::arg("rank"), py::arg("gpu") = "",
          "Stops recording and writes the trace (JSON, atomically); returns samples, "
          "read_errors, step_ends, seconds.");

  m.def(
      "join_power_traces",
      [](const std::vector<std::filesystem::path>& paths, bool align_on_steps) {
        std::vector<monitor::PowerTraceData> traces;
        for (const std::filesystem::path& path : paths) {
          traces.push_back(monitor::ReadPowerTraceFile(path.string()));
        }
        const monitor::JoinedTrace j = monitor::JoinPowerTraces(traces, align_on_steps);
        // What `power --join` says of it (sim::MeasuredGridOptions).
        sim::Waveform wave;
        wave.dt_s = j.dt_s;
        wave.gpu_w = j.total_w;
        wave.end_s = j.dt_s * static_cast<double>(j.total_w.size());
        const sim::GridMetrics g = sim::MeasureGrid(wave, sim::MeasuredGridOptions(j.dt_s));
        py::dict grid;
        grid["peak_w"] = g.peak_w;
        grid["trough_w"] = g.trough_w;
        grid["mean_w"] = g.mean_w;
        grid["swing_w"] = g.swing_w;
        grid["ramp_w_per_s"] = g.ramp_w_per_s;
        grid["band_rms_w"] = g.band_rms_w;
        grid["energy_j"] = g.energy_j;
        py::dict out;
        out["dt_s"] = j.dt_s;
        out["start_unix_s"] = j.start_unix_s;
        out["total_w"] = j.total_w;
        out["ranks"] = j.ranks;
        out["offset_s"] = j.offset_s;
        out["common_steps"] = j.common_steps;
        out["rank_w"] = j.rank_w;
        out["grid"] = grid;
        return out;
      },
      py::arg("paths"), py::kw_only(), py::arg("align_on_steps") = true,
      "`joulepipe power --join` as a call: the ranks' power traces (power_trace=) joined into "
      "the job's power on their step ends. Returns dt_s, start_unix_s, total_w (per bin), "
      "ranks, offset_s and common_steps (per trace, in the order given), rank_w, and grid "
      "(peak_w, trough_w, mean_w, swing_w, ramp_w_per_s, band_rms_w, energy_j).");
}

}  // namespace joulepipe::python
