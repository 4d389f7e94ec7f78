// Per-stage GPU memory of a Megatron-style training job: what one GPU of
// each pipeline stage holds at its peak, so that a configuration that does
// not fit is never recommended.
//
//   model state   weights, gradients and optimizer states of the stage's
//                 parameters (StageCost::parameters, per GPU), in the bytes
//                 per parameter of Megatron's mixed-precision Adam;
//   activations   what the forwards in flight keep for their backwards:
//                 per layer and microbatch by the counts of Korthikanti et
//                 al. 2022 (Table 2), generalised to any attention and MLP
//                 width, times the microbatches in flight at the stage's
//                 peak under the schedule.
//
// Formulas, constants, sources and the checks against Megatron-LM's own
// estimate: docs/workload-model.md, "Memory". Estimates, never measured:
// allocator fragmentation, NCCL buffers and the CUDA context are not in
// them (the caller's margin is for those).
#pragma once

#include <string>
#include <vector>

#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::physics {

// Which pipeline schedule keeps activations in flight, and how many
// microbatches and virtual stages (chunks) per pipeline.
struct PipelineShape {
  enum class Kind { kGPipe, k1F1B, kInterleaved };
  Kind kind = Kind::k1F1B;
  int microbatches = 1;  // per pipeline and iteration
  int chunks = 1;        // virtual stages per GPU (kInterleaved only)
};

struct MemoryOptions {
  // Megatron's --use-distributed-optimizer: fp32 master weights and Adam
  // states sharded over the data-parallel ranks (ZeRO-1).
  bool distributed_optimizer = true;
  // Megatron's --sequence-parallel (with tp > 1): the activations outside
  // the tensor-parallel regions (norms, dropout, the linears' inputs) are
  // split over the TP ranks too.
  bool sequence_parallel = true;
};

// Bytes per parameter of the model state (per GPU of a stage):
//   bf16: bf16 weights 2 + fp32 main gradients 4 + fp32 master weights 4 +
//         Adam moments 4 + 4 = 18; with the distributed optimizer the last
//         12 are divided by dp (Megatron: 6 + 12 / dp);
//   tf32: fp32 weights 4 + gradients 4 + Adam moments 8 = 16 (no master
//         copy); the moments divided by dp with the distributed optimizer.
double ModelStateBytesPerParameter(Precision precision, int dp, bool distributed_optimizer);

// The chunk-microbatches whose activations a stage holds at its peak:
//   GPipe        every microbatch (all forwards run before any backward);
//   1F1B         min(M, S - stage): the warm-up forwards plus one;
//   interleaved  min(M x V, 2 (S - stage - 1) + (V - 1) S + 1) chunk
//                forwards (Megatron's warm-up plus one; all M x V when
//                M == S, where Megatron runs every forward first), each of
//                1/V of the stage's layers.
// Throws model::InputError on a stage outside 0..stages-1 or counts < 1.
int InFlightChunks(const PipelineShape& shape, int stages, int stage);

struct StageMemory {
  int stage = 0;
  double parameters = 0;         // per GPU
  double model_state_bytes = 0;  // weights + gradients + optimizer states
  double activation_bytes = 0;   // at the stage's peak
  int in_flight_chunks = 0;      // InFlightChunks
  double total_bytes() const { return model_state_bytes + activation_bytes; }
};

struct MemoryEstimate {
  std::vector<StageMemory> stages;
  double gpu_bytes = 0;  // the GPU's memory (GpuSpec::memory_gib)
  // The stage with the largest total, and its headroom (gpu_bytes - total;
  // negative when it does not fit).
  int peak_stage = 0;
  double peak_bytes() const { return stages[peak_stage].total_bytes(); }
  double headroom_bytes() const { return gpu_bytes - peak_bytes(); }
  // Whether every stage fits with `margin` (a fraction of the GPU's memory,
  // 0..1) left for what the estimate leaves out.
  bool Fits(double margin) const { return peak_bytes() <= gpu_bytes * (1 - margin); }
};

// Activation bytes one microbatch keeps per transformer layer on one GPU of
// the spec's stages (cross_attention: a decoder layer of an encoder-decoder).
double LayerActivationBytes(const WorkloadSpec& spec, bool cross_attention,
                            const MemoryOptions& options);

// The estimate for every stage. Calls ComputeStageCosts (so its input
// errors); throws model::InputError naming the shape's field on a bad count.
MemoryEstimate EstimateMemory(const WorkloadSpec& spec, const PipelineShape& shape,
                              const GpuSpec& gpu, const MemoryOptions& options = {});

}  // namespace joulepipe::physics
