#include "joulepipe/physics/memory.hpp"

#include <algorithm>
#include <string>

#include "joulepipe/model/error.hpp"

namespace joulepipe::physics {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

void RequireCount(const char* field, int value, int lo) {
  if (value < lo) {
    throw model::InputError(std::string(field) + " must be >= " + std::to_string(lo) + " (got " +
                            std::to_string(value) + ")");
  }
}

}  // namespace

double ModelStateBytesPerParameter(Precision precision, int dp, bool distributed_optimizer) {
  RequireCount("Parallelism::dp", dp, 1);
  // Weights + gradients, then what the distributed optimizer shards.
  const double kept = precision == Precision::kBf16 ? 2 + 4 : 4 + 4;
  const double sharded = precision == Precision::kBf16 ? 4 + 4 + 4 : 4 + 4;
  return kept + sharded / (distributed_optimizer ? dp : 1);
}

int InFlightChunks(const PipelineShape& shape, int stages, int stage) {
  RequireCount("PipelineShape::microbatches", shape.microbatches, 1);
  RequireCount("Parallelism::pp", stages, 1);
  if (stage < 0 || stage >= stages) {
    throw model::InputError("stage " + std::to_string(stage) + " is outside 0.." +
                            std::to_string(stages - 1));
  }
  const long m = shape.microbatches;
  switch (shape.kind) {
    case PipelineShape::Kind::kGPipe:
      return static_cast<int>(m);
    case PipelineShape::Kind::k1F1B:
      return static_cast<int>(std::min<long>(m, stages - stage));
    case PipelineShape::Kind::kInterleaved: {
      RequireCount("PipelineShape::chunks", shape.chunks, 1);
      const long v = shape.chunks;
      // Megatron runs every forward first when M == S.
      if (m == stages) return static_cast<int>(m * v);
      const long warmup = 2L * (stages - stage - 1) + (v - 1) * stages;
      return static_cast<int>(std::min<long>(m * v, warmup + 1));
    }
  }
  return static_cast<int>(m);
}

// Counted per microbatch from the tensors autograd keeps (Korthikanti et
// al. 2022, Sec. 4.1, in elements of s x b):
//   outside the TP regions: the QKV linear's input (2h bytes), the two
//     norms' inputs (2h each), the MLP's first linear's input (2h), the two
//     dropout masks (h each, 1 byte): 10 h in 16-bit activations;
//   inside (split over TP): Q, K, V (2 (q + 2 kv)), the output linear's
//     input (2 q), the MLP's hidden tensors (GELU/ReLU: the first linear's
//     output and the activation's, 2 f each; SwiGLU: gate and up 4 f, the
//     SiLU's output 2 f and the product 2 f);
//   eager attention (no fused kernel): the score matrix's softmax output
//     (2), its dropout mask (1) and output (2) per head: 5 a s.
// With q = kv = h and f = 4h that is 34 h + 5 a s, Korthikanti's Table 2.
// A decoder layer's cross-attention adds its query input and norm (4h),
// its mask (h), Q and K, V over the encoder output (2 (q + 2 kv)), the
// output linear's input (2 q) and, eager, another 5 a s.
double LayerActivationBytes(const WorkloadSpec& spec, bool cross_attention,
                            const MemoryOptions& options) {
  const TransformerConfig& m = spec.model;
  const double sb = spec.tokens();
  const double h = m.hidden, q = m.q_dim(), kv = m.kv_dim(), f = m.ffn_hidden;
  const double a = m.heads, s = spec.seq();
  const int t = spec.parallel.tp;
  const double elem = spec.precision == Precision::kTf32 ? 4 : 2;       // bytes per activation
  const double mlp_hidden = m.mlp == MlpKind::kSwiglu ? 4 * f : 2 * f;  // elements
  double outside = elem * 4 * h + 2 * h;                                // 4 tensors + 2 masks
  double inside = elem * (q + 2 * kv + q + mlp_hidden);
  const bool eager = spec.framework == Framework::kHfEager;
  if (eager) inside += (2 * elem + 1) * a * s;
  if (cross_attention) {
    outside += elem * 2 * h + h;
    inside += elem * (q + 2 * kv + q);
    if (eager) inside += (2 * elem + 1) * a * s;
  }
  const double outside_split = options.sequence_parallel && t > 1 ? t : 1;
  return sb * (outside / outside_split + inside / t);
}

MemoryEstimate EstimateMemory(const WorkloadSpec& spec, const PipelineShape& shape,
                              const GpuSpec& gpu, const MemoryOptions& options) {
  const std::vector<StageCost> costs = ComputeStageCosts(spec);
  const int stages = spec.parallel.pp, t = spec.parallel.tp;
  const double per_param =
      ModelStateBytesPerParameter(spec.precision, spec.parallel.dp, options.distributed_optimizer);
  const double sb = spec.tokens(), h = spec.model.hidden;
  const double elem = spec.precision == Precision::kTf32 ? 4 : 2;
  const double split = options.sequence_parallel && t > 1 ? t : 1;
  MemoryEstimate out;
  out.gpu_bytes = gpu.memory_gib * kGiB;
  for (const StageCost& c : costs) {
    StageMemory s;
    s.stage = c.stage;
    s.parameters = c.parameters;
    s.model_state_bytes = c.parameters * per_param;
    s.in_flight_chunks = InFlightChunks(shape, stages, c.stage);
    const int chunks = shape.kind == PipelineShape::Kind::kInterleaved ? shape.chunks : 1;
    // Per microbatch of the whole stage (all its chunks).
    double per_microbatch = 0, largest_layer = 0;
    for (int l = c.first_layer; l < c.first_layer + c.layers; ++l) {
      const double full = LayerActivationBytes(spec, spec.model.IsCrossAttentionLayer(l), options);
      largest_layer = std::max(largest_layer, full);
      // Full recomputation keeps only each layer's input; the backward
      // rebuilds one layer's activations at a time (the + largest_layer).
      per_microbatch += spec.recompute == Recompute::kFull ? elem * sb * h / split : full;
    }
    // The embedding's token ids (int64) and dropout mask travel with every
    // microbatch in flight; the last stage's fp32 logits and the final
    // norm's output live for one microbatch (its backward follows at once).
    if (c.embedding) per_microbatch += chunks * (8 * spec.tokens() + sb * h / split);
    s.activation_bytes = s.in_flight_chunks * per_microbatch / chunks;
    if (spec.recompute == Recompute::kFull && c.layers > 0) s.activation_bytes += largest_layer;
    if (c.lm_head) {
      s.activation_bytes += sb * (4.0 * spec.padded_vocab() / t + elem * h / split);
    }
    out.stages.push_back(s);
  }
  for (size_t k = 1; k < out.stages.size(); ++k) {
    if (out.stages[k].total_bytes() > out.stages[out.peak_stage].total_bytes()) {
      out.peak_stage = static_cast<int>(k);
    }
  }
  return out;
}

}  // namespace joulepipe::physics
