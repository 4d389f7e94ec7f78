// CoordinatedPlan: an Agent run on the plans a coordinator (`joulepipe
// serve`) hands this rank (runtime::CoordinatedPlan).
//
// The runtime object references the Agent, so it is an AgentDependent:
// Agent.close() closes it first. Python additionally keeps the Agent object
// alive while this one lives (keep_alive).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "agent_binding.hpp"
#include "bindings.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/runtime/coordinated_plan.hpp"
#include "log_buffer.hpp"

namespace joulepipe::python {

namespace {

// The registration dict: keys as the wire's RankInfo members (rank,
// dp_rank, pp_rank, tp_rank, available_frequencies); rank defaults to the
// CoordinatedPlan's rank, available_frequencies to [].
protocol::RankInfo RegistrationFrom(const py::dict& d, int rank) {
  protocol::RankInfo r;
  r.rank = rank;
  bool has[3] = {false, false, false};
  for (auto [key_handle, value] : d) {
    const std::string key = py::str(key_handle);
    const std::string field = "registration['" + key + "']";
    try {
      if (key == "rank") {
        r.rank = value.cast<int>();
      } else if (key == "dp_rank") {
        r.dp_rank = value.cast<int>();
        has[0] = true;
      } else if (key == "pp_rank") {
        r.pp_rank = value.cast<int>();
        has[1] = true;
      } else if (key == "tp_rank") {
        r.tp_rank = value.cast<int>();
        has[2] = true;
      } else if (key == "available_frequencies") {
        r.available_mhz = value.cast<std::vector<int>>();
      } else {
        throw model::InputError(field, field +
                                           " is not a RankInfo member (rank, dp_rank, "
                                           "pp_rank, tp_rank, available_frequencies)");
      }
    } catch (const py::cast_error&) {
      throw model::InputError(
          field, field + " has the wrong type (got " + std::string(py::repr(value)) + ")");
    }
  }
  const char* names[3] = {"dp_rank", "pp_rank", "tp_rank"};
  for (int i = 0; i < 3; ++i) {
    if (!has[i]) {
      const std::string field = std::string("registration['") + names[i] + "']";
      throw model::InputError(field, field + " is missing");
    }
  }
  return r;
}

class CoordinatedPlanBinding : public AgentDependent {
 public:
  // The coordinator (`joulepipe serve`) at `url` hands this rank its plans.
  CoordinatedPlanBinding(AgentBinding& agent, const std::string& url, const std::string& job_id,
                         int rank, std::optional<std::string> token,
                         std::optional<py::dict> registration, double start_wait_s,
                         double start_timeout_s, std::optional<int> meter_nvml_index,
                         const std::string& through, int pipeline,
                         std::optional<std::int64_t> last_iteration) {
    runtime::CoordinatedPlanOptions options;
    options.pipeline = pipeline;
    options.last_iteration = last_iteration;
    options.coordinator.url = url;
    options.coordinator.token = token.value_or("");
    options.job_id = job_id;
    options.rank = rank;
    options.through = through;
    if (registration) options.registration = RegistrationFrom(*registration, rank);
    options.start_wait_s = start_wait_s;
    options.start_timeout_s = start_timeout_s;
    Open(agent, std::move(options), meter_nvml_index);
  }

  // The job's own ranks hand this rank its plans (offer()).
  CoordinatedPlanBinding(AgentBinding& agent, int rank, const std::string& through, int pipeline,
                         std::optional<std::int64_t> last_iteration) {
    runtime::CoordinatedPlanOptions options;
    options.pipeline = pipeline;
    options.last_iteration = last_iteration;
    options.source = runtime::PlanSource::kInProcess;
    options.rank = rank;
    options.through = through;
    Open(agent, std::move(options), std::nullopt);
  }

  // Stage `stage` of a plan `joulepipe plan` wrote, from start() on.
  CoordinatedPlanBinding(AgentBinding& agent, const model::Plan& plan, const std::string& name,
                         int rank, int stage, int stages, const std::string& through, int pipeline,
                         std::optional<std::int64_t> last_iteration) {
    runtime::CoordinatedPlanOptions options;
    options.pipeline = pipeline;
    options.last_iteration = last_iteration;
    options.source = runtime::PlanSource::kPlan;
    options.plan = std::make_shared<const model::Plan>(plan);
    options.plan_name = name;
    options.rank = rank;
    options.stage = stage;
    options.stages = stages;
    options.through = through;
    Open(agent, std::move(options), std::nullopt);
  }

  ~CoordinatedPlanBinding() override { Close(); }

  bool Offer(const std::string& rank_plan_json) {
    if (!plan_) return false;
    py::gil_scoped_release release;
    return plan_->Offer(rank_plan_json);
  }

  // [("forward" | "backward", microbatch, chunk)] of the first step; None
  // before it ended.
  py::object LoopOrder() const {
    if (!plan_ || plan_->loop_order().empty()) return py::none();
    py::list out;
    for (const runtime::LoopStep& step : plan_->loop_order()) {
      out.append(
          py::make_tuple(std::string(model::KindName(step.kind)), step.microbatch, step.chunk));
    }
    return out;
  }

 private:
  void Open(AgentBinding& agent, runtime::CoordinatedPlanOptions options,
            std::optional<int> meter_nvml_index) {
    agent_ = &agent;
    options.log = LogBuffer::Sink(log_);
    if (meter_nvml_index) {
      try {
        options.meter = monitor::NvmlGpuMeterByNvmlIndex(*meter_nvml_index);
      } catch (const std::exception& e) {
        log_->Push("cannot measure GPU " + std::to_string(*meter_nvml_index) +
                   " (iteration reports carry no energy): " + e.what());
      }
    }
    plan_ = std::make_unique<runtime::CoordinatedPlan>(agent.Require("CoordinatedPlan"),
                                                       std::move(options));
    agent.AddDependent(this);
  }

 public:
  bool Start() {
    if (!plan_) return false;
    if (started_) return start_result_;
    {
      py::gil_scoped_release release;
      start_result_ = plan_->Start();
    }
    started_ = true;
    return start_result_;
  }

  // May wait (a grid plan's offset between pipelines): without the GIL.
  void OnStepBegin(std::optional<std::int64_t> iteration) {
    if (!plan_) return;
    py::gil_scoped_release release;
    plan_->OnStepBegin(iteration);
  }

  void OnInstructionBegin(model::Kind kind, int microbatch, int chunk) {
    if (plan_) plan_->OnInstructionBegin(kind, microbatch, chunk);
  }

  void OnInstructionEnd(model::Kind kind, int microbatch, int chunk) {
    if (plan_) plan_->OnInstructionEnd(kind, microbatch, chunk);
  }

  void OnStepEnd(std::optional<double> time_s, std::optional<double> energy_j) {
    if (!plan_) return;
    if (time_s) {
      plan_->OnStepEnd(*time_s, energy_j);
    } else {
      plan_->OnStepEnd();
    }
  }

  py::dict Stats() const {
    const runtime::CoordinationStats s = plan_ ? plan_->stats() : final_stats_;
    py::dict d;
    d["running_version"] = s.running_version;
    d["running_predicted_time_s"] = s.running_predicted_time_s;
    d["running_predicted_energy_j"] = s.running_predicted_energy_j;
    d["announced_version"] = s.announced_version;
    d["connected"] = s.connected;
    d["reports_queued"] = s.reports_queued;
    d["reports_sent"] = s.reports_sent;
    d["reports_failed"] = s.reports_failed;
    d["reports_dropped"] = s.reports_dropped;
    d["plans_fetched"] = s.plans_fetched;
    d["plans_applied"] = s.plans_applied;
    d["fetch_failures"] = s.fetch_failures;
    d["plans_refused"] = s.plans_refused;
    d["refusal"] = s.refusal.empty() ? py::object(py::none()) : py::str(s.refusal);
    return d;
  }

  std::vector<std::string> TakeLog() { return log_->Take(); }
  std::uint64_t LogDropped() const { return log_->dropped(); }

  // Stops the background thread (within about 50 ms). Idempotent.
  void Close() override {
    if (agent_ != nullptr) {
      agent_->RemoveDependent(this);
      agent_ = nullptr;
    }
    std::unique_ptr<runtime::CoordinatedPlan> plan = std::move(plan_);
    if (plan) {
      final_stats_ = plan->stats();
      py::gil_scoped_release release;
      plan.reset();
    }
  }

 private:
  AgentBinding* agent_ = nullptr;  // null once closed
  std::shared_ptr<LogBuffer> log_ = std::make_shared<LogBuffer>();
  std::unique_ptr<runtime::CoordinatedPlan> plan_;
  bool started_ = false;
  bool start_result_ = false;
  runtime::CoordinationStats final_stats_;
};

}  // namespace

void BindCoordinatedPlan(py::module_& m) {
  using C = CoordinatedPlanBinding;
  py::class_<C>(m, "CoordinatedPlan", "Runs an Agent on the plans a coordinator hands this rank.")
      .def(py::init<AgentBinding&, const std::string&, const std::string&, int,
                    std::optional<std::string>, std::optional<py::dict>, double, double,
                    std::optional<int>, const std::string&, int, std::optional<std::int64_t>>(),
           py::arg("agent"), py::arg("url"), py::arg("job_id"), py::arg("rank"),
           py::arg("token") = py::none(), py::arg("registration") = py::none(),
           py::arg("start_wait_s") = 60.0, py::arg("start_timeout_s") = 90.0,
           py::arg("meter_nvml_index") = py::none(), py::arg("through") = "",
           py::arg("pipeline") = 0, py::arg("last_iteration") = py::none(), py::keep_alive<1, 2>())
      // Embedded coordination: the job's own ranks hand this rank its plans
      // (offer(rank_plan_json)); nothing is sent anywhere.
      .def_static(
          "in_process",
          [](AgentBinding& agent, int rank, const std::string& through, int pipeline,
             std::optional<std::int64_t> last_iteration) {
            return std::make_unique<C>(agent, rank, through, pipeline, last_iteration);
          },
          py::arg("agent"), py::arg("rank"), py::arg("through") = "", py::arg("pipeline") = 0,
          py::arg("last_iteration") = py::none(), py::keep_alive<0, 1>())
      // A plan file: this rank runs stage `stage` of `plan` (a Plan) from
      // start() on; `stages` is the job's (another count is refused).
      .def_static(
          "from_plan",
          [](AgentBinding& agent, const model::Plan& plan, const std::string& name, int rank,
             int stage, int stages, const std::string& through, int pipeline,
             std::optional<std::int64_t> last_iteration) {
            return std::make_unique<C>(agent, plan, name, rank, stage, stages, through, pipeline,
                                       last_iteration);
          },
          py::arg("agent"), py::arg("plan"), py::arg("name"), py::arg("rank"), py::arg("stage"),
          py::arg("stages") = 0, py::arg("through") = "", py::arg("pipeline") = 0,
          py::arg("last_iteration") = py::none(), py::keep_alive<0, 1>())
      .def("start", &C::Start)
      .def("offer", &C::Offer, py::arg("rank_plan_json"))
      .def_property_readonly("loop_order", &C::LoopOrder)
      // The hooks a loop calls (they drive the agent: never call its own
      // hooks too). Never raise; no-ops once closed.
      .def("on_step_begin", &C::OnStepBegin, py::arg("iteration") = py::none())
      .def("on_instruction_begin", &C::OnInstructionBegin, py::arg("kind"), py::arg("microbatch"),
           py::arg("chunk") = 0)
      .def("on_instruction_end", &C::OnInstructionEnd, py::arg("kind"), py::arg("microbatch"),
           py::arg("chunk") = 0)
      .def("on_step_end", &C::OnStepEnd, py::arg("time_s") = py::none(),
           py::arg("energy_j") = py::none())
      .def("stats", &C::Stats)
      .def("take_log", &C::TakeLog)
      .def_property_readonly("log_dropped", &C::LogDropped)
      .def("close", &C::Close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](C& c, const py::args&) {
        c.Close();
        return false;
      });
}

}  // namespace joulepipe::python
