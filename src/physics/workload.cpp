// The job's checks and the per-stage FLOP and byte counts of the transformer
// workload model (docs/workload-model.md derives every count).
//
// Notation (per microbatch, per GPU of a stage): T = microbatch_size x seq
// tokens, s = seq, h = hidden, f = ffn_hidden, k = kv_heads x head_dim,
// V = padded vocabulary, t = tp, e = 2 bytes (bf16 activations and weights).
// Megatron-LM layout without sequence parallelism: attention heads, MLP
// columns and vocabulary rows are split t ways; norms, residuals and the
// embedding output are replicated on every TP rank.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "joulepipe/model/error.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::physics {

namespace {

using model::InputError;

// Bytes per parameter touched by a backward pass beyond reading the weight
// for the input gradient (e bytes): the fp32 main gradient is read and
// written by the weight-gradient GEMM (8 B; Megatron's gradient
// accumulation fusion, or fp32 .grad accumulation).
constexpr double kGradBytesPerParam = 8;
// Cross-entropy over the vocabulary-parallel logits, bytes per logit element
// (Megatron-LM's vocab-parallel cross-entropy): forward = upcast to fp32
// (read 2, write 4), subtract the max (8), exp (8), sum (4), normalise and
// keep the softmax for backward (8); backward = scale the saved softmax
// (read 4, write 4) and cast to bf16 for the LM head's backward (read 4,
// write 2).
constexpr double kLossForwardBytes = 34;
constexpr double kLossBackwardBytes = 14;
// The same loss as a Hugging Face model trained eagerly computes it
// (Framework::kHfEager; Merak's loss_fn applies torch.nn.CrossEntropyLoss to
// the logits viewed as (T, V), without a shifted copy: ml-energy/zeus
// @38cb3f9 merak/Merak/merak_trainer.py, get_loss_fn), per fp32 logit:
// forward, log_softmax reads the logits for the max, for the sum of
// exponentials and to normalise, and writes them once (16); nll_loss reads
// one value per row. Backward, nll_loss's gradient is a zero tensor of the
// logits' size with one value per row (write 4), and log_softmax's backward
// reads the incoming gradient for its row sum (4), then reads it and the
// saved output and writes the logits' gradient (12): 20. In bf16 (autocast
// runs the loss in fp32) the logits are cast up first (read 2, write 4)
// and their gradient cast back (read 4, write 2).
constexpr double kEagerLossForwardBytes = 16;
constexpr double kEagerLossBackwardBytes = 20;
constexpr double kEagerLossCastBytes = 6;

std::string Str(long long value) {
  return std::to_string(value);
}

// Throws InputError naming `field` unless low <= value <= high.
void RequireRange(const char* field, long long value, long long low, long long high,
                  const char* meaning) {
  if (value >= low && value <= high) return;
  throw InputError(field, std::string(field) + " must be " + Str(low) + ".." + Str(high) +
                              " (got " + Str(value) + "): " + meaning);
}

// Bytes each GPU sends in a ring all-reduce of `bytes` over `ranks` GPUs.
double RingBytes(double bytes, int ranks) {
  return ranks <= 1 ? 0.0 : 2.0 * (ranks - 1) / ranks * bytes;
}

void Accumulate(KindCost* into, const KindCost& add) {
  into->gemm_flops += add.gemm_flops;
  into->model_flops += add.model_flops;
  into->weight_bytes += add.weight_bytes;
  into->activation_bytes += add.activation_bytes;
  into->tp_comm_bytes += add.tp_comm_bytes;
}

// The counts shared by every per-stage calculation.
struct Dims {
  double T, s, h, f, k, V;
  int t;
  const TransformerConfig* m;
  Framework framework;
  Precision precision;
  double e;             // bytes per activation / weight element: 2 (bf16) or 4 (fp32)
  double tp_link_gbps;  // KindCost::tp_link_gbps: the network per GPU when TP leaves the node

  double backward_bytes_per_param() const { return e + kGradBytesPerParam; }
};

Dims DimsOf(const WorkloadSpec& spec) {
  const TransformerConfig& m = spec.model;
  return Dims{spec.tokens(),
              static_cast<double>(spec.seq()),
              static_cast<double>(m.hidden),
              static_cast<double>(m.ffn_hidden),
              static_cast<double>(m.kv_dim()),
              static_cast<double>(spec.padded_vocab()),
              spec.parallel.tp,
              &m,
              spec.framework,
              spec.precision,
              spec.precision == Precision::kTf32 ? 4.0 : 2.0,
              TpNetworkGbpsPerGpu(spec)};
}

// Parameters of one transformer layer held by one TP rank (norms are
// replicated but are ~1e-4 of a layer; counted as split).
double LayerParamsPerGpu(const Dims& d, bool cross) {
  return d.m->LayerParameters(cross) / d.t;
}

// HBM passes over the score tensor per attention (eager kernels only):
// T5's relative bias is added where the others scale, so it saves the
// scale's read and write.
double ScorePasses(const Dims& d, bool forward) {
  double passes = forward ? (d.precision == Precision::kTf32 ? kEagerScorePassesForwardFp32
                                                             : kEagerScorePassesForward)
                          : (d.precision == Precision::kTf32 ? kEagerScorePassesBackwardFp32
                                                             : kEagerScorePassesBackward);
  if (d.m->position == PositionKind::kRelative) passes -= 2;
  return passes;
}

// One transformer layer, forward; `cross` adds the cross-attention block of
// an encoder-decoder's decoder layer (its keys and values come from the
// encoder's output, as long as the decoder's sequence, so it costs what
// the self-attention block costs).
KindCost LayerForward(const Dims& d, bool cross) {
  const TransformerConfig& m = *d.m;
  const double T = d.T, h = d.h, f = d.f, k = d.k, t = d.t, q = m.q_dim();
  const double mlp_matrices = m.mlp == MlpKind::kSwiglu ? 3 : 2;
  const double attentions = cross ? 2 : 1;
  KindCost c;
  // GEMMs: QKV projection, QK^T and AV over the full s x s square (as
  // Narayanan et al. 2021 count them), output projection, MLP.
  c.gemm_flops =
      (attentions * (2 * T * h * (q + 2 * k) + 2 * T * d.s * q + 2 * T * d.s * q + 2 * T * q * h) +
       mlp_matrices * 2 * T * h * f) /
      t;
  c.model_flops = c.gemm_flops;
  c.weight_bytes = d.e * LayerParamsPerGpu(d, cross);
  // Elementwise traffic, in elements (x e bytes below), per attention block:
  // its input norm (read x, write), the residual add after it (read 2,
  // write 1) and fused attention (read q, k, v; write o).
  double attention = 2 * T * h + 3 * T * h + T * (2 * q + 2 * k) / t;
  if (m.position == PositionKind::kRope) attention += 2 * T * (q + k) / t;  // rotate q, k
  // Eager attention: the score tensor, T x s per head, of this rank's heads.
  if (d.framework == Framework::kHfEager) attention += ScorePasses(d, true) * T * d.s * m.heads / t;
  double elements = attentions * attention                      //
                    + 2 * T * h                                 // the MLP's input norm
                    + 3 * T * h;                                // residual add after the MLP
  elements += (m.mlp == MlpKind::kSwiglu ? 3 : 2) * T * f / t;  // activation: read 1-2, write 1
  c.activation_bytes = d.e * elements;
  // All-reduces of the T x h output after each attention block and the MLP.
  c.tp_comm_bytes = RingBytes((attentions + 1) * d.e * T * h, d.t);
  return c;
}

// One transformer layer, backward (without recomputation).
KindCost LayerBackward(const Dims& d, bool cross) {
  const TransformerConfig& m = *d.m;
  const double T = d.T, h = d.h, f = d.f, k = d.k, t = d.t, q = m.q_dim();
  const double attentions = cross ? 2 : 1;
  const KindCost forward = LayerForward(d, cross);
  KindCost c;
  // Every GEMM has an input-gradient and a weight-gradient GEMM of its size
  // (attention: dQ, dK from dS; dP, dV from dO): twice the forward.
  c.gemm_flops = 2 * forward.gemm_flops;
  c.model_flops = c.gemm_flops;
  c.weight_bytes = d.backward_bytes_per_param() * LayerParamsPerGpu(d, cross);
  // Per attention block: its norm (read x, dy; write dx), the residual
  // branch point (read 2, write 1), fused attention (read q,k,v,o,do;
  // write dq,dk,dv).
  double attention = 3 * T * h + 3 * T * h + T * (4 * q + 4 * k) / t;
  if (m.position == PositionKind::kRope) attention += 2 * T * (q + k) / t;
  if (d.framework == Framework::kHfEager)
    attention += ScorePasses(d, false) * T * d.s * m.heads / t;
  double elements = attentions * attention + 3 * T * h + 3 * T * h;  // the MLP's norm and branch
  elements += (m.mlp == MlpKind::kSwiglu ? 5 : 3) * T * f / t;  // read x (gate, up), dy; write dx
  if (m.linear_bias) {
    // Bias gradients: one more read of each linear layer's output gradient.
    elements +=
        T * (attentions * ((q + 2 * k) + h) + (m.mlp == MlpKind::kSwiglu ? 2 : 1) * f + h) / t;
  }
  c.activation_bytes = d.e * elements;
  // All-reduces of input gradients (the conjugates of the forward's).
  c.tp_comm_bytes = RingBytes((attentions + 1) * d.e * T * h, d.t);
  return c;
}

// First stage: token lookup in the vocabulary-parallel table, position
// embedding, optional embedding norm.
void AddEmbedding(const Dims& d, int seq, KindCost* forward, KindCost* backward) {
  const TransformerConfig& m = *d.m;
  const double T = d.T, h = d.h, t = d.t;
  double fwd = T * h + T * h / t;  // write the T x h output; read this shard's rows
  double bwd = T * h + T * h / t;  // read dY; scatter this shard's rows
  // The shard's dense gradient is written (2 B), read back (2 B) and added
  // into the fp32 main gradient (8 B) once per microbatch.
  double bwd_param_bytes = (2 * d.e + kGradBytesPerParam) * d.V * h / t;
  if (m.position == PositionKind::kLearned) {
    fwd += 2 * T * h + 3 * T * h;  // position lookup (read, write) and the add
    bwd += T * h;                  // read dY for the position table's gradient
    bwd_param_bytes += (2 * d.e + kGradBytesPerParam) * static_cast<double>(seq) * h;
  }
  if (m.embedding_norm) {
    fwd += 2 * T * h;
    bwd += 3 * T * h;
  }
  if (m.token_types > 0) {
    fwd += 2 * T * h + 3 * T * h;  // token-type lookup and the add
    bwd += T * h;
  }
  forward->activation_bytes += d.e * fwd;
  backward->activation_bytes += d.e * bwd;
  backward->weight_bytes += bwd_param_bytes;
  // VocabParallelEmbedding all-reduces its partial outputs.
  forward->tp_comm_bytes += RingBytes(d.e * T * h, d.t);
}

// Last stage: final norm, LM head GEMM (T x h by h x V/t) and the
// vocabulary-parallel cross-entropy loss.
void AddHead(const Dims& d, KindCost* forward, KindCost* backward) {
  const double T = d.T, h = d.h, V = d.V, t = d.t;
  const double head_flops = 2 * T * h * V / t;
  forward->gemm_flops += head_flops;
  forward->model_flops += head_flops;
  backward->gemm_flops += 2 * head_flops;
  backward->model_flops += 2 * head_flops;
  forward->weight_bytes += d.e * V * h / t;
  backward->weight_bytes += d.backward_bytes_per_param() * V * h / t;
  if (d.m->head_transform) {
    // Dense h x h (replicated on every TP rank, as in Megatron-LM's BERT
    // head) and its activation; its norm takes the final norm's place.
    const double dense_flops = 2 * T * h * h;
    forward->gemm_flops += dense_flops;
    forward->model_flops += dense_flops;
    backward->gemm_flops += 2 * dense_flops;
    backward->model_flops += 2 * dense_flops;
    forward->weight_bytes += d.e * h * h;
    backward->weight_bytes += d.backward_bytes_per_param() * h * h;
    forward->activation_bytes += d.e * 2 * T * h;
    backward->activation_bytes += d.e * 3 * T * h;
  }
  const double logits = T * V / t;
  double loss_forward = kLossForwardBytes, loss_backward = kLossBackwardBytes;
  if (d.framework == Framework::kHfEager) {
    const double cast = d.precision == Precision::kTf32 ? 0.0 : kEagerLossCastBytes;
    loss_forward = kEagerLossForwardBytes + cast;
    loss_backward = kEagerLossBackwardBytes + cast;
  }
  forward->activation_bytes += d.e * 2 * T * h + loss_forward * logits;
  backward->activation_bytes += d.e * 3 * T * h + loss_backward * logits;
  // Loss: all-reduces of T fp32 values (max, target logit, sum of exp).
  forward->tp_comm_bytes += RingBytes(3 * 4 * T, d.t);
  // The LM head's input gradient is all-reduced (column-parallel layer).
  backward->tp_comm_bytes += RingBytes(d.e * T * h, d.t);
}

StageCost CostOfStage(const WorkloadSpec& spec, const Dims& d, int stage, int first_layer,
                      int layers) {
  const int pp = spec.parallel.pp;
  StageCost c;
  c.stage = stage;
  c.first_layer = first_layer;
  c.layers = layers;
  c.embedding = stage == 0;
  c.lm_head = stage == pp - 1;
  c.forward.precision = c.backward.precision = d.precision;
  const TransformerConfig& m = *d.m;
  for (int i = 0; i < layers; ++i) {
    const bool cross = m.IsCrossAttentionLayer(first_layer + i);
    const KindCost layer_fwd = LayerForward(d, cross);
    Accumulate(&c.forward, layer_fwd);
    Accumulate(&c.backward, LayerBackward(d, cross));
    c.parameters += LayerParamsPerGpu(d, cross);
    if (spec.recompute == Recompute::kFull) {
      // The layer's forward runs again inside the backward; it adds work but
      // no model FLOPs.
      KindCost again = layer_fwd;
      again.model_flops = 0;
      Accumulate(&c.backward, again);
    }
  }
  const double h = d.h, norm_params = m.norm == NormKind::kLayerNorm ? 2 * h : h;
  if (c.embedding) {
    AddEmbedding(d, spec.seq(), &c.forward, &c.backward);
    c.parameters += d.V * h / d.t;
    if (m.position == PositionKind::kLearned) c.parameters += static_cast<double>(m.seq_length) * h;
    if (m.embedding_norm) c.parameters += norm_params;
    c.parameters += static_cast<double>(m.token_types) * h;
  }
  if (c.lm_head) {
    AddHead(d, &c.forward, &c.backward);
    // Tied embeddings: the last stage keeps its own copy of the table.
    if (!(c.embedding && m.tied_embeddings)) c.parameters += d.V * h / d.t;
    c.parameters += norm_params;
    if (m.head_transform) c.parameters += h * h;
  }
  c.forward.tp_link_gbps = c.backward.tp_link_gbps = d.tp_link_gbps;
  return c;
}

std::string NearEvenExample(int layers, int pp) {
  // Remainder layers go to the middle stages (the ends carry the embedding
  // and the head).
  std::vector<int> split(pp, layers / pp);
  int extra = layers % pp;
  for (int i = 1; i + 1 < pp && extra > 0; ++i, --extra) ++split[i];
  for (int i = 0; i < pp && extra > 0; ++i, --extra) ++split[i];
  std::string out;
  for (int n : split) out += (out.empty() ? "" : ",") + Str(n);
  return out;
}

}  // namespace

// ---- Parsing ------------------------------------------------------------------

Recompute ParseRecompute(std::string_view text, std::string_view field) {
  if (text == "none") return Recompute::kNone;
  if (text == "full") return Recompute::kFull;
  throw InputError(std::string(field),
                   std::string(field) + " '" + std::string(text) +
                       "' is not one of none, full (full: every layer's forward is recomputed in "
                       "backward)");
}

Framework ParseFramework(std::string_view text, std::string_view field) {
  if (text == "megatron") return Framework::kMegatron;
  if (text == "hf-eager") return Framework::kHfEager;
  throw InputError(std::string(field),
                   std::string(field) + " '" + std::string(text) +
                       "' is not one of megatron, hf-eager (megatron: fused kernels as in "
                       "Megatron-LM; hf-eager: a Hugging Face model run eagerly, attention "
                       "scores through HBM)");
}

std::string_view FrameworkName(Framework framework) {
  return framework == Framework::kHfEager ? "hf-eager" : "megatron";
}

std::string_view FrameworkValidation(Framework framework) {
  if (framework == Framework::kHfEager) {
    return "hf-eager validated against 9 real Perseus Merak runs (A100 half fitted, A40 half "
           "held out; tf32, full recompute): same-time saving -4.3..+0.2 pp and iteration time "
           "-7.2..+7.4 % on the held-out PP runs except T5 (-16 pp, -59 %: time between its "
           "instructions not modelled), 3D run -4.3 pp, -25 % time with TP across nodes at an "
           "assumed 25 GB/s node network (docs/benchmarks.md, Fidelity)";
  }
  return "megatron: clock response checked against 4 measured Perseus stage profiles (median "
         "error <= 3.0 % time, <= 5.7 % energy), throughput calibrated to Megatron-LM's "
         "published GPT-3 175B run; not validated against whole real runs "
         "(docs/workload-model.md)";
}

RankOrder ParseRankOrder(std::string_view text, std::string_view field) {
  if (text == "tp-first") return RankOrder::kTpFirst;
  if (text == "pp-first") return RankOrder::kPpFirst;
  throw InputError(std::string(field),
                   std::string(field) + " '" + std::string(text) +
                       "' is not one of tp-first, pp-first (tp-first: a stage's TP ranks "
                       "adjacent, as Megatron-LM places them; pp-first: a pipeline's stages "
                       "adjacent, as Merak places them)");
}

std::string_view RankOrderName(RankOrder order) {
  return order == RankOrder::kPpFirst ? "pp-first" : "tp-first";
}

bool TpCrossesNodes(const WorkloadSpec& spec) {
  const Placement& n = spec.placement;
  const Parallelism& p = spec.parallel;
  if (n.gpus_per_node <= 0 || p.tp <= 1) return false;
  // A group occupies tp ranks `stride` apart, and the groups of one block of
  // tp x stride ranks interleave; whole blocks per node keep every group in.
  const long long stride = n.rank_order == RankOrder::kPpFirst ? p.pp : 1;
  return n.gpus_per_node % (static_cast<long long>(p.tp) * stride) != 0;
}

double TpNetworkGbpsPerGpu(const WorkloadSpec& spec) {
  if (!TpCrossesNodes(spec)) return 0.0;
  return spec.placement.node_network_gbps / spec.placement.gpus_per_node;
}

Precision ParsePrecision(std::string_view text, std::string_view field) {
  if (text == "bf16") return Precision::kBf16;
  if (text == "tf32") return Precision::kTf32;
  throw InputError(std::string(field),
                   std::string(field) + " '" + std::string(text) +
                       "' is not one of bf16, tf32 (bf16: bf16/fp16 mixed precision; tf32: fp32 "
                       "weights and activations with TF32 matmuls)");
}

std::string_view PrecisionName(Precision precision) {
  return precision == Precision::kTf32 ? "tf32" : "bf16";
}

std::string_view RecomputeName(Recompute recompute) {
  return recompute == Recompute::kFull ? "full" : "none";
}

std::vector<int> ParseLayerSplit(std::string_view text, std::string_view field) {
  std::vector<int> split;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string_view entry = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    int value = 0;
    const auto [end, error] = std::from_chars(entry.data(), entry.data() + entry.size(), value);
    if (entry.empty() || error != std::errc() || end != entry.data() + entry.size() || value <= 0) {
      throw InputError(std::string(field),
                       std::string(field) + " entry " +
                           Str(static_cast<long long>(split.size()) + 1) + " is '" +
                           std::string(entry) +
                           "'; give one whole number of layers >= 1 per stage, separated by "
                           "commas (e.g. 11,12,12,11)");
    }
    split.push_back(value);
    if (comma == std::string_view::npos) return split;
    start = comma + 1;
  }
}

int WorkloadSpec::padded_vocab() const {
  const long long multiple = 128LL * std::max(1, parallel.tp);
  return static_cast<int>((model.vocab + multiple - 1) / multiple * multiple);
}

std::vector<int> ResolveLayerSplit(const WorkloadSpec& spec) {
  const TransformerConfig& m = spec.model;
  const Parallelism& p = spec.parallel;
  RequireRange("Parallelism::tp", p.tp, 1, kMaxTp, "the tensor-parallel GPUs per stage");
  RequireRange("Parallelism::pp", p.pp, 1, kMaxPp, "the pipeline stages");
  RequireRange("Parallelism::dp", p.dp, 1, kMaxDp, "the data-parallel pipelines");
  const long long gpus = static_cast<long long>(p.tp) * p.pp * p.dp;
  if (gpus > kMaxJobGpus) {
    throw InputError("Parallelism::tp", "Parallelism::tp " + Str(p.tp) + " x Parallelism::pp " +
                                            Str(p.pp) + " x Parallelism::dp " + Str(p.dp) + " = " +
                                            Str(gpus) + " GPUs; a job has at most " +
                                            Str(kMaxJobGpus) +
                                            ": use fewer data-parallel pipelines");
  }
  RequireRange("WorkloadSpec::microbatch_size", spec.microbatch_size, 1, kMaxMicrobatchSize,
               "the sequences per microbatch");
  if (spec.seq_length < 0 || spec.seq_length > kMaxSeqLength) {
    throw InputError("WorkloadSpec::seq_length",
                     "WorkloadSpec::seq_length must be 1.." + Str(kMaxSeqLength) + " tokens (got " +
                         Str(spec.seq_length) + "), or 0 for the model's own sequence length (" +
                         Str(m.seq_length) + ")");
  }
  RequireRange("Placement::gpus_per_node", spec.placement.gpus_per_node, 0, kMaxGpusPerNode,
               "the GPUs of one node, or 0 to keep every TP group inside a node");
  const double network = spec.placement.node_network_gbps;
  if (!std::isfinite(network) || network < 0 || network > kMaxNodeNetworkGbps) {
    throw InputError("Placement::node_network_gbps",
                     "Placement::node_network_gbps must be 0.." +
                         Str(static_cast<long long>(kMaxNodeNetworkGbps)) + " GB/s per node (got " +
                         std::to_string(network) +
                         "); e.g. 25 for one 200 Gb/s InfiniBand adapter");
  }
  if (TpCrossesNodes(spec) && !(network > 0)) {
    throw InputError(
        "Placement::node_network_gbps",
        "the TP groups (Parallelism::tp " + Str(p.tp) + ", ranks " +
            std::string(RankOrderName(spec.placement.rank_order)) + ") leave the " +
            Str(spec.placement.gpus_per_node) +
            "-GPU nodes, so their all-reduces cross the network: give "
            "Placement::node_network_gbps, the node's network in GB/s (e.g. 25 for one 200 Gb/s "
            "InfiniBand adapter), or a Placement::gpus_per_node that holds whole TP groups");
  }
  // Megatron-LM splits attention heads, key/value groups and MLP columns
  // evenly over the TP ranks.
  if (m.heads % p.tp != 0 || m.kv_heads % p.tp != 0 || m.ffn_hidden % p.tp != 0) {
    throw InputError("Parallelism::tp",
                     "Parallelism::tp " + Str(p.tp) + " does not divide " + m.id + "'s " +
                         Str(m.heads) + " attention heads, " + Str(m.kv_heads) +
                         " key/value heads and " + Str(m.ffn_hidden) +
                         " FFN columns (Megatron-LM splits each evenly); choose a "
                         "Parallelism::tp that divides all three");
  }
  if (m.position == PositionKind::kLearned && spec.seq() > m.seq_length) {
    throw InputError(
        "WorkloadSpec::seq_length",
        "WorkloadSpec::seq_length " + Str(spec.seq()) + " exceeds " + m.id + "'s " +
            Str(m.seq_length) +
            " learned positions; use a WorkloadSpec::seq_length <= " + Str(m.seq_length));
  }
  if (p.pp > m.total_layers()) {
    throw InputError("Parallelism::pp", "Parallelism::pp " + Str(p.pp) + " exceeds " + m.id +
                                            "'s " + Str(m.total_layers()) +
                                            " layers; every stage needs at least one layer");
  }
  if (p.layer_split.empty()) {
    if (m.total_layers() % p.pp != 0) {
      throw InputError("Parallelism::layer_split",
                       m.id + " has " + Str(m.total_layers()) + " layers, not a multiple of " +
                           "Parallelism::pp " + Str(p.pp) +
                           " (Megatron's even split needs layers % pp == 0); use "
                           "BalancedLayerSplit (sized for the embedding and LM head) or set "
                           "Parallelism::layer_split to " +
                           Str(p.pp) + " numbers summing to " + Str(m.total_layers()) + ", e.g. " +
                           NearEvenExample(m.total_layers(), p.pp));
    }
    return std::vector<int>(p.pp, m.total_layers() / p.pp);
  }
  if (static_cast<int>(p.layer_split.size()) != p.pp) {
    throw InputError(
        "Parallelism::layer_split",
        "Parallelism::layer_split has " + Str(static_cast<long long>(p.layer_split.size())) +
            " entries but Parallelism::pp is " + Str(p.pp) + "; give one layer count per stage");
  }
  long long sum = 0;
  for (size_t i = 0; i < p.layer_split.size(); ++i) {
    if (p.layer_split[i] < 1) {
      throw InputError("Parallelism::layer_split", "Parallelism::layer_split entry " +
                                                       Str(static_cast<long long>(i) + 1) + " is " +
                                                       Str(p.layer_split[i]) +
                                                       "; every stage needs at least one layer");
    }
    sum += p.layer_split[i];
  }
  if (sum != m.total_layers()) {
    throw InputError("Parallelism::layer_split",
                     "Parallelism::layer_split sums to " + Str(sum) + " layers but " + m.id +
                         " has " + Str(m.total_layers()) + "; the entries must add up to " +
                         Str(m.total_layers()));
  }
  return p.layer_split;
}

std::vector<StageCost> ComputeStageCosts(const WorkloadSpec& spec) {
  const std::vector<int> split = ResolveLayerSplit(spec);
  const Dims d = DimsOf(spec);
  std::vector<StageCost> stages;
  int first = 0;
  for (int s = 0; s < spec.parallel.pp; ++s) {
    stages.push_back(CostOfStage(spec, d, s, first, split[s]));
    first += split[s];
  }
  return stages;
}

std::vector<int> BalancedLayerSplit(const WorkloadSpec& spec, const GpuSpec& gpu) {
  WorkloadSpec probe = spec;
  probe.parallel.layer_split.clear();
  const int pp = spec.parallel.pp, layers = spec.model.total_layers();
  // Validate everything but the split: pretend to an even split.
  probe.parallel.layer_split.assign(pp, 1);
  probe.parallel.layer_split.back() = layers - (pp - 1);
  ResolveLayerSplit(probe);
  const Dims d = DimsOf(probe);
  // Forward + backward time at fmax of stage s with n layers.
  auto stage_time = [&](int s, int n) {
    const StageCost c = CostOfStage(probe, d, s, 0, n);
    return CostToWork(c.forward, gpu).time_at_max_s() + CostToWork(c.backward, gpu).time_at_max_s();
  };
  if (spec.model.decoder_layers > 0) {
    // Encoder-decoder: a layer's cost depends on where it is (encoder or
    // decoder), so stages are not independent. Exact dynamic programme over
    // contiguous splits: best[s][i] = the least slowest-stage time of the
    // first i layers on stages 0..s-1. O(pp x layers^2) stage costs.
    auto range_time = [&](int s, int first, int n) {
      const StageCost c = CostOfStage(probe, d, s, first, n);
      return CostToWork(c.forward, gpu).time_at_max_s() +
             CostToWork(c.backward, gpu).time_at_max_s();
    };
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<std::vector<double>> best(pp + 1, std::vector<double>(layers + 1, inf));
    std::vector<std::vector<int>> cut(pp + 1, std::vector<int>(layers + 1, 0));
    best[0][0] = 0;
    for (int s = 1; s <= pp; ++s) {
      for (int i = s; i <= layers - (pp - s); ++i) {
        for (int j = s - 1; j < i; ++j) {
          if (best[s - 1][j] == inf) continue;
          const double t = std::max(best[s - 1][j], range_time(s - 1, j, i - j));
          if (t < best[s][i]) best[s][i] = t, cut[s][i] = j;
        }
      }
    }
    std::vector<int> split(pp);
    for (int s = pp, i = layers; s > 0; --s) {
      split[s - 1] = i - cut[s][i];
      i = cut[s][i];
    }
    return split;
  }
  // Water-filling: each further layer goes to the stage that is fastest
  // after taking it. Stage time is increasing in its layer count and the
  // stages are independent, so this minimises the slowest stage. Ties go to
  // the lowest stage id.
  std::vector<int> split(pp, 1);
  std::vector<double> next(pp);
  for (int s = 0; s < pp; ++s) next[s] = stage_time(s, 2);
  for (int added = pp; added < layers; ++added) {
    const int s = static_cast<int>(std::min_element(next.begin(), next.end()) - next.begin());
    ++split[s];
    next[s] = stage_time(s, split[s] + 1);
  }
  return split;
}

}  // namespace joulepipe::physics
