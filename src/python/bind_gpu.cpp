// gpus(): the visible GPUs (gpu::ListVisibleDevices, CUDA_VISIBLE_DEVICES
// rules) with what planning and control need of each.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/gpu/sim_stream.hpp"

namespace joulepipe::python {

namespace {

py::list Gpus() {
  // kList: a GPU in MIG mode is listed (mig_enabled True), not refused.
  const gpu::DeviceList list = gpu::ListVisibleDevices(gpu::MigPolicy::kList);
  py::list out;
  for (const gpu::Device& d : list.devices) {
    py::dict g;
    g["index"] = d.visible_index();
    g["nvml_index"] = d.nvml_index();
    g["name"] = d.name();
    g["uuid"] = d.uuid();
    g["architecture"] = d.architecture();
    g["mig_enabled"] = d.mig_enabled();
    g["supported_sm_mhz"] = d.SupportedSmClocks();
    g["default_sm_mhz"] = d.MaxClock(gpu::ClockDomain::kSm);
    g["has_energy_counter"] = d.HasEnergyCounter();
    // The power limit in force (the lowest of all caps): an average above
    // it over a window is the window's edges, not the GPU (None where NVML
    // does not say).
    g["power_limit_w"] = py::none();
    try {
      const gpu::PowerLimits limits = d.GetPowerLimits();
      const double in_force = limits.enforced_w > 0 ? limits.enforced_w : limits.current_w;
      if (in_force > 0) g["power_limit_w"] = in_force;
    } catch (const std::exception&) {
    }
    out.append(g);
  }
  return out;
}

}  // namespace

void BindGpu(py::module_& m) {
  m.def("gpus", &Gpus,
        "The visible GPUs (CUDA_VISIBLE_DEVICES applies), as dicts. Raises GpuError when NVML "
        "cannot be loaded.");
  m.def(
      "sm_clock_mhz",
      [](int nvml_index) {
        return gpu::DeviceByNvmlIndex(nvml_index).CurrentClock(gpu::ClockDomain::kSm);
      },
      py::arg("nvml_index"),
      "The SM clock the GPU with this NVML index runs now (MHz), as NVML reports it: under a "
      "power or thermal cap it is lower than the clock locked. Raises GpuError.");
  m.def(
      "nvml_simulated", [] { return gpu::Nvml().simulated; },
      "Whether the loaded NVML library is joulepipe's simulated one (its figures are simulated, "
      "not measured). Raises GpuError when NVML cannot be loaded.");
  m.def("nvml_methodology", &gpu::NvmlMethodology,
        "One sentence: where the GPU figures come from (the NVML library, or the simulated one).");
  py::class_<gpu::SimulatedStream>(
      m, "SimulatedStream",
      "A stream of the simulated GPU (the simulated NVML library only): emulated kernels run "
      "asynchronously to the host, their duration and power following the SM clock in force "
      "while they run (docs/sim-nvml.md). Raises GpuError without the simulated library.")
      .def(py::init<unsigned, unsigned>(), py::arg("nvml_index"), py::arg("depth") = 0)
      .def(
          "launch",
          [](gpu::SimulatedStream& s, double seconds, double compute_fraction, double activity) {
            py::gil_scoped_release release;  // waits when the launch queue is full
            s.Launch(seconds, compute_fraction, activity);
          },
          py::arg("seconds_at_max_clock"), py::arg("compute_fraction") = 1.0,
          py::arg("activity") = 1.0,
          "Queues a kernel taking this long at the GPU's highest clock; returns at once unless "
          "the launch queue is full.")
      .def(
          "synchronize",
          [](gpu::SimulatedStream& s) {
            py::gil_scoped_release release;
            s.Synchronize();
          },
          "Waits until the device has run everything queued.")
      .def_property_readonly(
          "handle",
          [](const gpu::SimulatedStream& s) {
            return reinterpret_cast<std::uintptr_t>(s.handle());
          },
          "The stream as the CUDA driver names it (an int, as torch's cuda_stream).");
}

}  // namespace joulepipe::python
