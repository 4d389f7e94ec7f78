// Agent: the per-rank runtime (runtime::Agent) behind the training hooks.
//
// The hooks are the hot path (called around every forward and backward):
// each is a plain member call with the GIL held, no Python object built, no
// allocation, and a no-op once the agent is closed. bench/python_hooks.py
// measures them.
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "agent_binding.hpp"
#include "bindings.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/runtime/profiler.hpp"

namespace joulepipe::python {

namespace {

py::dict StatsDict(const runtime::Stats& s) {
  py::dict d;
  d["requested"] = s.requested;
  d["applied"] = s.applied;
  d["restores"] = s.restores;
  d["skipped"] = s.skipped;
  d["coalesced"] = s.coalesced;
  d["failed"] = s.failed;
  d["lowered_waits"] = s.lowered_waits;
  d["timed_restores"] = s.timed_restores;
  d["held_waits"] = s.held_waits;
  d["ramp_capped"] = s.ramp_capped;
  d["step_begins"] = s.step_begins;
  d["step_ends"] = s.step_ends;
  d["instruction_begins"] = s.instruction_begins;
  d["instruction_ends"] = s.instruction_ends;
  d["last_applied_mhz"] = s.last_applied_mhz;
  d["last_power_limit_w"] = s.last_power_limit_w;
  return d;
}

}  // namespace

void BindAgent(py::module_& m) {
  using A = AgentBinding;
  py::class_<A>(m, "Agent", "The per-rank runtime: applies a plan's clocks around instructions.")
      .def(py::init<int, const std::string&, const std::string&, std::optional<int>>(),
           py::arg("nvml_index") = 0, py::arg("control") = "nvml",
           py::arg("daemon_socket") = "/run/joulepiped.sock",
           py::arg("idle_clock_mhz") = py::none())
      .def(
          "set_plan",
          [](A& a, const py::handle& plan, std::optional<double> power_limit_w,
             std::optional<std::pair<int, double>> head_wait) {
            runtime::Agent& agent = a.Require("set_plan");
            model::HeadWait head;
            if (head_wait) {
              head = {head_wait->first, head_wait->second};
              if (head.mhz < 0 || !std::isfinite(head.restore_s) || head.restore_s < 0 ||
                  head.restore_s > 3600) {
                throw py::value_error(
                    "head_wait must be (wait_mhz >= 0, restore_s in 0..3600 seconds), as "
                    "Plan.head_wait(stage) gives it");
              }
              if (power_limit_w) {
                throw py::value_error(
                    "head_wait lowers a clock; a power-limit plan locks none: pass one or the "
                    "other");
              }
            }
            if (power_limit_w) {
              if (!model::IsPowerLimitW(*power_limit_w)) {
                throw py::value_error("power_limit_w must be 0 (the default limit) or 1..5000 W");
              }
              agent.SetPowerLimitPlan(StagePlanFromList(plan, 0, "plan"), *power_limit_w);
            } else {
              agent.SetPlan(StagePlanFromList(plan, 0, "plan"), head);
            }
          },
          py::arg("plan"), py::arg("power_limit_w") = py::none(), py::arg("head_wait") = py::none())
      .def(
          "set_profiler",
          [](A& a, std::shared_ptr<runtime::InSituProfiler> profiler) {
            a.Require("set_profiler").SetProfiler(std::move(profiler));
          },
          py::arg("profiler").none(true))
      .def("disable",
           [](A& a) {
             if (runtime::Agent* agent = a.agent()) agent->Disable();
           })
      .def(
          "set_stream",
          [](A& a, std::uintptr_t stream) {
            std::string why;
            const bool ok =
                a.Require("set_stream").SetStream(reinterpret_cast<gpu::CudaStream>(stream), &why);
            return py::make_tuple(ok, why);
          },
          py::arg("stream"),
          "Clocks where the GPU is (Agent::SetStream): `stream` is the CUstream the training "
          "launches on (torch.cuda.current_stream().cuda_stream, or SimulatedStream.handle). "
          "(True, '') or (False, why): without a CUDA driver the hooks mark the host's points.")
      .def_property_readonly("stream_ordered",
                             [](const A& a) {
                               runtime::Agent* agent = a.agent();
                               return agent != nullptr && agent->stream_ordered();
                             })
      // Hooks: never raise (a closed agent ignores them).
      .def("on_step_begin",
           [](A& a) {
             if (runtime::Agent* agent = a.agent()) agent->OnStepBegin();
           })
      .def("on_step_end",
           [](A& a) {
             if (runtime::Agent* agent = a.agent()) agent->OnStepEnd();
           })
      .def(
          "begin_stop_ramp",
          [](A& a, double seconds) {
            runtime::Agent* agent = a.agent();
            return agent != nullptr && agent->BeginStopRamp(seconds);
          },
          py::arg("seconds"),
          "A grid plan's stop ramp: training ends in about `seconds`; False when there is "
          "none to begin (Agent::BeginStopRamp)")
      .def(
          "on_instruction_begin",
          [](A& a, model::Kind kind, int microbatch, int chunk) {
            if (runtime::Agent* agent = a.agent()) {
              agent->OnInstructionBegin(kind, microbatch, chunk);
            }
          },
          py::arg("kind"), py::arg("microbatch"), py::arg("chunk") = 0)
      .def(
          "on_instruction_end",
          [](A& a, model::Kind kind, int microbatch, int chunk) {
            if (runtime::Agent* agent = a.agent()) agent->OnInstructionEnd(kind, microbatch, chunk);
          },
          py::arg("kind"), py::arg("microbatch"), py::arg("chunk") = 0)
      .def_property_readonly(
          "mode",
          [](const A& a) {
            runtime::Agent* agent = a.agent();
            return std::string(runtime::ModeName(agent ? agent->mode() : runtime::Mode::kOff));
          })
      .def_property_readonly(
          "planned_knobs",
          [](const A& a) {
            runtime::Agent* agent = a.agent();
            return agent ? std::string(agent->planned_knobs()) : std::string();
          },
          "The knob setting the plan gives the running (or next) instruction, '' if none: "
          "read it after on_instruction_begin and apply it in the training code.")
      .def_property_readonly("fallback_reason", &A::FallbackReason)
      .def_property_readonly("closed", [](const A& a) { return a.agent() == nullptr; })
      .def("stats", [](const A& a) { return StatsDict(a.Stats()); })
      .def("wait_idle", &A::WaitIdle, py::arg("timeout_s") = 5.0)
      .def("take_log", [](const A& a) { return a.log()->Take(); })
      .def_property_readonly("log_dropped", [](const A& a) { return a.log()->dropped(); })
      .def("close", &A::Close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](A& a, const py::args&) {
        a.Close();
        return false;
      });
}

}  // namespace joulepipe::python
