// `joulepipe gpus`: the GPUs this process sees through NVML, with what
// joulepipe needs to know about each: clocks (current, max, the supported SM
// clocks it can plan with), power limits, power now, whether an energy
// counter exists, MIG mode and throttle reasons. Ends with the methodology:
// which NVML library answered, measured or simulated.
//
// Exit codes: 0 with the list (also when no GPU is visible: an empty list
// and a line saying why); 2 when NVML cannot be used (no driver: the message
// says how to fix it), CUDA_VISIBLE_DEVICES names a MIG instance, or a GPU
// answered a query with an error (the list is still printed, the failing
// figures say why).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// One figure of a GPU: a value, or why it is missing ("not supported" or the
// NvmlError message).
template <typename T>
struct GpuFigure {
  std::optional<T> value;
  std::string error;         // "" when value is set
  bool unsupported = false;  // NVML_ERROR_NOT_SUPPORTED: not an error of the GPU
};

struct GpuSnapshot {
  int visible_index = 0;
  unsigned nvml_index = 0;
  std::string name, uuid, architecture;
  bool mig_enabled = false;
  GpuFigure<int> sm_clock_mhz, sm_clock_max_mhz;
  GpuFigure<int> memory_clock_mhz, memory_clock_max_mhz;
  GpuFigure<std::vector<int>> supported_sm_clocks_mhz;  // highest first
  GpuFigure<int> supported_at_memory_mhz;               // the memory clock they are for
  GpuFigure<gpu::PowerLimits> power_limits;
  GpuFigure<gpu::PowerReading> power;    // instantaneous (with fallback)
  GpuFigure<gpu::EnergyReading> energy;  // unsupported = no energy counter
  GpuFigure<gpu::ThrottleReasons> throttle;

  bool HasErrors() const;  // any figure with an error other than "not supported"
};

struct GpuReport {
  gpu::NvmlInfo nvml;
  std::string methodology;                  // gpu::NvmlMethodology()
  std::optional<std::string> cuda_visible;  // $CUDA_VISIBLE_DEVICES, nullopt if unset
  std::string visible_note;                 // gpu::DeviceList::visible_devices_note
  std::vector<GpuSnapshot> gpus;
};

// Queries every visible GPU (MIG GPUs listed, not refused). Throws
// gpu::NvmlUnavailableError, gpu::MigError (a MIG-... entry) and NvmlError
// for failures while opening the GPUs (e.g. a lost GPU's UUID cannot be
// read); failures of single figures are recorded in the snapshot.
GpuReport CollectGpuReport();

// The text for people, ending with the methodology line.
std::string FormatGpuReport(const GpuReport& report);

// One JSON object: {"methodology", "nvml":{...}, "cuda_visible_devices",
// "cuda_visible_devices_note", "gpus":[{...}]}; a missing figure is null,
// its key listed in the GPU's "not_supported" or, with NVML's message, in
// its "errors" object (docs/cli.md has the fields).
std::string GpuReportJson(const GpuReport& report);

// The subcommand: registers `gpus`, its flags and help on `app`.
struct GpusFlags;
class GpusSubcommand : public Subcommand {
 public:
  explicit GpusSubcommand(CLI::App* app);
  ~GpusSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<GpusFlags> flags_;
};

}  // namespace joulepipe::cli
