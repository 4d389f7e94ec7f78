// The pieces of the Python extension module joulepipe._core (module.cpp
// calls each Bind* once, in this order; later ones use the types earlier ones
// registered, e.g. Kind) and the conversions they share.
//
// Conventions (python/joulepipe/_core.pyi is the user-facing contract):
//   * C++ exceptions become Python ones in errors.cpp: model::InputError ->
//     InputError(ValueError) with .field; gpu::GpuError -> GpuError;
//     coord::JobStateError -> JobStateError; model::Cancelled -> Cancelled.
//   * Errors found by the binding itself (a bad dict, a stage out of range)
//     are model::InputError too, naming the Python argument or key as field.
//   * Calls that can take long release the GIL around the library call only;
//     Python objects are never touched without it.
#pragma once

#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/profile_rows.hpp"

namespace joulepipe::python {

namespace py = pybind11;

void BindErrors(py::module_& m);
void BindProfile(py::module_& m);
void BindGpu(py::module_& m);
void BindMonitor(py::module_& m);
void BindProfiler(py::module_& m);
void BindAgent(py::module_& m);
void BindDeviceMeter(py::module_& m);
void BindPlan(py::module_& m);
void BindSimulate(py::module_& m);
void BindTune(py::module_& m);
void BindPowerLimits(py::module_& m);
void BindCoord(py::module_& m);
void BindRoundRow(py::module_& m);
void BindCoordinatedPlan(py::module_& m);
void BindCoordClient(py::module_& m);

// A stage plan as Python sees it: [(Kind, microbatch, chunk, mhz), ...] in
// execution order.
py::list StagePlanToList(const std::vector<model::PlannedInstruction>& plan);
// The reverse; `stage` fills Instruction::stage. Throws model::InputError
// naming `field` for an entry that is not a 4-sequence of that shape.
std::vector<model::PlannedInstruction> StagePlanFromList(const py::handle& list, int stage,
                                                         const char* field);

// A profile argument: a joulepipe.Profile (returned as is) or the path of a
// profile CSV (read into *storage; a missing file is FileNotFoundError).
// Throws model::InputError naming "profile" for anything else.
const model::Profile& ProfileFrom(const py::handle& profile, model::Profile* storage);
// How messages name that argument: its path, or "the profile".
std::string ProfileName(const py::handle& profile);
// The profile argument as every call plans or replays it: ProfileFrom, then
// the one rule for its rows (model::PlannableRows), as the CLI reads a file.
model::RowRuleResult PlannableFrom(const py::handle& profile);

// Seconds since the Unix epoch (system clock): the `now` of coord::Job calls.
double UnixNow();

}  // namespace joulepipe::python
