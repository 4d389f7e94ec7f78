// joulepipe._core.RoundRow: one rank's row of an embedded-coordination
// round (protocol/round_row.hpp), so the Python package never numbers the
// slots itself.
#include <vector>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "joulepipe/protocol/round_row.hpp"

namespace joulepipe::python {

void BindRoundRow(py::module_& m) {
  using protocol::RoundRow;
  m.attr("ROUND_ROW_FLOATS") = protocol::kRoundRowFloats;
  py::class_<RoundRow>(m, "RoundRow",
                       "One rank's row of a coordination round (protocol::RoundRow): what it "
                       "sends, as numbers, through the side group's all-gather.")
      .def(py::init([](std::int64_t iteration, double pipeline_time_s, bool profile_shared,
                       int running_version, int announced_version, bool planning_failed,
                       int sweep_iterations_left) {
             RoundRow r;
             r.iteration = iteration;
             r.pipeline_time_s = pipeline_time_s;
             r.profile_shared = profile_shared;
             r.running_version = running_version;
             r.announced_version = announced_version;
             r.planning_failed = planning_failed;
             r.sweep_iterations_left = sweep_iterations_left;
             return r;
           }),
           py::kw_only(), py::arg("iteration") = 0, py::arg("pipeline_time_s") = 0.0,
           py::arg("profile_shared") = false, py::arg("running_version") = 0,
           py::arg("announced_version") = 0, py::arg("planning_failed") = false,
           py::arg("sweep_iterations_left") = 0)
      .def_readwrite("iteration", &RoundRow::iteration)
      .def_readwrite("pipeline_time_s", &RoundRow::pipeline_time_s)
      .def_readwrite("profile_shared", &RoundRow::profile_shared)
      .def_readwrite("running_version", &RoundRow::running_version)
      .def_readwrite("announced_version", &RoundRow::announced_version)
      .def_readwrite("planning_failed", &RoundRow::planning_failed)
      .def_readwrite("sweep_iterations_left", &RoundRow::sweep_iterations_left)
      .def("to_floats",
           [](const RoundRow& r) {
             const auto f = protocol::RoundRowToFloats(r);
             return std::vector<double>(f.begin(), f.end());
           })
      .def_static(
          "from_floats",
          [](const std::vector<double>& floats) { return protocol::RoundRowFromFloats(floats); },
          py::arg("floats"),
          "Reads a row another rank sent; InputError (field 'RoundRow::<member>') for one "
          "of another shape.");
}

}  // namespace joulepipe::python
