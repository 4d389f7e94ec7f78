// Profiles: Profile (model::Profile with its metadata), read/parse/write,
// and simulate_profile (physics::SimulateWorkload, what `joulepipe profile
// --simulate` computes).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "bindings.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/memory.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::python {

namespace {

// A missing file is FileNotFoundError (the library says InputError with the
// path; Python code tests for the built-in type).
void RequireExists(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    const std::string text = path.string();
    PyErr_SetObject(PyExc_FileNotFoundError,
                    py::make_tuple(2, "No such file or directory (the profile)", text).ptr());
    throw py::error_already_set();
  }
}

// The WorkloadSpec of simulate_profile's and estimate_memory's arguments.
physics::WorkloadSpec SpecFromArgs(const std::string& model_id, const physics::GpuSpec& gpu, int tp,
                                   int pp, int dp, int microbatch_size, int seq_length,
                                   const std::string& recompute, const py::object& layer_split,
                                   const std::string& framework, const std::string& precision,
                                   const physics::Placement& placement = {}) {
  physics::WorkloadSpec spec;
  spec.model = physics::FindTransformer(model_id);
  spec.parallel.tp = tp;
  spec.parallel.pp = pp;
  spec.parallel.dp = dp;
  spec.microbatch_size = microbatch_size;
  spec.seq_length = seq_length;
  spec.recompute = physics::ParseRecompute(recompute);
  spec.framework = physics::ParseFramework(framework);
  spec.precision = physics::ParsePrecision(precision);
  spec.placement = placement;  // before the balanced split, which times the stages
  if (py::isinstance<py::str>(layer_split)) {
    const std::string text = layer_split.cast<std::string>();
    if (text == "balanced") {
      spec.parallel.layer_split = physics::BalancedLayerSplit(spec, gpu);
    } else if (text != "even") {
      spec.parallel.layer_split = physics::ParseLayerSplit(text);
    }
  } else if (!layer_split.is_none()) {
    try {
      spec.parallel.layer_split = layer_split.cast<std::vector<int>>();
    } catch (const py::cast_error&) {
      throw model::InputError("Parallelism::layer_split",
                              "Parallelism::layer_split must be 'even', 'balanced', a text "
                              "'11,12,...' or a list of layers per stage (got " +
                                  std::string(py::repr(layer_split)) + ")");
    }
  }
  return spec;
}

model::Profile SimulateProfileTask(const std::string& model_id, const std::string& gpu_id, int tp,
                                   int pp, int dp, int microbatch_size, int seq_length,
                                   const std::string& recompute, const py::object& layer_split,
                                   double power_limit_w, int min_mhz, const std::string& framework,
                                   const std::string& precision, int gpus_per_node,
                                   double node_network_gbps, const std::string& rank_order) {
  const physics::GpuSpec& gpu = physics::FindGpu(gpu_id);
  physics::Placement placement;
  placement.gpus_per_node = gpus_per_node;
  placement.node_network_gbps = node_network_gbps;
  placement.rank_order = physics::ParseRankOrder(rank_order);
  const physics::WorkloadSpec spec =
      SpecFromArgs(model_id, gpu, tp, pp, dp, microbatch_size, seq_length, recompute, layer_split,
                   framework, precision, placement);
  physics::ProfileOptions options;
  options.power_limit_w = power_limit_w;
  options.min_mhz = min_mhz;
  py::gil_scoped_release release;
  return physics::StampedProfile(physics::SimulateWorkload(spec, gpu, options), gpu);
}

// physics::EstimateMemory as a dict: GiB per stage and the peak.
py::dict EstimateMemoryTask(const std::string& model_id, const std::string& gpu_id, int tp, int pp,
                            int dp, int microbatch_size, int seq_length,
                            const std::string& recompute, const py::object& layer_split,
                            const std::string& framework, const std::string& precision,
                            const std::string& schedule, int microbatches, int chunks,
                            bool distributed_optimizer, bool sequence_parallel) {
  const physics::GpuSpec& gpu = physics::FindGpu(gpu_id);
  const physics::WorkloadSpec spec =
      SpecFromArgs(model_id, gpu, tp, pp, dp, microbatch_size, seq_length, recompute, layer_split,
                   framework, precision);
  physics::PipelineShape shape;
  if (schedule == "gpipe") {
    shape.kind = physics::PipelineShape::Kind::kGPipe;
  } else if (schedule == "1f1b") {
    shape.kind = physics::PipelineShape::Kind::k1F1B;
  } else if (schedule == "interleaved") {
    shape.kind = physics::PipelineShape::Kind::kInterleaved;
  } else {
    throw model::InputError(
        "schedule", "schedule must be 'gpipe', '1f1b' or 'interleaved' (got '" + schedule + "')");
  }
  shape.microbatches = microbatches > 0 ? microbatches : pp;
  shape.chunks = chunks;
  physics::MemoryOptions options;
  options.distributed_optimizer = distributed_optimizer;
  options.sequence_parallel = sequence_parallel;
  const physics::MemoryEstimate est = physics::EstimateMemory(spec, shape, gpu, options);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  py::list stages;
  for (const physics::StageMemory& st : est.stages) {
    py::dict d;
    d["stage"] = st.stage;
    d["parameters"] = st.parameters;
    d["model_state_gib"] = st.model_state_bytes / kGiB;
    d["activation_gib"] = st.activation_bytes / kGiB;
    d["in_flight"] = st.in_flight_chunks;
    d["total_gib"] = st.total_bytes() / kGiB;
    stages.append(d);
  }
  py::dict out;
  out["figures"] = "estimated (physics memory model; docs/workload-model.md, \"Memory\")";
  out["gpu_gib"] = est.gpu_bytes / kGiB;
  out["peak_stage"] = est.peak_stage;
  out["peak_gib"] = est.peak_bytes() / kGiB;
  out["headroom_gib"] = est.headroom_bytes() / kGiB;
  out["stages"] = stages;
  return out;
}

py::list Points(const model::Profile& p, int stage, model::Kind kind) {
  py::list out;
  for (const model::ClockPoint& c : p.Points(stage, kind)) {
    out.append(py::make_tuple(c.mhz, c.time_s, c.energy_j));
  }
  return out;
}

}  // namespace

model::RowRuleResult PlannableFrom(const py::handle& profile) {
  model::Profile storage;
  const model::Profile& read = ProfileFrom(profile, &storage);
  const std::string name = ProfileName(profile);
  py::gil_scoped_release release;
  return model::PlannableRows(read, name);
}

const model::Profile& ProfileFrom(const py::handle& profile, model::Profile* storage) {
  if (py::isinstance<model::Profile>(profile)) return profile.cast<const model::Profile&>();
  if (py::isinstance<py::str>(profile) || py::hasattr(profile, "__fspath__")) {
    const std::filesystem::path path = profile.cast<std::filesystem::path>();
    RequireExists(path);
    py::gil_scoped_release release;
    *storage = model::ReadProfileCsv(path.string());
    return *storage;
  }
  throw model::InputError("profile",
                          "profile must be a joulepipe.Profile or the path of a profile "
                          "CSV (got " +
                              std::string(py::repr(profile)) + ")");
}

std::string ProfileName(const py::handle& profile) {
  if (py::isinstance<model::Profile>(profile)) return "the profile";
  return py::str(profile);
}

void BindProfile(py::module_& m) {
  using model::Profile;
  using model::ProfileMetadata;
  py::class_<ProfileMetadata>(m, "ProfileMetadata",
                              "What a profile says about itself (the CSV's '# key: value' "
                              "lines); every field may be empty / None.")
      .def(py::init<>())
      .def_readwrite("gpu", &ProfileMetadata::gpu)
      .def_readwrite("p_block_w", &ProfileMetadata::p_block_w)
      .def_readwrite("source", &ProfileMetadata::source)
      .def_readwrite("date", &ProfileMetadata::date)
      .def_readwrite("joulepipe_version", &ProfileMetadata::joulepipe_version)
      .def_readwrite("method", &ProfileMetadata::method)
      .def("__repr__", [](const ProfileMetadata& d) {
        return "ProfileMetadata(gpu=" + std::string(py::repr(py::str(d.gpu))) +
               ", p_block_w=" + std::string(py::repr(py::cast(d.p_block_w))) +
               ", source=" + std::string(py::repr(py::str(d.source))) +
               ", date=" + std::string(py::repr(py::str(d.date))) + ")";
      });

  py::class_<Profile>(m, "Profile",
                      "Per stage and instruction kind, the time (s) and energy (J) of one "
                      "instruction at each SM clock, with metadata.")
      .def_static(
          "read",
          [](const std::filesystem::path& path) {
            RequireExists(path);
            py::gil_scoped_release release;
            return model::ReadProfileCsv(path.string());
          },
          py::arg("path"))
      .def_static("parse", &model::ParseProfileCsv, py::arg("text"), py::arg("source") = "profile")
      .def("to_csv", &model::ProfileToCsv)
      .def(
          "write",
          [](const Profile& p, const std::filesystem::path& path, bool overwrite) {
            std::error_code error;
            if (!overwrite && std::filesystem::exists(path, error)) {
              PyErr_SetObject(
                  PyExc_FileExistsError,
                  py::make_tuple(17, path.string() + " exists; pass overwrite=True to replace it",
                                 path.string())
                      .ptr());
              throw py::error_already_set();
            }
            model::WriteProfileCsv(path.string(), p);
          },
          py::arg("path"), py::kw_only(), py::arg("overwrite") = false)
      .def_readwrite("metadata", &Profile::metadata)
      .def_property_readonly("stages", &Profile::num_stages)
      .def("points", &Points, py::arg("stage"), py::arg("kind"))
      .def("validate", &Profile::Validate, py::arg("stages"), py::arg("source") = "profile")
      .def("__repr__", [](const Profile& p) {
        return "<Profile: " + std::to_string(p.num_stages()) + " stages" +
               (p.metadata.gpu.empty() ? "" : ", " + p.metadata.gpu) +
               (p.metadata.source.empty() ? "" : ", " + p.metadata.source) + ">";
      });

  m.def(
      "read_profile",
      [](const std::filesystem::path& path) {
        RequireExists(path);
        py::gil_scoped_release release;
        return model::ReadProfileCsv(path.string());
      },
      py::arg("path"));
  // The catalogue's entry for a GPU named as NVML names it ("NVIDIA
  // A100-SXM4-80GB"), by its id or an alias; None when the catalogue does
  // not know it. Case-insensitive.
  m.def(
      "catalog_gpu",
      [](const std::string& name) -> std::optional<py::dict> {
        try {
          const physics::GpuSpec& gpu = physics::FindGpu(name);
          py::dict out;
          out["id"] = gpu.id;
          out["name"] = gpu.name;
          out["p_block_w"] = gpu.p_block_w;
          return out;
        } catch (const model::InputError&) {
          return std::nullopt;  // not in the catalogue
        }
      },
      py::arg("name"));
  m.def("simulate_profile", &SimulateProfileTask, py::arg("model"), py::arg("gpu"), py::kw_only(),
        py::arg("tp"), py::arg("pp"), py::arg("dp") = 1, py::arg("microbatch_size") = 1,
        py::arg("seq_length") = 0, py::arg("recompute") = "none", py::arg("layer_split") = "even",
        py::arg("power_limit_w") = 0.0, py::arg("min_mhz") = 0, py::arg("framework") = "megatron",
        py::arg("precision") = "bf16", py::arg("gpus_per_node") = 0,
        py::arg("node_network_gbps") = 0.0, py::arg("rank_order") = "tp-first");
  m.def("estimate_memory", &EstimateMemoryTask, py::arg("model"), py::arg("gpu"), py::kw_only(),
        py::arg("tp"), py::arg("pp"), py::arg("dp") = 1, py::arg("microbatch_size") = 1,
        py::arg("seq_length") = 0, py::arg("recompute") = "none", py::arg("layer_split") = "even",
        py::arg("framework") = "megatron", py::arg("precision") = "bf16",
        py::arg("schedule") = "1f1b", py::arg("microbatches") = 0, py::arg("chunks") = 1,
        py::arg("distributed_optimizer") = true, py::arg("sequence_parallel") = true);
}

}  // namespace joulepipe::python
