#include "config.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "errors.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/read_file.hpp"

namespace joulepipe::sim_nvml {
namespace {

using model::InputError;
using nlohmann::json;

[[noreturn]] void Fail(const std::string& source, const std::string& what) {
  throw InputError("sim-nvml config " + source + ": " + what);
}

// Rejects keys outside `allowed`, so that a typo is an error, not a default.
void CheckKeys(const json& j, std::initializer_list<const char*> allowed, const std::string& source,
               const std::string& where) {
  if (!j.is_object()) Fail(source, where + " must be an object");
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) Fail(source, "unknown field " + where + "." + key);
  }
}

double Number(const json& j, const char* key, double fallback, const std::string& source,
              const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number()) Fail(source, where + "." + key + " must be a number");
  return j[key].get<double>();
}

bool Bool(const json& j, const char* key, bool fallback, const std::string& source,
          const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_boolean()) Fail(source, where + "." + key + " must be true or false");
  return j[key].get<bool>();
}

std::string String(const json& j, const char* key, const std::string& fallback,
                   const std::string& source, const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_string()) Fail(source, where + "." + key + " must be a string");
  return j[key].get<std::string>();
}

const physics::GpuSpec* Gpu(const std::string& id, const std::string& source) {
  try {
    return &physics::FindGpu(id);
  } catch (const InputError& e) {
    Fail(source, e.what());
  }
}

// "wait": {"blocked_w_at_min_clock": W, "clock_switch_ms": ms}
void ParseWait(const json& j, const std::string& source, const std::string& where,
               DeviceConfig& d) {
  CheckKeys(j, {"blocked_w_at_min_clock", "clock_switch_ms"}, source, where);
  if (j.contains("blocked_w_at_min_clock")) {
    const double w = Number(j, "blocked_w_at_min_clock", 0, source, where);
    if (!(w > 0 && w <= d.gpu->p_block_w))
      Fail(source, where + ".blocked_w_at_min_clock must be in (0, p_block_w = " +
                       std::to_string(d.gpu->p_block_w) + "] W");
    d.blocked_w_at_min_clock = w;
  }
  const double ms = Number(j, "clock_switch_ms", 0, source, where);
  if (!(ms >= 0 && ms <= 1000)) Fail(source, where + ".clock_switch_ms must be in [0, 1000]");
  d.clock_switch_s = ms / 1000.0;
}

std::vector<LoadSegment> ParseLoad(const json& j, const std::string& source,
                                   const std::string& where) {
  if (!j.is_array()) Fail(source, where + " must be a list of segments");
  std::vector<LoadSegment> load;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const json& s = j[i];
    CheckKeys(s, {"start_s", "end_s", "utilization", "compute_fraction", "activity"}, source, w);
    if (!s.contains("start_s") || !s.contains("end_s"))
      Fail(source, w + " needs start_s and end_s");
    LoadSegment seg;
    seg.start_s = Number(s, "start_s", 0, source, w);
    seg.end_s = Number(s, "end_s", 0, source, w);
    seg.utilization = Number(s, "utilization", 1, source, w);
    seg.compute_fraction = Number(s, "compute_fraction", 1, source, w);
    seg.activity = Number(s, "activity", 1, source, w);
    if (!(seg.end_s > seg.start_s)) Fail(source, w + ": end_s must be > start_s");
    if (seg.utilization < 0 || seg.utilization > 1) Fail(source, w + ".utilization not in [0, 1]");
    if (seg.compute_fraction < 0 || seg.compute_fraction > 1)
      Fail(source, w + ".compute_fraction not in [0, 1]");
    if (seg.activity < 0) Fail(source, w + ".activity must be >= 0");
    load.push_back(seg);
  }
  return load;
}

Faults ParseFaults(const json& j, const std::string& source, const std::string& where) {
  CheckKeys(j,
            {"gpu_lost_at_s", "unknown_error", "energy_counter_not_supported",
             "field_values_not_supported"},
            source, where);
  Faults f;
  if (j.contains("gpu_lost_at_s")) f.gpu_lost_at_s = Number(j, "gpu_lost_at_s", 0, source, where);
  if (j.contains("unknown_error")) {
    const json& names = j["unknown_error"];
    if (!names.is_array()) Fail(source, where + ".unknown_error must be a list of function names");
    for (const json& n : names) {
      if (!n.is_string() || !n.get<std::string>().starts_with("nvml"))
        Fail(source, where + ".unknown_error entries must be NVML function names");
      f.unknown_error.insert(n.get<std::string>());
    }
  }
  f.energy_counter_not_supported = Bool(j, "energy_counter_not_supported", false, source, where);
  f.field_values_not_supported = Bool(j, "field_values_not_supported", false, source, where);
  return f;
}

uint64_t Fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

void SetDefaultsFor(DeviceConfig& d, const physics::GpuSpec* gpu) {
  d.gpu = gpu;
  d.architecture = ArchitectureOf(*gpu);
  d.mig_capable = d.architecture == NVML_DEVICE_ARCH_AMPERE && gpu->id.starts_with("a100");
  d.mig_capable = d.mig_capable || d.architecture == NVML_DEVICE_ARCH_HOPPER;
}

std::string ResolvePath(const std::string& path, const std::string& base_dir) {
  if (path.empty() || base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).string();
}

Config Parse(const std::string& text, const std::string& source, const std::string& base_dir) {
  // Bounded depth: the configuration nests 4 levels (devices, a device, its
  // load, a segment); a hostile one cannot nest deeper than the limit.
  const json j = model::ParseJsonBounded(text, "sim-nvml config " + source);
  const std::string top = "config";
  CheckKeys(j,
            {"gpu", "count", "epoch_unix_s", "energy_update_period_ms", "power_reading",
             "permissions", "state_file", "call_log", "init_error", "driver_version",
             "cuda_driver_version", "load", "faults", "wait", "devices"},
            source, top);
  Config c;
  c.epoch_unix_s = Number(j, "epoch_unix_s", BootTimeUnixS(), source, top);
  c.energy_period_s = Number(j, "energy_update_period_ms", 100, source, top) / 1000.0;
  if (!(c.energy_period_s > 0)) Fail(source, "energy_update_period_ms must be > 0");
  const std::string reading = String(j, "power_reading", "average", source, top);
  if (reading == "average") {
    c.power_reading = PowerReading::kAverage;
  } else if (reading == "instant") {
    c.power_reading = PowerReading::kInstant;
  } else {
    Fail(source, "power_reading must be \"average\" or \"instant\"");
  }
  if (j.contains("permissions")) {
    const json& p = j["permissions"];
    CheckKeys(p, {"clocks", "power_limit", "persistence_mode"}, source, "permissions");
    c.allow_clocks = Bool(p, "clocks", false, source, "permissions");
    c.allow_power_limit = Bool(p, "power_limit", false, source, "permissions");
    c.allow_persistence_mode = Bool(p, "persistence_mode", false, source, "permissions");
  }
  c.state_file = ResolvePath(String(j, "state_file", "", source, top), base_dir);
  c.call_log = ResolvePath(String(j, "call_log", "", source, top), base_dir);
  if (j.contains("init_error") && !j["init_error"].is_null()) {
    const auto code = ParseErrorName(String(j, "init_error", "", source, top));
    if (!code) Fail(source, "init_error names no NVML error (e.g. \"driver_not_loaded\")");
    c.init_error = *code;
  }
  c.driver_version = String(j, "driver_version", c.driver_version, source, top);
  // Checked before the conversion: a double beyond int is undefined behaviour.
  const double cuda = Number(j, "cuda_driver_version", c.cuda_driver_version, source, top);
  if (!(cuda >= 0 && cuda <= 1e9)) Fail(source, "cuda_driver_version must be in [0, 1e9]");
  c.cuda_driver_version = static_cast<int>(cuda);

  const physics::GpuSpec* gpu = Gpu(String(j, "gpu", "a100-sxm4-80gb", source, top), source);
  std::vector<LoadSegment> load;
  if (j.contains("load")) load = ParseLoad(j["load"], source, "load");
  Faults faults;
  if (j.contains("faults")) faults = ParseFaults(j["faults"], source, "faults");
  const json devices = j.contains("devices") ? j["devices"] : json::array();
  if (!devices.is_array()) Fail(source, "devices must be a list");
  int count = devices.empty() ? 1 : static_cast<int>(devices.size());
  if (j.contains("count")) {
    if (!j["count"].is_number_integer()) Fail(source, "count must be an integer");
    count = j["count"].get<int>();
  }
  if (count < 1 || count > kMaxDevices)
    Fail(source, "count must be in [1, " + std::to_string(kMaxDevices) + "]");
  if (static_cast<int>(devices.size()) > count)
    Fail(source, "devices lists more devices than count");

  for (int i = 0; i < count; ++i) {
    DeviceConfig d;
    SetDefaultsFor(d, gpu);
    d.load = load;
    d.faults = faults;
    if (j.contains("wait")) ParseWait(j["wait"], source, "wait", d);
    if (i < static_cast<int>(devices.size())) {
      const std::string w = "devices[" + std::to_string(i) + "]";
      const json& dj = devices[i];
      CheckKeys(dj, {"gpu", "uuid", "mig", "load", "faults", "wait"}, source, w);
      if (dj.contains("gpu")) SetDefaultsFor(d, Gpu(String(dj, "gpu", "", source, w), source));
      if (dj.contains("wait")) ParseWait(dj["wait"], source, w + ".wait", d);
      d.uuid = String(dj, "uuid", "", source, w);
      d.mig_enabled = Bool(dj, "mig", false, source, w);
      if (d.mig_enabled && !d.mig_capable) Fail(source, w + ": " + d.gpu->id + " has no MIG mode");
      if (dj.contains("load")) d.load = ParseLoad(dj["load"], source, w + ".load");
      if (dj.contains("faults")) d.faults = ParseFaults(dj["faults"], source, w + ".faults");
    }
    c.devices.push_back(std::move(d));
  }
  for (size_t i = 0; i < c.devices.size(); ++i) {
    if (c.devices[i].uuid.empty())
      c.devices[i].uuid = DefaultUuid(static_cast<int>(i), c.devices[i].gpu->id);
    for (size_t k = 0; k < i; ++k)
      if (c.devices[k].uuid == c.devices[i].uuid)
        Fail(source, "duplicate uuid " + c.devices[i].uuid);
  }
  return c;
}

}  // namespace

Config ParseConfig(const std::string& json_text, const std::string& source) {
  return Parse(json_text, source, "");
}

Config LoadConfig() {
  Config c;
  const char* path = std::getenv("JOULEPIPE_SIM_NVML_CONFIG");
  if (path && *path) {
    const std::string text =
        model::ReadWholeFile(path, "sim-nvml config", model::kMaxConfigFileBytes);
    c = Parse(text, path, std::filesystem::path(path).parent_path().string());
  } else {
    c = Parse("{}", "(default)", "");
  }
  const char* gpu = std::getenv("JOULEPIPE_SIM_NVML_GPU");
  if (gpu && *gpu) {
    const physics::GpuSpec* spec = Gpu(gpu, "JOULEPIPE_SIM_NVML_GPU");
    for (DeviceConfig& d : c.devices) {
      const bool default_uuid =
          d.uuid == DefaultUuid(static_cast<int>(&d - c.devices.data()), d.gpu->id);
      SetDefaultsFor(d, spec);
      if (d.mig_enabled && !d.mig_capable) d.mig_enabled = false;
      if (default_uuid) d.uuid = DefaultUuid(static_cast<int>(&d - c.devices.data()), spec->id);
    }
  }
  const char* count = std::getenv("JOULEPIPE_SIM_NVML_COUNT");
  if (count && *count) {
    char* end = nullptr;
    const long n = std::strtol(count, &end, 10);
    if (*end != '\0' || n < 1 || n > kMaxDevices)
      throw InputError("JOULEPIPE_SIM_NVML_COUNT must be an integer in [1, " +
                       std::to_string(kMaxDevices) + "]");
    const DeviceConfig last = c.devices.back();
    while (static_cast<long>(c.devices.size()) > n) c.devices.pop_back();
    while (static_cast<long>(c.devices.size()) < n) {
      DeviceConfig d = last;
      d.mig_enabled = false;
      d.uuid = DefaultUuid(static_cast<int>(c.devices.size()), d.gpu->id);
      c.devices.push_back(std::move(d));
    }
  }
  return c;
}

std::string DefaultUuid(int index, const std::string& gpu_id) {
  const std::string key = "joulepipe-sim-nvml/" + gpu_id + "/" + std::to_string(index);
  const uint64_t hi = Fnv1a(key, 0x9e3779b97f4a7c15ULL), lo = Fnv1a(key, 0x7f4a7c159e3779b9ULL);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

unsigned ArchitectureOf(const physics::GpuSpec& gpu) {
  const std::string& id = gpu.id;
  if (id.starts_with("v100")) return NVML_DEVICE_ARCH_VOLTA;
  if (id.starts_with("a100") || id.starts_with("a40") || id.starts_with("a10") ||
      id.starts_with("a30"))
    return NVML_DEVICE_ARCH_AMPERE;
  if (id.starts_with("l40") || id.starts_with("l4")) return NVML_DEVICE_ARCH_ADA;
  if (id.starts_with("h100") || id.starts_with("h200") || id.starts_with("h800"))
    return NVML_DEVICE_ARCH_HOPPER;
  return 0xffffffffu;
}

double BootTimeUnixS() {
  std::ifstream in("/proc/stat");
  std::string word;
  while (in >> word) {
    if (word == "btime") {
      double t = 0;
      if (in >> t) return t;
      break;
    }
  }
  return 0;
}

}  // namespace joulepipe::sim_nvml
