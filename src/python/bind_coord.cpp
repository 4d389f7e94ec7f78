// CoordJob: the coordination policy (coord::Job) for the embedded
// coordinator on rank 0.
//
// plan() solves without the GIL, and start_planning() on a native thread of
// the job's own; so that Python threads may meanwhile call the job's other
// methods, every method takes the job's mutex (with the GIL held; the
// planner thread never takes the GIL: no lock-order cycle), and a solve
// holds it only to copy its inputs and to install the result. Closing the
// job (close(), or its destruction) cancels a solve in progress and joins
// the planner thread.
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include <nlohmann/json.hpp>
#include "bindings.hpp"

#include "joulepipe/coord/job.hpp"
#include "joulepipe/coord/plan_task.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/field_names.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/protocol/json.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "plan_inputs.hpp"

namespace joulepipe::python {

namespace {

// The planner's field tokens in the words of an embedded job, whose user
// sets none of them (rank 0 measures P_block or takes the catalogue's; the
// slowdown is enable()'s max_slowdown).
constexpr std::pair<std::string_view, std::string_view> kJobWords[] = {
    {"PlanRequest::p_block_w", "the GPU's power while blocked (P_block)"},
    {"PlanRequest::slowdown", "max_slowdown"},
    {"PlanRequest::resolution_s", "the plan's time resolution"},
};

class CoordJob {
 public:
  explicit CoordJob(protocol::JobConfig config) : job_(std::move(config)) {}
  ~CoordJob() { Close(); }
  CoordJob(const CoordJob&) = delete;
  CoordJob& operator=(const CoordJob&) = delete;

  // Plans on the job's own thread and returns at once: plan_version stays 0
  // until the plan is in; failure says why it failed; take_notes() says
  // either in words ("planned in 2.31 s: initial plan", "planning failed:
  // ...; every rank keeps default clocks"). Once.
  void StartPlanning() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (planning_started_) {
      throw coord::JobStateError("CoordJob.start_planning: planning was started already");
    }
    if (!job_.ready_to_plan()) {
      throw coord::JobStateError(std::string("CoordJob.start_planning: the job is ") +
                                 coord::JobPhaseName(job_.phase()) +
                                 ", not ready to plan (every rank registered and a profile set)");
    }
    planning_started_ = true;
    planner_ = std::thread([this] { PlanInBackground(); });
  }

  // What the job has to say since the last call (planning's outcome).
  std::vector<std::string> TakeNotes() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    out.swap(notes_);
    return out;
  }

  // Cancels a solve in progress, joins the planner thread. Idempotent.
  void Close() {
    cancel_.store(true);
    if (planner_.joinable()) {
      std::optional<py::gil_scoped_release> release;
      if (PyGILState_Check()) release.emplace();
      planner_.join();
    }
  }

  bool RegisterRank(int rank, int dp_rank, int pp_rank, int tp_rank,
                    std::vector<int> available_mhz) {
    std::lock_guard<std::mutex> lock(mutex_);
    return job_.RegisterRank({rank, dp_rank, pp_rank, tp_rank, std::move(available_mhz)});
  }

  void SetProfile(const std::string& csv) {
    model::Profile profile = model::ParseProfileCsv(csv, "the job's profile");
    std::lock_guard<std::mutex> lock(mutex_);
    job_.SetProfile(profile);
  }

  void Plan() {
    py::gil_scoped_release release;
    SolveAndInstall(nullptr, "CoordJob.plan");
  }

  py::object PlanFor(int rank) const {
    std::optional<protocol::RankPlan> plan;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      plan = job_.PlanFor(rank);
    }
    if (!plan) return py::none();
    py::dict d;
    d["rank"] = plan->rank;
    d["pipeline"] = plan->pipeline;
    d["stage"] = plan->stage;
    d["version"] = plan->version;
    d["point"] = plan->point;
    d["reason"] = plan->reason;
    d["predicted_time_s"] = plan->predicted->time_s;  // coord::Job always predicts
    d["predicted_energy_j"] = plan->predicted->energy_j;
    d["plan"] = StagePlanToList(plan->instructions);
    // The pipeline's energy at all max clocks (today's job), when planned
    // here: the predicted saving is 1 - predicted_energy_j / this.
    if (baseline_energy_j_ > 0) d["baseline_energy_j"] = baseline_energy_j_;
    return d;
  }

  // The rank's plan as the wire carries it (protocol::RankPlanToJson), what
  // a rank's CoordinatedPlan.offer() takes; None before the first plan.
  py::object PlanJsonFor(int rank) const {
    std::string text;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::optional<protocol::RankPlan> plan = job_.PlanFor(rank);
      if (!plan) return py::none();
      text = protocol::RankPlanToJson(*plan, job_.config().job_id).dump();
    }
    return py::str(text);
  }

  double BaselineEnergyJ() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return baseline_energy_j_;
  }

  // One round of the job's ranks: times_s[rank] is the rank's pipeline
  // time of `iteration` (<= 0: not measured, not reported). Before the plan
  // nothing is reported. A report the policy refuses (a time over a day, an
  // iteration outside the job's window) is dropped, as the service answers
  // it 400: detection goes on. Returns the reports refused.
  int ReportRound(std::int64_t iteration, const std::vector<double>& times_s, double now) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (job_.plan_version() == 0) return 0;
    int refused = 0;
    for (std::size_t rank = 0; rank < times_s.size(); ++rank) {
      if (!(times_s[rank] > 0)) continue;
      try {
        job_.ReportIteration({static_cast<int>(rank), iteration, times_s[rank], std::nullopt}, now);
      } catch (const model::InputError&) {
        ++refused;
      }
    }
    return refused;
  }

  // What rank 0 hands the job's ranks: {"plans": {rank: the rank's plan as
  // protocol JSON}, "baseline_energy_j": J} of the newest version.
  py::dict Offer() const {
    std::vector<std::pair<int, std::string>> plans;
    double baseline = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int rank = 0; rank < job_.config().world_size; ++rank) {
        if (std::optional<protocol::RankPlan> plan = job_.PlanFor(rank)) {
          plans.emplace_back(rank, protocol::RankPlanToJson(*plan, job_.config().job_id).dump());
        }
      }
      baseline = baseline_energy_j_;
    }
    py::dict by_rank;
    for (auto& [rank, text] : plans) by_rank[py::int_(rank)] = py::str(text);
    py::dict out;
    out["plans"] = by_rank;
    out["baseline_energy_j"] = baseline;
    return out;
  }

  int ReportIteration(int rank, std::int64_t iteration, double time_s,
                      std::optional<double> energy_j, std::optional<double> now) {
    std::lock_guard<std::mutex> lock(mutex_);
    job_.ReportIteration({rank, iteration, time_s, energy_j}, now ? *now : UnixNow());
    return job_.plan_version();
  }

  py::list Switches() const {
    std::vector<protocol::PlanSwitch> switches;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      switches = job_.switches();
    }
    py::list out;
    for (const protocol::PlanSwitch& s : switches) {
      py::dict d;
      d["version"] = s.version;
      d["iteration"] = s.iteration;
      d["time_unix_s"] = s.time_unix_s;
      d["reason"] = s.reason;
      d["slowdowns"] = s.slowdowns;
      d["target_s"] = s.target_s;
      d["point_of_pipeline"] = s.point_of_pipeline;
      d["predicted_saving_j"] = s.predicted_saving_j;
      out.append(d);
    }
    return out;
  }

  // Reads of the job's state, under the mutex.
  template <typename F>
  auto Read(F f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return f(job_);
  }

 private:
  // Solves the job's plan without the lock and installs it with it: what
  // Plan() and the planner thread share. A failed solve marks the job
  // failed and rethrows; a cancelled one (model::Cancelled) changes nothing.
  void SolveAndInstall(const std::atomic<bool>* cancel, const char* caller) {
    coord::PlanTask task;  // the job's profile, shared, and its request
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!job_.ready_to_plan()) {
        throw coord::JobStateError(std::string(caller) + ": the job is " +
                                   coord::JobPhaseName(job_.phase()) +
                                   ", not ready to plan (every rank registered and a profile set)");
      }
      task = coord::PlanTaskOf(job_);
    }
    solver::PipelinePlan plan;
    try {
      plan = task.Run(cancel, nullptr);
    } catch (const model::Cancelled&) {
      throw;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      job_.SetPlanFailed(model::RenameFields(e.what(), kJobWords));
      throw;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    job_.SetPlan(plan, UnixNow());
    baseline_energy_j_ = plan.baseline.energy_j;
  }

  // The planner thread: the solve, then its outcome in words.
  void PlanInBackground() noexcept {
    const auto began = std::chrono::steady_clock::now();
    try {
      SolveAndInstall(&cancel_, "CoordJob.start_planning");
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      std::lock_guard<std::mutex> lock(mutex_);
      const std::optional<protocol::RankPlan> first = job_.PlanFor(0);
      notes_.push_back(model::Format("planned in %.2f s: ", seconds) +
                       (first ? first->reason : std::string("no plan")));
    } catch (const model::Cancelled&) {
      // Closed while solving: nobody is left to tell.
    } catch (const std::exception& e) {
      try {
        std::lock_guard<std::mutex> lock(mutex_);
        notes_.push_back("planning failed: " + model::RenameFields(e.what(), kJobWords) +
                         "; every rank keeps default clocks");
      } catch (...) {
      }
    }
  }

  mutable std::mutex mutex_;
  coord::Job job_;
  double baseline_energy_j_ = 0;  // of the plan solved here (all max clocks)
  bool planning_started_ = false;
  std::vector<std::string> notes_;
  std::atomic<bool> cancel_{false};
  std::thread planner_;
};

CoordJob* MakeCoordJob(const std::string& job_id, int dp, int pp, int tp,
                       const std::string& schedule, int microbatches, int chunks,
                       std::optional<double> p_block_w, double resolution_s, const std::string& gpu,
                       double max_slowdown) {
  // A factor here (1.05 = at most 5 % slower), as on the command line and in
  // joulepipe.megatron; protocol::JobConfig holds the fraction.
  if (!(max_slowdown >= 1.0 && max_slowdown <= 2.0)) {
    throw model::InputError("max_slowdown",
                            "max_slowdown must be a factor in [1, 2] (1 = no slower than "
                            "all-max clocks, 1.05 = at most 5 % slower); got " +
                                std::to_string(max_slowdown));
  }
  protocol::JobConfig config;
  config.slowdown = max_slowdown - 1.0;
  config.job_id = job_id;
  config.dp_degree = dp;
  config.pp_degree = pp;
  config.tp_degree = tp;
  config.world_size = 0;  // CheckJobConfig computes dp * pp * tp
  config.spec = SpecFrom(schedule, pp, microbatches, chunks);
  config.p_block_w = p_block_w;
  config.resolution_s = resolution_s;
  config.gpu = gpu;
  return new CoordJob(std::move(config));
}

}  // namespace

void BindCoord(py::module_& m) {
  py::class_<CoordJob>(m, "CoordJob", "The coordination policy of one job (coord::Job).")
      .def(py::init(&MakeCoordJob), py::arg("job_id"), py::arg("dp"), py::arg("pp"), py::arg("tp"),
           py::arg("schedule"), py::arg("microbatches"), py::arg("chunks") = 1,
           py::arg("p_block_w") = py::none(), py::kw_only(), py::arg("resolution_s") = 5e-3,
           py::arg("gpu") = "", py::arg("max_slowdown") = 1.0)
      .def("register_rank", &CoordJob::RegisterRank, py::arg("rank"), py::arg("dp_rank"),
           py::arg("pp_rank"), py::arg("tp_rank"), py::arg("available_mhz"))
      .def("set_profile", &CoordJob::SetProfile, py::arg("csv"))
      .def("profile_notes",
           [](const CoordJob& j) { return j.Read([](auto& x) { return x.profile_notes(); }); })
      .def_property_readonly(
          "ready_to_plan",
          [](const CoordJob& j) { return j.Read([](auto& x) { return x.ready_to_plan(); }); })
      .def("plan", &CoordJob::Plan)
      .def("start_planning", &CoordJob::StartPlanning)
      .def("take_notes", &CoordJob::TakeNotes)
      .def("report_round", &CoordJob::ReportRound, py::arg("iteration"), py::arg("times_s"),
           py::arg("now"))
      .def("offer", &CoordJob::Offer)
      .def("close", &CoordJob::Close)
      .def_property_readonly(
          "phase",
          [](const CoordJob& j) {
            return j.Read([](auto& x) { return std::string(coord::JobPhaseName(x.phase())); });
          })
      .def_property_readonly(
          "failure", [](const CoordJob& j) { return j.Read([](auto& x) { return x.failure(); }); })
      .def_property_readonly(
          "plan_version",
          [](const CoordJob& j) { return j.Read([](auto& x) { return x.plan_version(); }); })
      .def_property_readonly(
          "world_size",
          [](const CoordJob& j) { return j.Read([](auto& x) { return x.config().world_size; }); })
      .def_property_readonly(
          "registered_ranks",
          [](const CoordJob& j) { return j.Read([](auto& x) { return x.registered_ranks(); }); })
      .def_property_readonly(
          "baseline_time_s",
          [](const CoordJob& j) { return j.Read([](auto& x) { return x.baseline_time_s(); }); })
      .def_property_readonly("completed_iterations",
                             [](const CoordJob& j) {
                               return j.Read([](auto& x) { return x.completed_iterations(); });
                             })
      .def("plan_for", &CoordJob::PlanFor, py::arg("rank"))
      .def("plan_json_for", &CoordJob::PlanJsonFor, py::arg("rank"))
      // The pipeline's energy at all max clocks when planned here (0: not
      // planned yet): a plan's saving is 1 - its predicted energy / this.
      .def_property_readonly("baseline_energy_j", &CoordJob::BaselineEnergyJ)
      .def("report_iteration", &CoordJob::ReportIteration, py::arg("rank"), py::arg("iteration"),
           py::arg("time_s"), py::arg("energy_j") = py::none(), py::arg("now") = py::none())
      .def("switches", &CoordJob::Switches)
      .def("status_json", [](const CoordJob& j) {
        return j.Read([](auto& x) { return protocol::JobStatusToJson(x.Status()).dump(); });
      });
}

}  // namespace joulepipe::python
