// `joulepipe gpus`: query every visible GPU through NVML and list it.
#include "gpus_command.hpp"

#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/gpu/visible_devices.hpp"

namespace joulepipe::cli {

struct GpusFlags {
  bool json = false;
};

namespace {

// Runs `read`; an NvmlError becomes the figure's reason instead of a throw.
template <typename T>
GpuFigure<T> Try(const std::function<T()>& read) {
  GpuFigure<T> figure;
  try {
    figure.value = read();
  } catch (const gpu::NvmlError& e) {
    figure.unsupported = e.code() == NVML_ERROR_NOT_SUPPORTED;
    figure.error = figure.unsupported ? "not supported" : e.what();
  }
  return figure;
}

template <typename T>
bool Failed(const GpuFigure<T>& f) {
  return !f.value.has_value() && !f.unsupported;
}

GpuSnapshot Snapshot(const gpu::Device& d) {
  using gpu::ClockDomain;
  GpuSnapshot s;
  s.visible_index = d.visible_index();
  s.nvml_index = d.nvml_index();
  s.name = d.name();
  s.uuid = d.uuid();
  s.architecture = d.architecture();
  s.mig_enabled = d.mig_enabled();
  s.sm_clock_mhz = Try<int>([&] { return d.CurrentClock(ClockDomain::kSm); });
  s.sm_clock_max_mhz = Try<int>([&] { return d.MaxClock(ClockDomain::kSm); });
  s.memory_clock_mhz = Try<int>([&] { return d.CurrentClock(ClockDomain::kMemory); });
  s.memory_clock_max_mhz = Try<int>([&] { return d.MaxClock(ClockDomain::kMemory); });
  const GpuFigure<std::vector<int>> memory =
      Try<std::vector<int>>([&] { return d.SupportedMemoryClocks(); });
  if (memory.value.has_value() && !memory.value->empty()) {
    const int at = memory.value->front();
    s.supported_at_memory_mhz.value = at;
    s.supported_sm_clocks_mhz =
        Try<std::vector<int>>([&] { return d.SupportedGraphicsClocks(at); });
  } else {
    s.supported_sm_clocks_mhz = memory;  // its reason, or an empty list
    s.supported_at_memory_mhz.error = memory.error.empty() ? "no memory clocks" : memory.error;
    s.supported_at_memory_mhz.unsupported = true;
  }
  s.power_limits = Try<gpu::PowerLimits>([&] { return d.GetPowerLimits(); });
  s.power = Try<gpu::PowerReading>([&] { return d.InstantPower(); });
  s.energy = Try<gpu::EnergyReading>([&] {
    const std::optional<gpu::EnergyReading> e = d.ReadEnergy();
    if (!e.has_value()) {
      throw gpu::NvmlError(NVML_ERROR_NOT_SUPPORTED, "nvmlDeviceGetTotalEnergyConsumption",
                           "Not Supported", d.Describe());
    }
    return *e;
  });
  s.throttle = Try<gpu::ThrottleReasons>([&] { return d.CurrentThrottleReasons(); });
  return s;
}

// "1980 MHz", or the figure's reason.
template <typename T, typename F>
std::string Show(const GpuFigure<T>& f, F format) {
  return f.value.has_value() ? format(*f.value) : "(" + f.error + ")";
}

std::string Mhz(int mhz) {
  return Printf("%d MHz", mhz);
}
std::string W(double w) {
  return Printf("%.1f W", w);
}

template <typename T>
nlohmann::ordered_json Json(const GpuFigure<T>& f) {
  return f.value.has_value() ? nlohmann::ordered_json(*f.value) : nlohmann::ordered_json();
}

}  // namespace

bool GpuSnapshot::HasErrors() const {
  return Failed(sm_clock_mhz) || Failed(sm_clock_max_mhz) || Failed(memory_clock_mhz) ||
         Failed(memory_clock_max_mhz) || Failed(supported_sm_clocks_mhz) || Failed(power_limits) ||
         Failed(power) || Failed(energy) || Failed(throttle);
}

GpuReport CollectGpuReport() {
  GpuReport report;
  report.nvml = gpu::Nvml();
  report.methodology = gpu::NvmlMethodology();
  report.cuda_visible = gpu::CudaVisibleDevicesFromEnv();
  const gpu::DeviceList list = gpu::ListVisibleDevices(gpu::MigPolicy::kList);
  report.visible_note = list.visible_devices_note;
  for (const gpu::Device& d : list.devices) report.gpus.push_back(Snapshot(d));
  return report;
}

std::string FormatGpuReport(const GpuReport& r) {
  std::string s;
  const std::string visible = r.cuda_visible.has_value()
                                  ? "CUDA_VISIBLE_DEVICES=\"" + *r.cuda_visible + "\""
                                  : std::string("CUDA_VISIBLE_DEVICES unset: all GPUs");
  if (r.gpus.empty()) {
    s += "no GPU visible (" + visible + ")\n";
  } else {
    s += Printf("%zu GPU%s visible (", r.gpus.size(), r.gpus.size() == 1 ? "" : "s") + visible +
         ")\n";
  }
  if (!r.visible_note.empty()) s += "note: " + r.visible_note + "\n";
  for (const GpuSnapshot& g : r.gpus) {
    s += Printf("\nGPU %d (NVML %u): ", g.visible_index, g.nvml_index) + g.name + ", " +
         g.architecture + "\n";
    s += "  uuid            " + g.uuid + "\n";
    s += "  SM clock        " + Show(g.sm_clock_mhz, Mhz) + " now, max " +
         Show(g.sm_clock_max_mhz, Mhz) + "\n";
    s += "  supported SM    " +
         Show(g.supported_sm_clocks_mhz,
              [&](const std::vector<int>& c) {
                if (c.empty()) return std::string("none listed");
                return Printf("%d..%d MHz, %zu clocks (at memory %d MHz)", c.back(), c.front(),
                              c.size(), g.supported_at_memory_mhz.value.value_or(0));
              }) +
         "\n";
    s += "  memory clock    " + Show(g.memory_clock_mhz, Mhz) + " now, max " +
         Show(g.memory_clock_max_mhz, Mhz) + "\n";
    s += "  power limit     " +
         Show(g.power_limits,
              [](const gpu::PowerLimits& l) {
                return W(l.current_w) + " (default " + W(l.default_w) + ", range " + W(l.min_w) +
                       ".." + W(l.max_w) + ", enforced " + W(l.enforced_w) + ")";
              }) +
         "\n";
    s += "  power now       " +
         Show(g.power,
              [](const gpu::PowerReading& p) {
                return W(p.watts()) + " (" + std::string(gpu::PowerSourceName(p.source)) + ")";
              }) +
         "\n";
    s += "  energy counter  " +
         (g.energy.value.has_value()
              ? Printf("yes (%.3f J since the driver loaded)", g.energy.value->joules())
          : g.energy.unsupported ? std::string("no (power sampling instead)")
                                 : "(" + g.energy.error + ")") +
         "\n";
    s += std::string("  MIG mode        ") +
         (g.mig_enabled ? "enabled (joulepipe will not control this GPU)" : "disabled") + "\n";
    s += "  throttle        " +
         Show(g.throttle,
              [](const gpu::ThrottleReasons& t) {
                std::string names;
                for (const std::string& n : t.Names()) names += (names.empty() ? "" : ", ") + n;
                return names.empty() ? std::string("none") : names;
              }) +
         "\n";
  }
  s += "\nMethodology: " + r.methodology +
       (r.nvml.nvml_version.empty() ? "" : " NVML version " + r.nvml.nvml_version + ".") +
       " Each figure is one reading of the GPU alone (not CPU or DRAM).\n";
  return s;
}

std::string GpuReportJson(const GpuReport& r) {
  using nlohmann::ordered_json;
  ordered_json root;
  root["methodology"] = r.methodology;
  root["nvml"] = {{"library", r.nvml.path},
                  {"requested", r.nvml.requested},
                  {"simulated", r.nvml.simulated},
                  {"driver_version", r.nvml.driver_version},
                  {"nvml_version", r.nvml.nvml_version}};
  root["cuda_visible_devices"] =
      r.cuda_visible.has_value() ? ordered_json(*r.cuda_visible) : ordered_json();
  root["cuda_visible_devices_note"] = r.visible_note;
  ordered_json gpus = ordered_json::array();
  for (const GpuSnapshot& g : r.gpus) {
    ordered_json j;
    j["visible_index"] = g.visible_index;
    j["nvml_index"] = g.nvml_index;
    j["name"] = g.name;
    j["uuid"] = g.uuid;
    j["architecture"] = g.architecture;
    j["mig_enabled"] = g.mig_enabled;
    j["sm_clock_mhz"] = Json(g.sm_clock_mhz);
    j["sm_clock_max_mhz"] = Json(g.sm_clock_max_mhz);
    j["memory_clock_mhz"] = Json(g.memory_clock_mhz);
    j["memory_clock_max_mhz"] = Json(g.memory_clock_max_mhz);
    if (g.supported_sm_clocks_mhz.value.has_value()) {
      const std::vector<int>& c = *g.supported_sm_clocks_mhz.value;
      j["supported_sm_clocks"] = {{"min_mhz", c.empty() ? ordered_json() : ordered_json(c.back())},
                                  {"max_mhz", c.empty() ? ordered_json() : ordered_json(c.front())},
                                  {"count", c.size()},
                                  {"at_memory_clock_mhz", Json(g.supported_at_memory_mhz)},
                                  {"mhz", c}};
    } else {
      j["supported_sm_clocks"] = nullptr;
    }
    if (g.power_limits.value.has_value()) {
      const gpu::PowerLimits& l = *g.power_limits.value;
      j["power_limit_w"] = {{"current", l.current_w},
                            {"default", l.default_w},
                            {"min", l.min_w},
                            {"max", l.max_w},
                            {"enforced", l.enforced_w}};
    } else {
      j["power_limit_w"] = nullptr;
    }
    if (g.power.value.has_value()) {
      j["power_w"] = g.power.value->watts();
      j["power_source"] = std::string(gpu::PowerSourceName(g.power.value->source));
    } else {
      j["power_w"] = nullptr;
      j["power_source"] = nullptr;
    }
    if (g.energy.value.has_value()) {
      j["energy_counter"] = true;
      j["energy_j"] = g.energy.value->joules();
    } else {
      j["energy_counter"] = g.energy.unsupported ? ordered_json(false) : ordered_json();
      j["energy_j"] = nullptr;
    }
    j["throttle_reasons"] =
        g.throttle.value.has_value() ? ordered_json(g.throttle.value->Names()) : ordered_json();
    ordered_json errors = ordered_json::object();
    ordered_json unsupported = ordered_json::array();
    const auto note = [&](const char* key, const auto& figure) {
      if (figure.unsupported) {
        unsupported.push_back(key);
      } else if (!figure.error.empty()) {
        errors[key] = figure.error;
      }
    };
    note("sm_clock_mhz", g.sm_clock_mhz);
    note("sm_clock_max_mhz", g.sm_clock_max_mhz);
    note("memory_clock_mhz", g.memory_clock_mhz);
    note("memory_clock_max_mhz", g.memory_clock_max_mhz);
    note("supported_sm_clocks", g.supported_sm_clocks_mhz);
    note("power_limit_w", g.power_limits);
    note("power_w", g.power);
    note("energy_j", g.energy);
    note("throttle_reasons", g.throttle);
    j["not_supported"] = unsupported;
    j["errors"] = errors;
    gpus.push_back(j);
  }
  root["gpus"] = gpus;
  return root.dump(2) + "\n";
}

// ---- The subcommand -----------------------------------------------------------

namespace {

constexpr char kFooter[] =
    "\nLists the GPUs this process sees (CUDA_VISIBLE_DEVICES applies, as in CUDA:\n"
    "indices or GPU-<uuid> prefixes, in the order given; MIG instances are refused)\n"
    "through NVML: name, UUID, architecture, SM and memory clocks, the supported SM\n"
    "clocks joulepipe plans with, power limits, power now (and its NVML source),\n"
    "whether a total energy counter exists, MIG mode and clock throttle reasons.\n"
    "\n"
    "NVML is loaded at run time: $JOULEPIPE_NVML_LIBRARY if set, else the driver's\n"
    "libnvidia-ml.so.1. Without a GPU, use the simulated library:\n"
    "  JOULEPIPE_NVML_LIBRARY=build/sim-nvml/libnvidia-ml.so.1 joulepipe gpus\n"
    "The last line says which library answered and whether the figures are\n"
    "measured or simulated.\n"
    "\n"
    "Exit codes: 0 listed (also with no GPU visible); 2 NVML unusable (no driver),\n"
    "a MIG instance in CUDA_VISIBLE_DEVICES, or a GPU query failed (still listed).";

}  // namespace

GpusSubcommand::GpusSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "gpus", "List the visible GPUs: clocks, power limits, energy counter (via NVML)")),
      flags_(std::make_unique<GpusFlags>()) {
  CLI::App* c = command();
  c->footer(kFooter);
  c->add_flag("--json", flags_->json, "Print one JSON object instead of the text");
}

GpusSubcommand::~GpusSubcommand() = default;

int GpusSubcommand::Run() const {
  const GpuReport report = CollectGpuReport();
  const std::string text = flags_->json ? GpuReportJson(report) : FormatGpuReport(report);
  std::fputs(text.c_str(), stdout);
  for (const GpuSnapshot& g : report.gpus) {
    if (g.HasErrors()) {
      std::fflush(stdout);
      std::fprintf(stderr,
                   "joulepipe: error: GPU %d (NVML %u) answered some queries with an error; "
                   "see the listing\n",
                   g.visible_index, g.nvml_index);
      return kExitUsage;
    }
  }
  return kExitOk;
}

}  // namespace joulepipe::cli
