// Parsing of data/gpus/<id>.json and the catalog of GPU types built into the
// binary (gpu_model.hpp). The DVFS formulas live in gpu_model.cpp.
//
// A GPU file is strict: every field of GpuSpec is required (except
// "aliases"), DVFS parameters sit under "dvfs", a free-text "notes" string is
// allowed, and any other key is an error, so that a typo cannot silently
// leave a parameter at its default. "sources" maps field names ("tdp_w",
// "dvfs.ridge_mhz") to citations; every key must name a field.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "embedded_data.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/physics/gpu_model.hpp"

#include "joulepipe/model/format.hpp"

namespace joulepipe::physics {
namespace {

using Json = nlohmann::json;
using model::InputError;

const std::set<std::string>& TopLevelNumericFields() {
  static const std::set<std::string> fields = {
      "min_sm_mhz", "max_sm_mhz", "sm_step_mhz",       "memory_mhz",
      "memory_gib", "tdp_w",      "power_limit_min_w", "power_limit_max_w",
      "idle_w",     "p_block_w",  "peak_bf16_tflops",  "hbm_gbps",
      "nvlink_gbps"};
  return fields;
}

const std::set<std::string>& DvfsFields() {
  static const std::set<std::string> fields = {"v_min_v", "v_max_v", "ridge_mhz", "static_w",
                                               "dynamic_w"};
  return fields;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Format(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Reads fields of one JSON object, naming `prefix` + key in every error.
class Reader {
 public:
  Reader(const Json& object, std::string source, std::string prefix)
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void Fail(const std::string& key, const std::string& what) const {
    throw InputError(source_ + ": field \"" + prefix_ + key + "\" " + what);
  }

  const Json& Get(const std::string& key) const {
    auto it = object_.find(key);
    if (it == object_.end()) Fail(key, "is missing");
    return *it;
  }

  double Number(const std::string& key) const {
    const Json& value = Get(key);
    if (!value.is_number()) Fail(key, "must be a number (got " + model::Excerpt(value) + ")");
    return value.get<double>();
  }

  int Integer(const std::string& key) const {
    const Json& value = Get(key);
    if (!value.is_number_integer()) {
      Fail(key, "must be an integer number of MHz (got " + model::Excerpt(value) + ")");
    }
    const auto v = value.get<long long>();
    if (v < -1'000'000 || v > 1'000'000) {
      Fail(key, "is out of range (got " + model::Excerpt(value) + ")");
    }
    return static_cast<int>(v);
  }

  std::string String(const std::string& key) const {
    const Json& value = Get(key);
    if (!value.is_string() || value.get<std::string>().empty()) {
      Fail(key, "must be a non-empty string (got " + model::Excerpt(value) + ")");
    }
    return value.get<std::string>();
  }

  // value > bound (strict) or value >= bound.
  void Above(const std::string& key, double value, double bound, bool strict,
             const std::string& bound_name = "") const {
    if (strict ? value > bound : value >= bound) return;
    const std::string what =
        bound_name.empty() ? Format(bound) : bound_name + " = " + Format(bound);
    Fail(key,
         std::string("must be ") + (strict ? "> " : ">= ") + what + " (got " + Format(value) + ")");
  }
  void AtMost(const std::string& key, double value, double bound,
              const std::string& bound_name) const {
    if (value <= bound) return;
    Fail(key, "must be <= " + bound_name + " = " + Format(bound) + " (got " + Format(value) + ")");
  }

  void RejectUnknown(const std::set<std::string>& known) const {
    for (auto it = object_.begin(); it != object_.end(); ++it) {
      if (!known.contains(it.key())) Fail(it.key(), "is not a known field (spelling?)");
    }
  }

 private:
  const Json& object_;
  std::string source_;
  std::string prefix_;
};

DvfsModel ParseDvfs(const Json& object, const GpuSpec& gpu, const std::string& source) {
  Reader r(object, source, "dvfs.");
  r.RejectUnknown(DvfsFields());
  DvfsModel d;
  d.v_min_v = r.Number("v_min_v");
  r.Above("v_min_v", d.v_min_v, 0, true);
  d.v_max_v = r.Number("v_max_v");
  r.Above("v_max_v", d.v_max_v, d.v_min_v, false, "dvfs.v_min_v");
  d.ridge_mhz = r.Number("ridge_mhz");
  r.Above("ridge_mhz", d.ridge_mhz, gpu.min_sm_mhz, false, "min_sm_mhz");
  r.AtMost("ridge_mhz", d.ridge_mhz, gpu.max_sm_mhz, "max_sm_mhz");
  d.static_w = r.Number("static_w");
  r.Above("static_w", d.static_w, 0, false);
  d.dynamic_w = r.Number("dynamic_w");
  r.Above("dynamic_w", d.dynamic_w, 0, true);
  return d;
}

}  // namespace

GpuSpec ParseGpuSpec(const std::string& json_text, const std::string& source) {
  const Json root = model::ParseJsonBounded(json_text, source);
  if (!root.is_object()) throw InputError(source + ": expected a JSON object at the top level");

  std::set<std::string> known = TopLevelNumericFields();
  known.insert({"id", "name", "aliases", "dvfs", "sources", "notes"});
  Reader r(root, source, "");
  r.RejectUnknown(known);

  GpuSpec gpu;
  gpu.id = r.String("id");
  gpu.name = r.String("name");
  if (root.contains("aliases")) {
    const Json& aliases = root["aliases"];
    if (!aliases.is_array()) r.Fail("aliases", "must be an array of strings");
    for (const Json& alias : aliases) {
      if (!alias.is_string() || alias.get<std::string>().empty()) {
        r.Fail("aliases", "must hold non-empty strings (got " + model::Excerpt(alias) + ")");
      }
      gpu.aliases.push_back(alias.get<std::string>());
    }
  }
  if (root.contains("notes") && !root["notes"].is_string()) r.Fail("notes", "must be a string");

  gpu.min_sm_mhz = r.Integer("min_sm_mhz");
  r.Above("min_sm_mhz", gpu.min_sm_mhz, 0, true);
  gpu.max_sm_mhz = r.Integer("max_sm_mhz");
  r.Above("max_sm_mhz", gpu.max_sm_mhz, gpu.min_sm_mhz, false, "min_sm_mhz");
  gpu.sm_step_mhz = r.Integer("sm_step_mhz");
  r.Above("sm_step_mhz", gpu.sm_step_mhz, 0, true);
  // The clock list runs from max down to exactly min (SupportedSmClocks).
  if ((gpu.max_sm_mhz - gpu.min_sm_mhz) % gpu.sm_step_mhz != 0) {
    r.Fail("sm_step_mhz", "must divide max_sm_mhz - min_sm_mhz = " +
                              std::to_string(gpu.max_sm_mhz - gpu.min_sm_mhz) + " (got " +
                              std::to_string(gpu.sm_step_mhz) + ")");
  }
  gpu.memory_mhz = r.Integer("memory_mhz");
  r.Above("memory_mhz", gpu.memory_mhz, 0, true);
  gpu.memory_gib = r.Number("memory_gib");
  r.Above("memory_gib", gpu.memory_gib, 0, true);

  gpu.power_limit_min_w = r.Number("power_limit_min_w");
  r.Above("power_limit_min_w", gpu.power_limit_min_w, 0, true);
  gpu.tdp_w = r.Number("tdp_w");
  r.Above("tdp_w", gpu.tdp_w, gpu.power_limit_min_w, false, "power_limit_min_w");
  gpu.power_limit_max_w = r.Number("power_limit_max_w");
  r.Above("power_limit_max_w", gpu.power_limit_max_w, gpu.tdp_w, false, "tdp_w");
  gpu.idle_w = r.Number("idle_w");
  r.Above("idle_w", gpu.idle_w, 0, true);
  r.AtMost("idle_w", gpu.idle_w, gpu.tdp_w, "tdp_w");
  gpu.p_block_w = r.Number("p_block_w");
  r.Above("p_block_w", gpu.p_block_w, 0, true);
  r.AtMost("p_block_w", gpu.p_block_w, gpu.tdp_w, "tdp_w");

  gpu.peak_bf16_tflops = r.Number("peak_bf16_tflops");
  r.Above("peak_bf16_tflops", gpu.peak_bf16_tflops, 0, true);
  gpu.hbm_gbps = r.Number("hbm_gbps");
  r.Above("hbm_gbps", gpu.hbm_gbps, 0, true);
  gpu.nvlink_gbps = r.Number("nvlink_gbps");
  r.Above("nvlink_gbps", gpu.nvlink_gbps, 0, true);

  const Json& dvfs = r.Get("dvfs");
  if (!dvfs.is_object()) r.Fail("dvfs", "must be an object with " + Json(DvfsFields()).dump());
  gpu.dvfs = ParseDvfs(dvfs, gpu, source);

  if (root.contains("sources")) {
    const Json& sources = root["sources"];
    if (!sources.is_object()) r.Fail("sources", "must be an object: field name -> citation");
    for (auto it = sources.begin(); it != sources.end(); ++it) {
      const std::string& key = it.key();
      const bool is_field = TopLevelNumericFields().contains(key) ||
                            (key.starts_with("dvfs.") && DvfsFields().contains(key.substr(5))) ||
                            key == "id" || key == "name" || key == "aliases";
      if (!is_field) r.Fail("sources." + key, "does not name a field");
      if (!it.value().is_string() || it.value().get<std::string>().empty()) {
        r.Fail("sources." + key, "must be a non-empty citation string");
      }
      gpu.sources[key] = it.value().get<std::string>();
    }
  }
  return gpu;
}

const std::vector<GpuSpec>& GpuCatalog() {
  // Built once from the embedded files; a bad built-in file is a build
  // defect, reported as InputError naming the file.
  static const std::vector<GpuSpec> catalog = [] {
    std::vector<GpuSpec> gpus;
    std::set<std::string> names;  // ids and aliases, lower-case, unique
    for (const EmbeddedFile& file : EmbeddedGpuFiles()) {
      const std::string source = "data/gpus/" + std::string(file.name);
      GpuSpec gpu = ParseGpuSpec(std::string(file.content), source);
      if (std::string(file.name) != gpu.id + ".json") {
        throw InputError(source + ": field \"id\" must match the file name (got \"" + gpu.id +
                         "\")");
      }
      std::vector<std::string> keys = gpu.aliases;
      keys.push_back(gpu.id);
      for (const std::string& key : keys) {
        if (!names.insert(Lower(key)).second) {
          throw InputError(source + ": id or alias \"" + key + "\" is already used by another GPU");
        }
      }
      gpus.push_back(std::move(gpu));
    }
    std::sort(gpus.begin(), gpus.end(),
              [](const GpuSpec& a, const GpuSpec& b) { return a.id < b.id; });
    return gpus;
  }();
  return catalog;
}

const GpuSpec* FindGpuOrNull(std::string_view id_or_alias) {
  const std::string wanted = Lower(id_or_alias);
  for (const GpuSpec& gpu : GpuCatalog()) {
    if (Lower(gpu.id) == wanted || Lower(gpu.name) == wanted) return &gpu;
    for (const std::string& alias : gpu.aliases) {
      if (Lower(alias) == wanted) return &gpu;
    }
  }
  return nullptr;
}

PowerLimitRange PowerLimitRangeFor(const std::string& profile_gpu, double min_w, double max_w) {
  PowerLimitRange range;
  if (!profile_gpu.empty()) {
    if (const GpuSpec* gpu = FindGpuOrNull(profile_gpu)) {
      range.min_w = gpu->power_limit_min_w;
      range.max_w = gpu->power_limit_max_w;
      range.source = "the profile's GPU, " + gpu->name + " (catalogue)";
    }
  }
  if (min_w > 0 || max_w > 0) {
    if (min_w > 0) range.min_w = min_w;
    if (max_w > 0) range.max_w = max_w;
    const std::string given = "PowerLimitRequest::min_limit_w/PowerLimitRequest::max_limit_w";
    range.source = range.source.empty() ? given : given + " over " + range.source;
  }
  if (range.max_w > 0 && range.min_w > range.max_w) {
    throw InputError("PowerLimitRequest::min_limit_w",
                     model::Format("PowerLimitRequest::min_limit_w (%g W) is above "
                                   "PowerLimitRequest::max_limit_w (%g W)",
                                   range.min_w, range.max_w));
  }
  return range;
}

const GpuSpec& FindGpu(std::string_view id_or_alias) {
  if (const GpuSpec* gpu = FindGpuOrNull(id_or_alias)) return *gpu;
  const std::vector<GpuSpec>& catalog = GpuCatalog();
  std::string known;
  for (const GpuSpec& gpu : catalog) {
    known += (known.empty() ? "" : ", ") + gpu.id;
    if (!gpu.aliases.empty()) {
      known += " (";
      for (std::size_t i = 0; i < gpu.aliases.size(); ++i) {
        known += (i ? ", " : "") + gpu.aliases[i];
      }
      known += ")";
    }
  }
  throw InputError("unknown GPU \"" + std::string(id_or_alias) + "\"; known GPUs: " + known);
}

}  // namespace joulepipe::physics
