// Energy measurement windows over GPUs (NVML) and CPU package / DRAM (RAPL).
//
//   monitor::Monitor monitor(monitor::MonitorOptions{});
//   monitor.Begin("step");
//   ...                                   // the work
//   monitor::Measurement m = monitor.End("step");
//   // m.duration_s, m.gpus[i].energy_j, m.cpus, m.total_energy_j(), m.methodology
//
// Windows are named; any number may be open at once and they may nest or
// overlap freely (each name is independent). Begin of an open name and End
// of a name that is not open throw WindowError.
//
// How a GPU's energy is measured (docs/measure.md has the accuracy limits):
//   * counter   — the GPU's NVML total-energy counter (mJ). NVML publishes it
//                 every ~100 ms (counter_period_s), so an unaligned delta is
//                 off by up to one period's energy at each edge: ±10 % of a
//                 1 s window, ±1 % of a 10 s one.
//   * sampling  — GPUs without the counter: a background thread reads
//                 instant power every sampling_period_s and integrates it
//                 (trapezoid); a window's edges extrapolate from the latest
//                 sample.
//   * instant-approx — windows shorter than the source's period (counter or
//                 sampling) get instant power at End x duration, and are
//                 flagged approximate.
// A counter window with unaligned edges shorter than kCounterPeriodsForExact
// updates keeps the counter's delta but is flagged approximate too: its two
// edges may be off by one update's energy each, over ±20 % of the window.
// Edges::kAligned windows (for whole jobs, e.g. `joulepipe measure`) wait at
// Begin and at End for the counter's next update and correct the partial
// periods with instant power, which removes the ±1-period edge error; they
// block for up to one period at each edge. Edges::kCheap (the default) is
// for per-step windows on the training thread.
//
// Cost and threads: Begin and End do no I/O beyond the counter (and RAPL)
// reads and, after warm-up, allocate nothing when End(name, &m) reuses a
// Measurement (bench/window_cost.cpp measures them). Call Begin/End from one
// thread at a time; the sampler thread is internal. No CUDA synchronisation
// happens here: synchronise before Begin/End if the window must contain
// exactly the GPU work launched inside it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/rapl.hpp"

namespace joulepipe::monitor {

using Clock = std::chrono::steady_clock;

// Begin of a name already open, End of a name not open. A model::InputError,
// so the CLI reports it as a usage error.
class WindowError : public model::InputError {
 public:
  explicit WindowError(const std::string& message) : model::InputError(message) {}
};

// Requested CPU measurement (RAPL) could not be had. what() names the path and
// how to grant access.
class RaplUnavailableError : public model::InputError {
 public:
  explicit RaplUnavailableError(const std::string& message) : model::InputError(message) {}
};

// What the monitor needs of one GPU. NvmlGpuMeters() wraps gpu::Device; tests
// and benchmarks may supply their own. Reads may throw (gpu::NvmlError) and
// must be safe to call from two threads at once (the sampler and Begin/End).
class GpuMeter {
 public:
  virtual ~GpuMeter() = default;
  virtual int index() const = 0;                   // the visible (CUDA) index reports show
  virtual std::string name() const { return ""; }  // e.g. "NVIDIA A100-SXM4-80GB"
  // The total energy counter in mJ; nullopt when the GPU has none.
  virtual std::optional<uint64_t> ReadEnergyMj() const = 0;
  virtual double ReadPowerW() const = 0;  // instantaneous power
  // The SM clock the GPU runs at now (MHz); 0 when not known. Never throws.
  virtual int ReadSmClockMhz() const { return 0; }
};

// The visible GPUs `indices` (nullopt: all visible) as meters over NVML.
// Throws gpu::NvmlUnavailableError without NVML, model::InputError for an
// index that is not visible (naming the visible range).
std::vector<std::unique_ptr<GpuMeter>> NvmlGpuMeters(
    const std::optional<std::vector<int>>& indices);

// The GPU with NVML index `nvml_index` (the numbering nvidia-smi shows,
// ignoring CUDA_VISIBLE_DEVICES), as a meter over NVML: what a training
// rank that knows its device's NVML index measures. Throws
// gpu::GpuArgumentError when no GPU has that index.
std::unique_ptr<GpuMeter> NvmlGpuMeterByNvmlIndex(int nvml_index);

enum class CpuMode {
  kOff,          // no RAPL
  kIfAvailable,  // RAPL if readable; otherwise a note in the methodology
  kRequired,     // RAPL or RaplUnavailableError from the constructor
};

enum class EnergySource { kCounter, kSampling, kInstantApprox };
const char* EnergySourceName(EnergySource source);  // "counter", "sampling", "instant-approx"

enum class Edges { kCheap, kAligned };

struct MonitorOptions {
  std::optional<std::vector<int>> gpus;  // visible indices; nullopt = all; {} = none
  CpuMode cpu = CpuMode::kIfAvailable;
  std::string rapl_root = kDefaultRaplRoot;
  double sampling_period_s = 0.1;  // sampler thread (counterless GPUs, RAPL wraps)
  double counter_period_s = 0.1;   // NVML's update period of the energy counter
  bool force_sampling = false;     // treat every GPU as counterless
  bool sample_all_gpus = false;    // sampler reads every GPU (LatestPower for all)
  // Short windows from samples (a training step's line): the sampler reads
  // every GPU each sampling_period_s, and a window shorter than
  // kCounterPeriodsForExact counter periods takes its energy from the power
  // samples taken DURING it (trapezoid integral, EnergySource::kSampling;
  // approximate only below kCounterPeriodsForExact sampling periods), not
  // from one instant reading at its end (which reads whatever runs after it,
  // e.g. default clocks after a step) nor from unaligned counter edges.
  bool short_windows_sampled = false;
  // Edges::kAligned waits at most this long for a counter update, then falls
  // back to a cheap edge for that GPU (GpuEnergy::aligned = false).
  double align_timeout_s = 1.0;
  // Whole-job windows (`joulepipe measure`): a GPU whose reads fail during a
  // window (lost, the driver failing) does not make End throw; End reports
  // it as failed with the energy up to its last good reading. The sampler
  // thread then reads every GPU each sampling_period_s (counter GPUs: their
  // counter too), so that reading is at most one period old. Failures at
  // Begin still throw.
  bool tolerate_gpu_failures = false;
};

// Counter updates below which a window with unaligned edges is approximate
// (the header comment above says why).
inline constexpr double kCounterPeriodsForExact = 10;

struct GpuEnergy {
  int index = 0;  // visible index
  double energy_j = 0;
  EnergySource source = EnergySource::kCounter;
  bool approximate = false;  // shorter than the source's period (or, counter with
                             // unaligned edges, than kCounterPeriodsForExact updates)
  bool aligned = false;      // both edges aligned to counter updates
  // Only with MonitorOptions::tolerate_gpu_failures: the GPU's reads failed
  // during the window. energy_j then covers [start, start + measured_s], up to
  // the last reading that succeeded (0 if none did), and `error` says what
  // failed. measured_s is the window's duration when nothing failed.
  bool failed = false;
  double measured_s = 0;
  std::string error;
};

struct CpuEnergy {
  int socket = 0;
  double package_j = 0;
  bool has_dram = false;  // a dram zone exists (Intel servers; not AMD)
  double dram_j = 0;
};

struct Measurement {
  std::string name;
  double duration_s = 0;
  std::vector<GpuEnergy> gpus;  // in the monitor's GPU order
  std::vector<CpuEnergy> cpus;  // empty unless CPU energy is measured
  bool cpu_measured = false;
  double gpu_energy_j = 0;   // sum over gpus
  double cpu_energy_j = 0;   // sum of package_j
  double dram_energy_j = 0;  // sum of dram_j
  // Monitor::methodology() at the time of End.
  std::string methodology;

  double total_energy_j() const { return gpu_energy_j + cpu_energy_j + dram_energy_j; }
  bool approximate() const;  // any GPU approximate
  bool complete() const;     // no GPU failed
};

class Monitor {
 public:
  // Opens the GPUs of options.gpus through NVML (NvmlGpuMeters) and RAPL per
  // options.cpu; starts the sampler thread if a GPU lacks the counter, RAPL
  // is on, or sample_all_gpus. Throws what NvmlGpuMeters throws,
  // RaplUnavailableError (kRequired), model::InputError for bad periods.
  explicit Monitor(const MonitorOptions& options);
  // Same over the given meters (options.gpus is ignored).
  Monitor(std::vector<std::unique_ptr<GpuMeter>> meters, const MonitorOptions& options);
  ~Monitor();  // stops the sampler thread
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  void Begin(std::string_view name, Edges edges = Edges::kCheap);
  Measurement End(std::string_view name);
  // As End, into *out, reusing its storage (no allocation once warm).
  void End(std::string_view name, Measurement* out);
  bool IsOpen(std::string_view name) const;

  int gpu_count() const;
  int gpu_index(int i) const;            // visible index of the i-th GPU
  std::string gpu_name(int i) const;     // GpuMeter::name() of the i-th GPU
  EnergySource gpu_source(int i) const;  // kCounter or kSampling
  bool cpu_measured() const;
  const RaplCounters* rapl() const;  // nullptr when CPU is off
  // Why CPU energy is not measured ("" when it is or was not asked for).
  const std::string& cpu_note() const;
  // The latest sampled power of GPU i (W) and the highest seen, or nullopt
  // if the sampler does not read it (counter GPUs without sample_all_gpus)
  // or has no sample yet.
  std::optional<double> LatestPower(int i) const;
  std::optional<double> MaxPower(int i) const;
  // How the figures are measured, e.g.
  //   "GPU 0, 1: NVML energy counter (updated every ~100 ms); CPU: RAPL
  //    package+dram, 2 sockets (/sys/class/powercap); totals are GPU+CPU+DRAM."
  // followed by any note on CPU availability. Sources of the GPU readings
  // (NVML, simulated NVML) are for the caller to add.
  const std::string& methodology() const;
  // "GPU-only", "GPU+CPU", "GPU+CPU+DRAM", "CPU-only", "CPU+DRAM".
  const char* scope() const;

  struct State;  // defined in monitor.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace joulepipe::monitor
