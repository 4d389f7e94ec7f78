// AgentBinding (agent_binding.hpp).
#include "agent_binding.hpp"

#include <stdexcept>
#include <utility>
#include <vector>

#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::python {

AgentBinding::AgentBinding(int nvml_index, const std::string& control,
                           const std::string& daemon_socket, std::optional<int> idle_clock_mhz)
    : control_name_(control) {
  if (control != "nvml" && control != "daemon" && control != "none") {
    throw model::InputError("control",
                            "control must be 'nvml', 'daemon' or 'none' (got '" + control + "')");
  }
  runtime::AgentOptions options;
  options.nvml_index = nvml_index;
  options.idle_clock_mhz = idle_clock_mhz;
  options.log = LogBuffer::Sink(log_);
  try {
    if (control == "nvml") {
      options.control = gpu::MakeNvmlClockControl();
    } else if (control == "daemon") {
      options.control = gpu::MakeDaemonClockControl(daemon_socket);
    }
  } catch (const std::exception& e) {
    control_error_ = e.what();
    log_->Push("clock control '" + control + "' could not be created: " + control_error_);
  }
  agent_ = std::make_shared<runtime::Agent>(std::move(options));
  raw_ = agent_.get();
}

AgentBinding::~AgentBinding() {
  // The Python object is being collected: the GIL is held, no dependent is
  // left (each keeps the agent alive), nothing else can reach the agent.
  dependents_.clear();
  raw_ = nullptr;
  agent_.reset();
}

runtime::Agent& AgentBinding::Require(const char* what) const {
  if (raw_ == nullptr) {
    throw std::runtime_error(std::string("Agent.") + what + ": the agent is closed");
  }
  return *raw_;
}

std::optional<std::string> AgentBinding::FallbackReason() const {
  if (raw_ == nullptr) return std::nullopt;
  std::optional<std::string> reason = raw_->fallback_reason();
  if (reason && !control_error_.empty()) {
    return "clock control '" + control_name_ + "' could not be created: " + control_error_ +
           "; running at default clocks";
  }
  return reason;
}

void AgentBinding::Close() {
  const std::vector<AgentDependent*> dependents(dependents_.begin(), dependents_.end());
  for (AgentDependent* d : dependents) d->Close();  // each removes itself
  dependents_.clear();
  std::shared_ptr<runtime::Agent> agent = std::move(agent_);
  raw_ = nullptr;
  if (agent) {
    final_stats_ = agent->stats();
    py::gil_scoped_release release;
    agent.reset();  // restores default clocks, joins the controller thread
  }
}

bool AgentBinding::WaitIdle(double timeout_s) const {
  std::shared_ptr<runtime::Agent> agent = agent_;  // close() may run meanwhile
  if (!agent) return true;
  py::gil_scoped_release release;
  return agent->WaitIdle(timeout_s);
}

}  // namespace joulepipe::python
