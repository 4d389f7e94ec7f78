// PYBIND11_MODULE(_core): the extension module joulepipe._core. Its Python
// contract, with a docstring per name, is python/joulepipe/_core.pyi.
#include <string>

#include "bindings.hpp"
#include "joulepipe/model/version.hpp"

PYBIND11_MODULE(_core, m) {
  namespace python = joulepipe::python;
  m.doc() =
      "joulepipe's C++ library: GPU listing, energy measurement, the per-rank runtime agent, "
      "in-situ profiling, pipeline planning and the coordination policy.";
  m.attr("version") = std::string(joulepipe::model::Version());
  python::BindErrors(m);
  python::BindPlan(m);  // registers Kind first: later signatures name it
  python::BindProfile(m);
  python::BindSimulate(m);
  python::BindTune(m);
  python::BindPowerLimits(m);
  python::BindGpu(m);
  python::BindMonitor(m);
  python::BindProfiler(m);
  python::BindAgent(m);
  python::BindDeviceMeter(m);
  python::BindCoord(m);
  python::BindRoundRow(m);
  python::BindCoordinatedPlan(m);
  python::BindCoordClient(m);
}
