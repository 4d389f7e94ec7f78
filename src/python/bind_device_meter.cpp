// joulepipe._core.StepMeter: a step's time and energy where the GPU is
// (runtime::DeviceMeter over the training's stream), for the session's
// iteration lines. Python marks each step's begin and end on the stream and
// takes the steps the device has finished; nothing waits for the GPU.
#include <cstdint>
#include <memory>
#include <string>

#include "bindings.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/runtime/device_meter.hpp"

namespace joulepipe::python {

namespace {

class StepMeter {
 public:
  StepMeter(std::uintptr_t stream, int nvml_index, double poll_period_s) {
    if (!(poll_period_s > 0 && poll_period_s <= 0.1)) {
      throw model::InputError("poll_period_s",
                              "poll_period_s must be above 0 and at most 0.1 s (got " +
                                  std::to_string(poll_period_s) + ")");
    }
    std::shared_ptr<monitor::GpuMeter> gpu = monitor::NvmlGpuMeterByNvmlIndex(nvml_index);
    runtime::DeviceMeterOptions options;
    options.poll_period_s = poll_period_s;
    // A step's line takes the counter only where the monitor would call it
    // exact (monitor.hpp): below that, the samples taken while it ran.
    options.counter_periods = monitor::kCounterPeriodsForExact;
    std::string why;
    meter_ = runtime::DeviceMeter::Open(reinterpret_cast<gpu::CudaStream>(stream), std::move(gpu),
                                        options, &why);
    if (!meter_) throw model::InputError("stream", "cannot measure on the stream: " + why);
  }

  bool Mark(bool begin, std::uint32_t tag) {
    runtime::Point point;
    point.type = begin ? runtime::Point::kStepBegin : runtime::Point::kStepEnd;
    point.tag = tag;
    return meter_->Mark(point);
  }

  // Each finished step since the last call: (tag, seconds, joules, counter),
  // `counter` true when the energy is the counter's delta (else samples).
  py::list Take() {
    py::list out;
    runtime::DeviceMeter::Span span;
    while (meter_->Take(&span)) {
      if (span.from.type != runtime::Point::kStepBegin ||
          span.to.type != runtime::Point::kStepEnd || span.from.tag != span.to.tag) {
        continue;  // between two steps
      }
      out.append(py::make_tuple(span.from.tag, span.seconds, span.joules, !span.approximate));
    }
    return out;
  }

  bool CaughtUp(double max_wait_s) {
    py::gil_scoped_release release;
    return meter_->CaughtUp(max_wait_s);
  }

  std::uint64_t dropped() const { return meter_->dropped(); }

 private:
  std::unique_ptr<runtime::DeviceMeter> meter_;
};

}  // namespace

void BindDeviceMeter(py::module_& m) {
  py::class_<StepMeter>(m, "StepMeter",
                        "A step's time and energy where the GPU is (runtime::DeviceMeter): "
                        "mark(begin, tag) records a CUDA event on the stream; take() returns "
                        "the steps the device has finished. Never waits for the GPU.")
      .def(py::init<std::uintptr_t, int, double>(), py::arg("stream"), py::arg("nvml_index"),
           py::arg("poll_period_s") = 0.001,
           "`stream`: the CUstream the training launches on; `nvml_index`: its GPU. Raises "
           "InputError (field 'stream') without a CUDA driver.")
      .def("mark", &StepMeter::Mark, py::arg("begin"), py::arg("tag"),
           "Records a step's begin (begin=True) or end on the stream; False when it could not "
           "(the device is thousands of points behind).")
      .def("take", &StepMeter::Take,
           "[(tag, seconds, joules, counter)] of the steps the device finished since the last "
           "call, in order: the device's time between the step's points and the GPU's energy "
           "then (counter: the energy counter's delta, else power samples).")
      .def("caught_up", &StepMeter::CaughtUp, py::arg("max_wait_s"),
           "Whether every step marked so far is measured; waits up to max_wait_s only when the "
           "device has already passed the newest point (never for the GPU).")
      .def_property_readonly("dropped", &StepMeter::dropped);
}

}  // namespace joulepipe::python
