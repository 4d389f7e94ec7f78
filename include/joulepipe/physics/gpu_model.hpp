// GPU power/performance model: what one GPU type can do, and how long a piece
// of work takes and how much power it draws at a given SM clock.
//
// The model (docs/simulator.md; forms from research on DVFS, constants from
// data/gpus/<id>.json, each with its source):
//
//   Time.   Work is characterised at the max SM clock by its duration t_max
//           and the share beta of it that is compute-bound (scales as fmax/f);
//           the rest (HBM traffic, communication) does not depend on the SM
//           clock:   t(f) = t_max * (beta * fmax / f + 1 - beta).
//
//   Voltage. V(f) = v_min for f <= ridge; above the ridge it rises linearly
//           to v_max at fmax (the voltage floor seen on Ampere/Hopper).
//
//   Power.  P(f) = static_w + dynamic_w * activity * (f / fmax) * (V(f) / v_max)^2
//           where activity (about 1 for dense bf16 GEMMs) scales the SM's
//           switching power and static_w is what the board draws under load
//           regardless of the SM clock (HBM, uncore, leakage).
//
//   Cap.    The power limit caps P: the effective clock is
//           min(requested, the highest clock whose P <= limit) (never below
//           the GPU's min clock). Time and power are taken at the effective
//           clock, so capped clocks cost time without saving power.
//
// Energy = P(f_eff) * t(f_eff). Blocked (P2P wait) and idle power are the
// GPU's measured constants p_block_w and idle_w.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace joulepipe::physics {

struct DvfsModel {
  double v_min_v = 0;    // core voltage floor (V), > 0
  double v_max_v = 0;    // voltage at the max SM clock (V), >= v_min_v
  double ridge_mhz = 0;  // highest clock still at v_min; in [min, max] SM clock
  double static_w = 0;   // load power independent of the SM clock (W), >= 0
  double dynamic_w = 0;  // SM power at fmax for activity 1 (W), > 0
};

// One GPU type (data/gpus/<id>.json). Every field's source is in `sources`
// (field name -> citation or "calibrated: ..." / "derived: ...").
struct GpuSpec {
  std::string id;                    // e.g. "a100-sxm4-80gb"
  std::string name;                  // as NVML names it, e.g. "NVIDIA A100-SXM4-80GB"
  std::vector<std::string> aliases;  // other accepted ids, e.g. "a100-sxm"
  int min_sm_mhz = 0;                // lowest supported SM clock
  int max_sm_mhz = 0;                // highest supported SM clock (fmax)
  int sm_step_mhz = 0;               // spacing of supported SM clocks
  int memory_mhz = 0;                // (single) memory clock
  double memory_gib = 0;
  double tdp_w = 0;  // default power limit
  double power_limit_min_w = 0;
  double power_limit_max_w = 0;
  double idle_w = 0;            // powered, no work, default clocks
  double p_block_w = 0;         // busy-waiting on P2P / collectives
  double peak_bf16_tflops = 0;  // dense bf16 tensor throughput at fmax
  double hbm_gbps = 0;          // memory bandwidth (GB/s)
  double nvlink_gbps = 0;       // GPU-GPU bandwidth per direction inside a
                                // node (GB/s; PCIe where there is no NVLink),
                                // used for tensor-parallel collectives
  DvfsModel dvfs;
  std::map<std::string, std::string> sources;

  // Supported SM clocks, highest first: max, max - step, ..., >= min.
  std::vector<int> SupportedSmClocks() const;
};

// A piece of GPU work (e.g. one stage's forward of one microbatch).
struct Work {
  double time_at_max_s = 0;     // duration at fmax with no power cap, > 0
  double compute_fraction = 1;  // beta in [0, 1]
  double activity = 1;          // dynamic-power scale, >= 0
};

struct OperatingPoint {
  double requested_mhz = 0;
  double effective_mhz = 0;  // after the power cap
  double voltage_v = 0;
  double time_s = 0;
  double power_w = 0;         // average power while running the work
  double energy_j = 0;        // power_w * time_s
  bool power_capped = false;  // effective < requested because of the limit
};

double Voltage(const GpuSpec& gpu, double mhz);

// Average power running work of this activity at exactly `mhz` (no cap).
double Power(const GpuSpec& gpu, double activity, double mhz);

// Time, power and energy of `work` at `requested_mhz` (clamped to the GPU's
// clock range) under `power_limit_w` (0 = the default limit, tdp_w).
OperatingPoint Run(const GpuSpec& gpu, const Work& work, double requested_mhz,
                   double power_limit_w = 0);

// Parses one data/gpus/<id>.json. Throws model::InputError naming `source`
// and the field on a missing or out-of-range value.
GpuSpec ParseGpuSpec(const std::string& json_text, const std::string& source);

// The GPU types built into the binary (data/gpus/*.json), sorted by id.
const std::vector<GpuSpec>& GpuCatalog();

// Looks up an id, an alias or the name NVML gives ("NVIDIA A100-SXM4-80GB"),
// case-insensitive. Throws model::InputError that lists the known ids when
// there is none.
const GpuSpec& FindGpu(std::string_view id_or_alias);
// The same lookup; nullptr when the catalogue has no such GPU.
const GpuSpec* FindGpuOrNull(std::string_view id_or_alias);

// The range a GPU's power limit may be set in, for planning power limits
// (solver::PowerLimitRequest): the given bounds where set (> 0), else the
// catalogue's figures for the GPU the profile's metadata names, else none
// (0). `source` says where they came from, in words and field names
// ("PowerLimitRequest::min_limit_w/PowerLimitRequest::max_limit_w over the profile's GPU,
// NVIDIA A100-SXM4-80GB (catalogue)"); "" when none. Throws
// model::InputError naming PowerLimitRequest::min_limit_w when the lower
// bound is above the upper.
struct PowerLimitRange {
  double min_w = 0;  // 0: none known
  double max_w = 0;
  std::string source;
};
PowerLimitRange PowerLimitRangeFor(const std::string& profile_gpu, double min_w, double max_w);

}  // namespace joulepipe::physics
