// Profiling: candidate_clocks, InSituProfiler, ProfileReport (to_dict /
// from_dict / pickle, so reports travel between ranks), merge_reports.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/runtime/profiler.hpp"

namespace joulepipe::python {

namespace {

using runtime::ProfileReport;
using runtime::ProfileRow;

py::dict RowToDict(const ProfileRow& r) {
  py::dict d;
  d["stage"] = r.stage;
  d["kind"] = std::string(model::KindName(r.kind));
  d["mhz"] = r.mhz;
  d["requested_mhz"] = r.requested_mhz;
  d["time_s"] = r.time_s;
  d["energy_j"] = r.energy_j;
  d["samples"] = r.samples;
  d["time_spread"] = r.time_spread;
  d["energy_spread"] = r.energy_spread;
  d["confidence"] = r.confidence;
  d["approximate"] = r.approximate;
  return d;
}

py::list RowsToList(const ProfileReport& report) {
  py::list rows;
  for (const ProfileRow& r : report.rows) rows.append(RowToDict(r));
  return rows;
}

py::dict ReportToDict(const ProfileReport& r) {
  py::dict d;
  d["rows"] = RowsToList(r);
  d["p_block_w"] = r.p_block_w;
  d["p_block_samples"] = r.p_block_samples;
  d["iterations"] = r.iterations;
  d["max_confidence"] = r.max_confidence;
  d["max_time_spread"] = r.max_time_spread;
  d["approximate_rows"] = r.approximate_rows;
  d["gpu"] = r.gpu;
  d["notes"] = r.notes;
  return d;
}

// d[key] as T; InputError naming "ProfileReport.<where><key>" when missing or
// of another type.
template <typename T>
T Get(const py::dict& d, const char* key, const std::string& where) {
  const std::string field = "ProfileReport." + where + key;
  if (!d.contains(key)) throw model::InputError(field, field + " is missing");
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    throw model::InputError(
        field, field + " has the wrong type (got " + std::string(py::repr(d[key])) + ")");
  }
}

ProfileReport ReportFromDict(const py::dict& d) {
  ProfileReport r;
  r.p_block_w = Get<double>(d, "p_block_w", "");
  r.p_block_samples = Get<int>(d, "p_block_samples", "");
  r.iterations = Get<int>(d, "iterations", "");
  r.max_confidence = Get<double>(d, "max_confidence", "");
  r.max_time_spread = Get<double>(d, "max_time_spread", "");
  r.approximate_rows = Get<int>(d, "approximate_rows", "");
  r.gpu = Get<std::string>(d, "gpu", "");
  if (d.contains("notes")) r.notes = Get<std::vector<std::string>>(d, "notes", "");
  const py::list rows = Get<py::list>(d, "rows", "");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string where = "rows[" + std::to_string(i) + "].";
    if (!py::isinstance<py::dict>(rows[i])) {
      throw model::InputError(
          "ProfileReport." + where.substr(0, where.size() - 1),
          "ProfileReport." + where.substr(0, where.size() - 1) + " must be a dict");
    }
    const py::dict row = rows[i].cast<py::dict>();
    ProfileRow p;
    p.stage = Get<int>(row, "stage", where);
    const std::string kind = Get<std::string>(row, "kind", where);
    if (!model::ParseKind(kind, &p.kind)) {
      throw model::InputError("ProfileReport." + where + "kind",
                              "ProfileReport." + where +
                                  "kind must be 'forward' or 'backward' "
                                  "(got '" +
                                  kind + "')");
    }
    p.mhz = Get<int>(row, "mhz", where);
    p.requested_mhz = row.contains("requested_mhz")
                          ? Get<std::vector<int>>(row, "requested_mhz", where)
                          : std::vector<int>{p.mhz};
    p.time_s = Get<double>(row, "time_s", where);
    p.energy_j = Get<double>(row, "energy_j", where);
    p.samples = Get<int>(row, "samples", where);
    p.time_spread = Get<double>(row, "time_spread", where);
    p.energy_spread = Get<double>(row, "energy_spread", where);
    p.confidence = Get<double>(row, "confidence", where);
    p.approximate = Get<bool>(row, "approximate", where);
    r.rows.push_back(p);
  }
  return r;
}

std::shared_ptr<runtime::InSituProfiler> MakeProfiler(int stage, std::vector<int> clocks,
                                                      int samples_per_clock, int warmup_iterations,
                                                      int stop_after_rises,
                                                      const std::string& gpu) {
  runtime::ProfilerOptions options;
  options.stage = stage;
  options.clocks = std::move(clocks);
  options.samples_per_clock = samples_per_clock;
  options.warmup_iterations = warmup_iterations;
  options.stop_after_rises = stop_after_rises;
  options.gpu = gpu;
  return std::make_shared<runtime::InSituProfiler>(std::move(options));
}

}  // namespace

void BindProfiler(py::module_& m) {
  m.def("candidate_clocks", &runtime::CandidateClocks, py::arg("supported"),
        py::arg("floor_fraction") = 0.6, py::arg("stride_mhz") = 0, py::arg("floor_mhz") = 0);

  py::class_<ProfileReport>(m, "ProfileReport", "What an in-situ profiler measured.")
      .def_readonly("p_block_w", &ProfileReport::p_block_w)
      .def_readonly("p_block_samples", &ProfileReport::p_block_samples)
      .def_readonly("iterations", &ProfileReport::iterations)
      .def_readonly("max_confidence", &ProfileReport::max_confidence)
      .def_readonly("max_time_spread", &ProfileReport::max_time_spread)
      .def_readonly("approximate_rows", &ProfileReport::approximate_rows)
      .def_readonly("gpu", &ProfileReport::gpu)
      .def_readonly("notes", &ProfileReport::notes)
      .def_property_readonly("rows", &RowsToList)
      .def("to_dict", &ReportToDict)
      .def_static("from_dict", &ReportFromDict, py::arg("d"))
      .def("to_csv", &runtime::ProfileCsv)
      .def(py::pickle(&ReportToDict, &ReportFromDict))
      .def("__repr__", [](const ProfileReport& r) {
        return "<ProfileReport " + std::to_string(r.rows.size()) + " rows, P_block " +
               std::to_string(r.p_block_w) + " W, " + std::to_string(r.iterations) + " iterations>";
      });

  py::class_<runtime::InSituProfiler, std::shared_ptr<runtime::InSituProfiler>>(
      m, "InSituProfiler", "Sweeps one stage's instructions over clocks during training.")
      .def(py::init(&MakeProfiler), py::arg("stage"), py::arg("clocks"),
           py::arg("samples_per_clock") = 0, py::arg("warmup_iterations") = 1,
           py::arg("stop_after_rises") = 3, py::arg("gpu") = "")
      .def_property_readonly("done", &runtime::InSituProfiler::done)
      .def_property_readonly("iterations", &runtime::InSituProfiler::iterations)
      .def_property_readonly("iterations_left", &runtime::InSituProfiler::IterationsLeft,
                             "The fewest iterations the sweep still needs (0 once done).")
      .def("report", &runtime::InSituProfiler::Report);
  m.def(
      "sweep_iterations",
      [](std::vector<int> clocks, int warmup_iterations) {
        runtime::ProfilerOptions options;
        options.clocks = std::move(clocks);
        options.warmup_iterations = warmup_iterations;
        const runtime::SweepLength length = runtime::SweepIterations(options);
        return py::make_tuple(length.least, length.most);
      },
      py::arg("clocks"), py::arg("warmup_iterations") = 1,
      "(least, most) iterations a sweep of these clocks takes (runtime::SweepIterations).");

  m.def("merge_reports", &runtime::MergeReports, py::arg("reports"));
  m.def(
      "unmeasured_p_block",
      [](const runtime::ProfileReport& merged,
         const std::string& gpu) -> std::optional<std::pair<double, std::string>> {
        const std::optional<runtime::PBlockFallback> f = runtime::UnmeasuredPBlock(merged, gpu);
        if (!f) return std::nullopt;
        return std::make_pair(f->watts, f->note);
      },
      py::arg("merged"), py::arg("gpu"),
      "(watts, note): the catalogue's P_block for `gpu` when `merged` measured none "
      "(runtime::UnmeasuredPBlock); None when it did or the GPU is not in the catalogue.");
}

}  // namespace joulepipe::python
