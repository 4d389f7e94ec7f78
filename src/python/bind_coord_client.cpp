// CoordinatorClient: what rank 0 tells `joulepipe serve` about the job (POST
// /jobs, PUT /jobs/{id}/profile) through the runtime's client
// (runtime::CoordinatorClient: timeouts, retries with backoff, bounded
// answers). Every rank then runs a CoordinatedPlan, which registers the rank
// and fetches its plans itself.
//
// Calls release the GIL (they wait on the network). A refusal or an
// unreachable service raises RuntimeError with the client's message.
#include <optional>
#include <string>

#include <pybind11/stl.h>

#include "bindings.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/runtime/coord_client.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::python {

namespace {

class ClientBinding {
 public:
  ClientBinding(const std::string& url, std::optional<std::string> token, double connect_timeout_s,
                double request_timeout_s, int max_attempts) {
    runtime::CoordinatorOptions options;
    options.url = url;
    options.token = token.value_or("");
    options.connect_timeout_s = connect_timeout_s;
    options.request_timeout_s = request_timeout_s;
    options.retry.max_attempts = max_attempts;
    client_.emplace(std::move(options));
  }

  std::string RegisterJob(const std::string& job_id, int pp, int dp, int tp, int world_size,
                          const std::string& schedule, int microbatches, int chunks,
                          std::optional<double> p_block_w, std::optional<double> slowdown,
                          std::optional<std::string> gpu) {
    protocol::JobConfig job;
    job.job_id = job_id;
    job.pp_degree = pp;
    job.dp_degree = dp;
    job.tp_degree = tp;
    job.world_size = world_size;
    if (!schedule::ParseKind(schedule, &job.spec.kind)) {
      throw model::InputError("JobConfig::schedule",
                              "JobConfig::schedule must be \"1f1b\", \"gpipe\" or "
                              "\"interleaved\" (got \"" +
                                  model::ExcerptText(schedule) + "\")");
    }
    job.spec.stages = pp;
    job.spec.microbatches = microbatches;
    job.spec.chunks = chunks;
    job.p_block_w = p_block_w;
    job.slowdown = slowdown.value_or(0);
    job.gpu = gpu.value_or("");
    py::gil_scoped_release release;
    return client_->RegisterJob(job);
  }

  int UploadProfile(const std::string& job_id, const std::string& csv) {
    py::gil_scoped_release release;
    return client_->UploadProfile(job_id, csv);
  }

 private:
  std::optional<runtime::CoordinatorClient> client_;
};

}  // namespace

void BindCoordClient(py::module_& m) {
  using C = ClientBinding;
  py::class_<C>(m, "CoordinatorClient",
                "The job's side of `joulepipe serve`: register the job, upload its profile.")
      .def(py::init<const std::string&, std::optional<std::string>, double, double, int>(),
           py::arg("url"), py::arg("token") = py::none(), py::arg("connect_timeout_s") = 5.0,
           py::arg("request_timeout_s") = 30.0, py::arg("max_attempts") = 5)
      .def("register_job", &C::RegisterJob, py::arg("job_id"), py::kw_only(), py::arg("pp"),
           py::arg("dp"), py::arg("tp"), py::arg("world_size"), py::arg("schedule"),
           py::arg("microbatches"), py::arg("chunks") = 1, py::arg("p_block_w") = py::none(),
           py::arg("slowdown") = py::none(), py::arg("gpu") = py::none(),
           "POST /jobs; returns the job's id. Registering the same job again is idempotent.")
      .def("upload_profile", &C::UploadProfile, py::arg("job_id"), py::arg("csv"),
           "PUT /jobs/{job_id}/profile; returns the rows the service read.");
}

}  // namespace joulepipe::python
