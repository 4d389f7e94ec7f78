// From FLOPs and bytes to time and energy on a GPU: physics::Work per stage and
// kind, the simulated profile, and the summary figures (MFU, DP all-reduce).
#include <algorithm>
#include <cmath>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::physics {

namespace {

using model::InputError;

std::string Num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

double LimitOf(const GpuSpec& gpu, const ProfileOptions& options) {
  if (!std::isfinite(options.power_limit_w) || options.power_limit_w < 0) {
    throw InputError("ProfileOptions::power_limit_w",
                     "ProfileOptions::power_limit_w must be a finite number of watts >= 0 (got " +
                         Num(options.power_limit_w) + "); use 0 for " + gpu.id +
                         "'s default, its TDP of " + Num(gpu.tdp_w) + " W");
  }
  if (options.power_limit_w == 0) return gpu.tdp_w;
  const double lo = gpu.power_limit_min_w, hi = gpu.power_limit_max_w;
  if ((lo > 0 && options.power_limit_w < lo) || (hi > 0 && options.power_limit_w > hi)) {
    throw InputError("ProfileOptions::power_limit_w",
                     "ProfileOptions::power_limit_w " + Num(options.power_limit_w) +
                         " W is outside " + gpu.id + "'s range " + Num(lo) + ".." + Num(hi) +
                         " W; choose a limit in that range, or 0 for its TDP of " + Num(gpu.tdp_w) +
                         " W");
  }
  return options.power_limit_w;
}

double FmaxTime(const SimulatedStage& s) {
  return s.forward_at_max.time_s + s.backward_at_max.time_s;
}

double SlowestStageTime(const SimulatedWorkload& w) {
  double slowest = 0;
  for (const SimulatedStage& s : w.stages) slowest = std::max(slowest, FmaxTime(s));
  return slowest;
}

// A simulated instruction longer than a profile may hold (model/profile.hpp)
// means a microbatch far too big for one stage's GPUs; says which fields to
// change rather than which ClockPoint bound it broke.
void CheckInstructionTime(const WorkloadSpec& spec, const GpuSpec& gpu, int stage, const char* kind,
                          int mhz, double time_s) {
  if (time_s <= model::kMaxInstructionSeconds) return;
  throw InputError("WorkloadSpec::microbatch_size",
                   "WorkloadSpec::microbatch_size " + std::to_string(spec.microbatch_size) +
                       " x WorkloadSpec::seq_length " + std::to_string(spec.seq()) +
                       " tokens make stage " + std::to_string(stage) + "'s " + kind + " take " +
                       Num(time_s) + " s at " + std::to_string(mhz) + " MHz on " + gpu.id +
                       ", more than an hour per microbatch; use a smaller "
                       "WorkloadSpec::microbatch_size or WorkloadSpec::seq_length, or a larger "
                       "Parallelism::tp or Parallelism::pp");
}

}  // namespace

WorkBreakdown CostToWork(const KindCost& cost, const GpuSpec& gpu) {
  if (!(gpu.peak_bf16_tflops > 0) || !(gpu.hbm_gbps > 0)) {
    throw InputError(gpu.id +
                     " has no peak_bf16_tflops or hbm_gbps; the workload model needs "
                     "both");
  }
  const double link_gbps = cost.tp_link_gbps > 0 ? cost.tp_link_gbps : gpu.nvlink_gbps;
  if (cost.tp_comm_bytes > 0 && !(link_gbps > 0)) {
    throw InputError("Parallelism::tp",
                     gpu.id +
                         " has no nvlink_gbps; tensor parallelism (Parallelism::tp > 1) "
                         "needs it; set Parallelism::tp to 1 or choose a GPU with NVLink");
  }
  WorkBreakdown b;
  const double peak_tflops =
      gpu.peak_bf16_tflops * (cost.precision == Precision::kTf32 ? kTf32PeakShare : 1.0);
  b.compute_s = cost.gemm_flops / (peak_tflops * 1e12 * kGemmEfficiency);
  b.memory_s = cost.hbm_bytes() / (gpu.hbm_gbps * 1e9 * kMemoryEfficiency);
  const double comm_s = cost.tp_comm_bytes > 0 ? cost.tp_comm_bytes / (link_gbps * 1e9) : 0.0;
  (cost.tp_link_gbps > 0 ? b.network_s : b.comm_s) = comm_s;
  const double total = b.compute_s + b.memory_s + b.comm_s;
  b.work.time_at_max_s = total;
  b.work.compute_fraction = total > 0 ? b.compute_s / total : 0.0;
  const double mix =
      kGemmActivity * b.compute_s + kMemoryActivity * b.memory_s + kCommActivity * b.comm_s;
  b.work.activity = total > 0 ? mix / total / kReferenceActivityMix : 0.0;
  return b;
}

namespace {

// The highest clock <= f at which work of this activity draws at most
// `limit` (the lowest clock when even that draws more).
double CapClock(const GpuSpec& gpu, double activity, double f, double limit) {
  if (Power(gpu, activity, f) <= limit) return f;
  // Bracketed by the whole clock range (as physics::Run does), not [min, f]:
  // every requested clock above the cap gets exactly the same one, so time
  // cannot rise with the request by the bisection's tolerance.
  double a = gpu.min_sm_mhz, b = gpu.max_sm_mhz;
  if (Power(gpu, activity, a) >= limit) return a;
  while (b - a > 1e-3) {
    const double m = 0.5 * (a + b);
    (Power(gpu, activity, m) > limit ? b : a) = m;
  }
  return a;
}

// The GPU blocked on the network for `network_s` after the active part.
OperatingPoint WithNetworkWait(const GpuSpec& gpu, OperatingPoint op, double network_s) {
  if (network_s <= 0) return op;
  op.time_s += network_s;
  op.energy_j += network_s * gpu.p_block_w;
  op.power_w = op.energy_j / op.time_s;
  return op;
}

}  // namespace

OperatingPoint RunByKernelClass(const GpuSpec& gpu, const WorkBreakdown& b, double requested_mhz,
                                double power_limit_w, double share) {
  const OperatingPoint average = Run(gpu, b.work, requested_mhz, power_limit_w);
  OperatingPoint op = average;
  const double other_s = b.memory_s + b.comm_s;
  const double limit = power_limit_w > 0 ? power_limit_w : gpu.tdp_w;
  const double f = std::clamp(requested_mhz, static_cast<double>(gpu.min_sm_mhz),
                              static_cast<double>(gpu.max_sm_mhz));
  const double a_compute = kGemmActivity / kReferenceActivityMix;
  // The limit binds when the GEMMs, which draw the most, exceed it, even
  // where the instruction's average stays below: the board caps power
  // within milliseconds, kernel by kernel. Asking whether the average was
  // capped instead made time jump up at the clock where the average reached
  // the limit (a 400 W A100 ran GPT-3's stage forward 2.8 % faster at
  // 1290 MHz than at 1410), so a lower clock could look faster. As it is,
  // each class runs at min(requested, its cap), and time never rises with
  // the requested clock.
  if (Power(gpu, a_compute, f) <= limit || b.compute_s <= 0 || other_s <= 0 || share <= 0) {
    return WithNetworkWait(gpu, op, b.network_s);
  }
  const double a_other =
      (kMemoryActivity * b.memory_s + kCommActivity * b.comm_s) / other_s / kReferenceActivityMix;
  const double f_compute = CapClock(gpu, a_compute, f, limit);
  const double f_other = CapClock(gpu, a_other, f, limit);
  const double t_compute = b.compute_s * gpu.max_sm_mhz / f_compute;
  const double by_class_s = t_compute + other_s;
  const double by_class_j =
      Power(gpu, a_compute, f_compute) * t_compute + Power(gpu, a_other, f_other) * other_s;
  op.time_s = (1 - share) * average.time_s + share * by_class_s;
  op.energy_j = (1 - share) * average.energy_j + share * by_class_j;
  op.power_w = op.energy_j / op.time_s;
  return WithNetworkWait(gpu, op, b.network_s);
}

std::vector<int> ProfileClocks(const GpuSpec& gpu, const ProfileOptions& options) {
  const std::vector<int> supported = gpu.SupportedSmClocks();
  int floor = options.min_mhz;
  if (floor == 0) {
    floor = static_cast<int>(std::ceil(0.6 * gpu.max_sm_mhz));
  } else if (floor < gpu.min_sm_mhz || floor > gpu.max_sm_mhz) {
    throw InputError("ProfileOptions::min_mhz",
                     "ProfileOptions::min_mhz " + std::to_string(floor) + " is outside " + gpu.id +
                         "'s SM clock range " + std::to_string(gpu.min_sm_mhz) + ".." +
                         std::to_string(gpu.max_sm_mhz) +
                         " MHz; choose a clock in that range, or 0 for the lowest supported "
                         "clock >= 0.6 x " +
                         std::to_string(gpu.max_sm_mhz) + " MHz");
  }
  std::vector<int> clocks;
  for (int mhz : supported) {
    if (mhz >= floor) clocks.push_back(mhz);
  }
  if (clocks.empty()) clocks.push_back(gpu.max_sm_mhz);
  return clocks;
}

SimulatedWorkload SimulateWorkload(const WorkloadSpec& spec, const GpuSpec& gpu,
                                   const ProfileOptions& options) {
  SimulatedWorkload w;
  w.spec = spec;
  w.layer_split = ResolveLayerSplit(spec);
  w.power_limit_w = LimitOf(gpu, options);
  if (!(options.class_cap_share >= 0 && options.class_cap_share <= 1)) {
    throw InputError("ProfileOptions::class_cap_share",
                     "ProfileOptions::class_cap_share must be 0..1 (got " +
                         std::to_string(options.class_cap_share) +
                         "): the share of a power-capped instruction capped per kernel class");
  }
  w.clocks = ProfileClocks(gpu, options);
  for (const StageCost& cost : ComputeStageCosts(spec)) {
    SimulatedStage s;
    s.cost = cost;
    s.forward = CostToWork(cost.forward, gpu);
    s.backward = CostToWork(cost.backward, gpu);
    s.forward_at_max =
        RunByKernelClass(gpu, s.forward, gpu.max_sm_mhz, w.power_limit_w, options.class_cap_share);
    s.backward_at_max =
        RunByKernelClass(gpu, s.backward, gpu.max_sm_mhz, w.power_limit_w, options.class_cap_share);
    double least = 0;
    for (int mhz : w.clocks) {
      const OperatingPoint f =
          RunByKernelClass(gpu, s.forward, mhz, w.power_limit_w, options.class_cap_share);
      const OperatingPoint b =
          RunByKernelClass(gpu, s.backward, mhz, w.power_limit_w, options.class_cap_share);
      const std::string where = "simulated stage " + std::to_string(cost.stage);
      CheckInstructionTime(spec, gpu, cost.stage, "forward", mhz, f.time_s);
      CheckInstructionTime(spec, gpu, cost.stage, "backward", mhz, b.time_s);
      w.profile.Add(cost.stage, model::Kind::kForward, {mhz, f.time_s, f.energy_j}, where);
      w.profile.Add(cost.stage, model::Kind::kBackward, {mhz, b.time_s, b.energy_j}, where);
      // Clocks run highest first, so ties keep the faster clock.
      const double energy = f.energy_j + b.energy_j;
      if (s.min_energy_mhz == 0 || energy < least) {
        least = energy;
        s.min_energy_mhz = mhz;
      }
    }
    w.stages.push_back(s);
  }
  return w;
}

model::Profile SimulateProfile(const WorkloadSpec& spec, const GpuSpec& gpu,
                               const ProfileOptions& options) {
  return SimulateWorkload(spec, gpu, options).profile;
}

model::Profile StampedProfile(const SimulatedWorkload& workload, const GpuSpec& gpu) {
  model::Profile profile = workload.profile;
  profile.metadata.gpu = gpu.name;
  profile.metadata.p_block_w = gpu.p_block_w;
  profile.metadata.source = "simulated";
  profile.metadata.date = model::IsoUtcNow();
  profile.metadata.joulepipe_version = std::string(model::Version());
  const WorkloadSpec& spec = workload.spec;
  profile.metadata.method =
      "workload model " + spec.model.id + " on " + gpu.id + ", TP " +
      std::to_string(spec.parallel.tp) + " x PP " + std::to_string(spec.parallel.pp) +
      ", microbatch " + std::to_string(spec.microbatch_size) + " x " + std::to_string(spec.seq()) +
      ", " + std::string(PrecisionName(spec.precision)) + ", recompute " +
      std::string(RecomputeName(spec.recompute)) + ", framework " +
      std::string(FrameworkName(spec.framework)) + "; " +
      std::string(FrameworkValidation(spec.framework));
  return profile;
}

double DpAllReduceSeconds(const StageCost& stage, int dp, double inter_node_gbps) {
  if (dp <= 1) return 0;
  if (!(inter_node_gbps > 0) || !std::isfinite(inter_node_gbps)) {
    throw InputError("the data-parallel bandwidth must be > 0 GB/s (got " + Num(inter_node_gbps) +
                     ")");
  }
  const double bytes = 4.0 * stage.parameters;  // fp32 gradients
  return 2.0 * (dp - 1) / dp * bytes / (inter_node_gbps * 1e9);
}

double SteadyStateMfu(const SimulatedWorkload& w, const GpuSpec& gpu) {
  double model_flops = 0;
  for (const SimulatedStage& s : w.stages) {
    model_flops += s.cost.forward.model_flops + s.cost.backward.model_flops;
  }
  const double slowest = SlowestStageTime(w);
  if (slowest <= 0) return 0;
  return model_flops / (w.stages.size() * slowest * gpu.peak_bf16_tflops * 1e12);
}

IterationEstimate EstimateIteration(const SimulatedWorkload& w, const GpuSpec& gpu,
                                    int microbatches, double inter_node_gbps) {
  IterationEstimate e;
  if (microbatches < 1 || w.stages.empty()) return e;
  double fill_drain = 0, model_flops = 0, hardware_flops = 0, sync = 0;
  for (const SimulatedStage& s : w.stages) {
    fill_drain += FmaxTime(s);
    model_flops += s.cost.forward.model_flops + s.cost.backward.model_flops;
    hardware_flops += s.cost.forward.gemm_flops + s.cost.backward.gemm_flops;
    sync = std::max(sync, DpAllReduceSeconds(s.cost, w.spec.parallel.dp, inter_node_gbps));
  }
  e.time_s = fill_drain + (microbatches - 1) * SlowestStageTime(w) + sync;
  const double gpu_seconds = static_cast<double>(w.stages.size()) * e.time_s;
  e.mfu = microbatches * model_flops / (gpu_seconds * gpu.peak_bf16_tflops * 1e12);
  e.hardware_tflops = microbatches * hardware_flops / gpu_seconds / 1e12;
  return e;
}

}  // namespace joulepipe::physics
