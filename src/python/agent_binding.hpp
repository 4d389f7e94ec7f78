// AgentBinding: the C++ object behind joulepipe._core.Agent. It owns the
// runtime::Agent, the log buffer its callbacks write to, and knows the
// objects that reference the agent (CoordinatedPlan) so that close() can
// close them first: a runtime::CoordinatedPlan must never outlive its Agent.
//
// Threads: every member runs with the GIL held, which serialises them (the
// hooks included). Only wait_idle() and the destruction in Close() run
// without it, on objects no other member can reach any more.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "bindings.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "log_buffer.hpp"

namespace joulepipe::python {

// Something that holds a reference to the agent and must be closed first.
class AgentDependent {
 public:
  virtual ~AgentDependent() = default;
  virtual void Close() = 0;
};

class AgentBinding {
 public:
  // control: "nvml", "daemon" (through `daemon_socket`) or "none". A control
  // that cannot be created (no NVML, no daemon) leaves the agent without
  // one: it falls back at once and fallback_reason() carries the error.
  AgentBinding(int nvml_index, const std::string& control, const std::string& daemon_socket,
               std::optional<int> idle_clock_mhz);
  ~AgentBinding();
  AgentBinding(const AgentBinding&) = delete;
  AgentBinding& operator=(const AgentBinding&) = delete;

  // nullptr once closed.
  runtime::Agent* agent() const { return raw_; }
  // Throws std::runtime_error naming `what` when closed.
  runtime::Agent& Require(const char* what) const;
  const std::shared_ptr<LogBuffer>& log() const { return log_; }

  std::optional<std::string> FallbackReason() const;
  // Closes the dependents, then restores default clocks and joins the
  // controller thread (without the GIL). Idempotent.
  void Close();
  bool WaitIdle(double timeout_s) const;
  // The agent's stats; once closed, those it had when it was closed.
  runtime::Stats Stats() const { return raw_ ? raw_->stats() : final_stats_; }

  void AddDependent(AgentDependent* d) { dependents_.insert(d); }
  void RemoveDependent(AgentDependent* d) { dependents_.erase(d); }

 private:
  std::shared_ptr<LogBuffer> log_ = std::make_shared<LogBuffer>();
  std::shared_ptr<runtime::Agent> agent_;
  runtime::Agent* raw_ = nullptr;  // agent_.get(), read by the hooks
  std::string control_name_;
  std::string control_error_;  // why the control could not be created, "" if it was
  std::set<AgentDependent*> dependents_;
  runtime::Stats final_stats_;  // set by Close()
};

}  // namespace joulepipe::python
