// Transformer workload model: what one pipeline stage of a Megatron-style
// (tensor x pipeline x data parallel) training job computes per microbatch,
// and the simulated stage profile that follows on a given GPU type.
//
//   TransformerConfig    one model architecture (data/models/<id>.json, each
//                        field with its source).
//   WorkloadSpec         model x parallelism x microbatch size x sequence
//                        length x activation recomputation.
//   StageCost            per stage and kind (forward/backward), per GPU of the
//                        stage: GEMM FLOPs, HBM bytes, tensor-parallel
//                        all-reduce bytes. Uneven stages come from the model
//                        alone: the first stage also does the embedding, the
//                        last the final norm, LM head and loss.
//   CostToWork           FLOPs and bytes -> physics::Work (time at fmax, compute
//                        fraction, activity) on a GpuSpec.
//   SimulateProfile      -> model::Profile: one row per stage x kind x SM clock
//                        with time and energy from physics::Run, per GPU.
//
// Formulas, constants and their sources: docs/workload-model.md. Every figure
// here is simulated, never measured.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::physics {

// ---- Model architectures -------------------------------------------------------

enum class MlpKind { kGelu, kSwiglu, kRelu };  // 2, 3 or 2 weight matrices
enum class NormKind { kLayerNorm, kRmsNorm };  // same HBM traffic here
// table, rotary, ALiBi bias, T5's learned relative bias (a few buckets per
// head, added to the scores in place of their scaling)
enum class PositionKind { kLearned, kRope, kAlibi, kRelative };

// One transformer (data/models/<id>.json): decoder-only, an encoder
// (head_transform, token_types) or an encoder-decoder (decoder_layers > 0).
// Invariants after ParseTransformerConfig: every count > 0; heads divides
// hidden unless attention_head_dim is given; kv_heads divides heads.
struct TransformerConfig {
  std::string id;  // e.g. "llama3-70b"
  std::string name;
  std::vector<std::string> aliases;
  int layers = 0;
  int hidden = 0;      // model dimension h
  int ffn_hidden = 0;  // feed-forward inner dimension f
  int heads = 0;       // attention (query) heads
  int kv_heads = 0;    // key/value heads (== heads without grouped-query attention)
  int vocab = 0;       // tokenizer vocabulary, before Megatron's padding
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  bool tied_embeddings = false;  // LM head shares the token embedding matrix
  bool embedding_norm = false;   // a norm right after the token embedding (BLOOM)
  bool linear_bias = false;      // linear layers carry biases (parameter count only)
  // Encoders trained as masked language models (BERT): the LM head first
  // transforms each token (dense h x h, activation, norm) and the
  // embedding adds a token-type (segment) table of `token_types` rows.
  // Attention is bidirectional; its cost here is the same as causal's (the
  // model counts the full s x s square either way).
  bool head_transform = false;
  int token_types = 0;
  int seq_length = 0;                          // pre-training sequence length; the learned
                                               // position table's size for kLearned
  std::map<std::string, std::string> sources;  // field -> citation

  // Encoder-decoder (T5): `layers` encoder layers, then `decoder_layers`
  // decoder layers, each with self-attention, cross-attention over the
  // encoder's output and an MLP. The decoder's sequence is as long as the
  // encoder's (WorkloadSpec::seq). 0 = decoder-only or encoder.
  int decoder_layers = 0;
  // Width of one attention head; 0 = hidden / heads. T5 uses 128 with 32
  // heads on a hidden size of 1024 (attention width 4096).
  int attention_head_dim = 0;

  int head_dim() const { return attention_head_dim > 0 ? attention_head_dim : hidden / heads; }
  int q_dim() const { return heads * head_dim(); }  // attention width
  int kv_dim() const { return kv_heads * head_dim(); }
  int total_layers() const { return layers + decoder_layers; }  // what a layer split counts
  // Whether transformer layer `index` (0-based over total_layers()) is a
  // decoder layer of an encoder-decoder (with cross-attention).
  bool IsCrossAttentionLayer(int index) const { return decoder_layers > 0 && index >= layers; }

  // Parameters of one transformer layer (attention, MLP, norms, biases);
  // with cross-attention, a decoder layer of an encoder-decoder.
  double LayerParameters(bool cross_attention = false) const;
  // All parameters with the unpadded vocabulary: layers, embeddings, position
  // table, final norm and (if untied) the LM head.
  double Parameters() const;
};

// Parses one data/models/<id>.json. Throws model::InputError naming `source`
// and the field on a missing, mistyped or out-of-range value.
TransformerConfig ParseTransformerConfig(const std::string& json_text, const std::string& source);

// The models built into the binary (data/models/*.json), sorted by id.
const std::vector<TransformerConfig>& TransformerCatalog();

// Looks up an id or alias (case-insensitive). Throws model::InputError that
// lists the known ids when there is none.
const TransformerConfig& FindTransformer(std::string_view id_or_alias);

// "bloom-176b, gpt3-1.3b, ...": the catalog's ids, for messages and help texts.
std::string KnownTransformerIds();

// ---- The job --------------------------------------------------------------------

enum class Recompute { kNone, kFull };  // full: every layer's forward is redone in backward

// Parses "none" / "full". Throws model::InputError naming `field` (a front
// end that read the text elsewhere may name its own source).
Recompute ParseRecompute(std::string_view text, std::string_view field = "WorkloadSpec::recompute");
std::string_view RecomputeName(Recompute recompute);

// The framework's kernels (docs/workload-model.md, "Framework profiles").
//   kMegatron  Megatron-LM / megatron-core with fused kernels: attention
//              never writes the s x s score matrix to HBM (fused softmax /
//              flash attention); the default, and what the calibration used.
//   kHfEager   a plain Hugging Face model run eagerly (as Perseus's Merak
//              runs): attention materialises the score matrix of every head
//              and passes it through scale, causal mask, softmax (fp32 under
//              autocast, cast back) and dropout, each a memory-bound kernel
//              that reads and writes it (kEagerScorePasses*).
enum class Framework { kMegatron, kHfEager };

// Parses "megatron" / "hf-eager". Throws model::InputError naming `field`.
Framework ParseFramework(std::string_view text, std::string_view field = "WorkloadSpec::framework");
std::string_view FrameworkName(Framework framework);

// What the validation against real training runs found for a framework
// profile (bench_fidelity, docs/benchmarks.md "Fidelity"), for outputs:
// e.g. "validated against 5 real Perseus runs (A40 half held out): saving
// -3.0..+4.5 pp, iteration time -55..+11 %". Update it with the bench.
std::string_view FrameworkValidation(Framework framework);

// The number format of weights, activations and matmuls.
//   kBf16  bf16 (or fp16) weights and activations, matmuls on the tensor
//          cores at peak_bf16_tflops; fp32 main gradients. The default.
//   kTf32  fp32 everywhere (a Hugging Face Trainer without --fp16/--bf16),
//          matmuls on the TF32 tensor cores (PyTorch's allow_tf32), which
//          run at half the bf16 rate on Ampere and Hopper (kTf32PeakShare);
//          every activation and weight element is 4 bytes.
enum class Precision { kBf16, kTf32 };

// Parses "bf16" / "tf32". Throws model::InputError naming `field`.
Precision ParsePrecision(std::string_view text, std::string_view field = "WorkloadSpec::precision");
std::string_view PrecisionName(Precision precision);

// TF32 dense tensor throughput over bf16's: A100 156 / 312, A40 74.8 /
// 149.7, H100 SXM 494.7 / 989.4 TFLOPS (NVIDIA datasheets).
inline constexpr double kTf32PeakShare = 0.5;

// HBM passes over the b x heads x s x s score tensor per layer (reads plus
// writes, in 2-byte elements, fp32 passes counted twice), counted from the
// eager op sequence, not fitted. Forward: the QK^T output written (1),
// scale (2), causal mask (2), softmax read in fp16 and written in fp32 (3),
// cast back (3), dropout read, write and its mask (2.5): 13.5. Backward:
// dP written (1), dropout backward (2.5), softmax backward reading P and dP,
// writing dS in fp32 (4), cast (3), mask and scale backward (4): 14.5.
inline constexpr double kEagerScorePassesForward = 13.5;
inline constexpr double kEagerScorePassesBackward = 14.5;
// The same op sequence in fp32 (Precision::kTf32), in 4-byte passes: no
// casts, softmax reads and writes fp32. Forward: QK^T written (1), scale
// (2), causal mask (2), softmax (2), dropout (2.5): 9.5. Backward: dP
// written (1), dropout backward (2.5), softmax backward reading P and dP,
// writing dS (3), mask and scale backward (4): 10.5.
inline constexpr double kEagerScorePassesForwardFp32 = 9.5;
inline constexpr double kEagerScorePassesBackwardFp32 = 10.5;

// The plausible ranges ResolveLayerSplit enforces (docs/limits.md, "Numbers
// and ranges").
inline constexpr int kMaxTp = 1024;                   // Parallelism::tp
inline constexpr int kMaxPp = 1024;                   // Parallelism::pp
inline constexpr int kMaxDp = 100'000;                // Parallelism::dp
inline constexpr long long kMaxJobGpus = 10'000'000;  // tp x pp x dp
inline constexpr int kMaxMicrobatchSize = 65'536;     // WorkloadSpec::microbatch_size
inline constexpr int kMaxSeqLength = 10'000'000;      // WorkloadSpec::seq_length, tokens

// ---- Where the ranks sit ---------------------------------------------------------

// Which parallel dimension gets adjacent global ranks, and so shares a node.
//   kTpFirst  Megatron-LM / megatron-core: the TP ranks of a stage are
//             adjacent, so a TP group stays inside a node that holds a
//             multiple of tp GPUs. The default.
//   kPpFirst  Merak (Perseus's runs; its PipeModelDataParallelTopology has
//             axes data, model, pipe): the stages of a pipeline are
//             adjacent, so a TP group's ranks lie pp apart and leave the
//             node once tp x pp GPUs do not fit in it.
enum class RankOrder { kTpFirst, kPpFirst };

// Parses "tp-first" / "pp-first". Throws model::InputError naming `field`.
RankOrder ParseRankOrder(std::string_view text, std::string_view field = "Placement::rank_order");
std::string_view RankOrderName(RankOrder order);

inline constexpr int kMaxGpusPerNode = 1024;            // Placement::gpus_per_node
inline constexpr double kMaxNodeNetworkGbps = 100'000;  // Placement::node_network_gbps

// The nodes under the job, as far as the TP all-reduces see them. The
// default (gpus_per_node 0) keeps every TP group inside one node, on
// GpuSpec::nvlink_gbps, as before placement was modelled.
struct Placement {
  int gpus_per_node = 0;         // 0 = TP never leaves a node; else 1..kMaxGpusPerNode
  double node_network_gbps = 0;  // the node's network, all adapters, one direction (GB/s);
                                 // needed when TP groups leave the node
  RankOrder rank_order = RankOrder::kTpFirst;
};

struct Parallelism {
  int tp = 1;  // tensor-parallel GPUs per stage
  int pp = 1;  // pipeline stages
  int dp = 1;  // data-parallel pipelines
  // Transformer layers per stage, pp entries summing to the model's layers.
  // Empty = Megatron's even split (layers / pp each; needs layers % pp == 0).
  std::vector<int> layer_split;
};

struct WorkloadSpec {
  TransformerConfig model;
  Parallelism parallel;
  int microbatch_size = 1;  // sequences per microbatch
  int seq_length = 0;       // tokens per sequence; 0 = the model's seq_length
  Recompute recompute = Recompute::kNone;
  Framework framework = Framework::kMegatron;
  Precision precision = Precision::kBf16;
  Placement placement;

  int seq() const { return seq_length > 0 ? seq_length : model.seq_length; }
  double tokens() const { return static_cast<double>(microbatch_size) * seq(); }
  // Megatron-LM pads the vocabulary to a multiple of 128 x tp
  // (--make-vocab-size-divisible-by 128), so every TP rank gets equal rows.
  int padded_vocab() const;
};

// Parses a layer split "11,12,12,...": positive integers separated by
// commas. Throws model::InputError naming `field` and the bad entry.
std::vector<int> ParseLayerSplit(std::string_view text,
                                 std::string_view field = "Parallelism::layer_split");

// Checks the spec (tp 1..kMaxTp, pp 1..kMaxPp, dp 1..kMaxDp and their
// product up to kMaxJobGpus, counted in 64 bits; microbatch_size and
// seq_length within their ranges; tp divides heads, kv_heads and ffn_hidden;
// pp <= layers; a split of pp positive entries summing to layers, or
// layers % pp == 0 for the even split; learned positions cover seq) and
// returns the layers per stage. Throws model::InputError naming the field
// ("Parallelism::tp", "Parallelism::layer_split", ...) and saying what to
// change; an uneven model points to BalancedLayerSplit.
std::vector<int> ResolveLayerSplit(const WorkloadSpec& spec);

// Whether the TP groups' all-reduces leave their node: gpus_per_node > 0
// and a node does not hold whole groups, i.e. gpus_per_node is not a
// multiple of tp x stride (stride 1 for kTpFirst, pp for kPpFirst).
bool TpCrossesNodes(const WorkloadSpec& spec);

// Bandwidth per GPU of TP all-reduces that leave the node: the node's
// network shared by all its GPUs, since every GPU of such a node is in a
// group that crosses and the stages run at once. 0 when TP stays inside
// nodes (the all-reduces use GpuSpec::nvlink_gbps).
double TpNetworkGbpsPerGpu(const WorkloadSpec& spec);

// ---- Per-stage cost ---------------------------------------------------------------

// One instruction (forward or backward of one microbatch) on one GPU of a
// stage. All figures per GPU.
struct KindCost {
  double gemm_flops = 0;                   // matrix-multiply FLOPs executed (incl. recompute)
  double model_flops = 0;                  // the same without recomputation (for MFU)
  double weight_bytes = 0;                 // HBM traffic of weights and weight gradients
  double activation_bytes = 0;             // HBM traffic of memory-bound elementwise ops
  double tp_comm_bytes = 0;                // bytes each GPU sends in TP ring all-reduces
  double tp_link_gbps = 0;                 // their bandwidth per GPU (GB/s); 0 = inside a
                                           // node, GpuSpec::nvlink_gbps (TpNetworkGbpsPerGpu)
  Precision precision = Precision::kBf16;  // sets the GEMMs' tensor-core rate

  double hbm_bytes() const { return weight_bytes + activation_bytes; }
};

struct StageCost {
  int stage = 0;
  int first_layer = 0;  // index of its first transformer layer
  int layers = 0;
  bool embedding = false;  // first stage: token (and position) embedding
  bool lm_head = false;    // last stage: final norm, LM head, cross-entropy loss
  double parameters = 0;   // parameters held by one GPU of the stage
  KindCost forward;
  KindCost backward;
};

// Costs of every stage, in stage order. Calls ResolveLayerSplit.
std::vector<StageCost> ComputeStageCosts(const WorkloadSpec& spec);

// ---- Time and power on a GPU -------------------------------------------------------

// Efficiencies and activities (docs/workload-model.md has the basis).
//
// kGemmEfficiency is calibrated: with it the model reproduces the 138
// TFLOP/s per A100 that Narayanan et al. (SC'21, Table 1) report for GPT-3
// 175B on 1024 GPUs (TP 8, PP 16, DP 8, batch 1536, full recomputation;
// micro-batch 1 assumed) through EstimateIteration; tests/sim pins it.
inline constexpr double kGemmEfficiency = 0.63;    // of peak_bf16_tflops
inline constexpr double kMemoryEfficiency = 0.80;  // of hbm_gbps (assumed)
// Relative SM switching activity of the three kinds of time (assumed): tensor-
// core GEMMs 1, memory-bound elementwise kernels 0.5, NCCL all-reduces 0.3.
inline constexpr double kGemmActivity = 1.0;
inline constexpr double kMemoryActivity = 0.5;
inline constexpr double kCommActivity = 0.3;
// The GPU catalog's dynamic_w is normalised so that the mean activity of the
// measured Perseus GPT-3 175B / BLOOM stage instructions is 1. The same
// normalisation here: Work::activity = (time-weighted mix of the relative
// activities) / kReferenceActivityMix, where kReferenceActivityMix is that mix
// averaged over the stages and kinds of GPT-3 175B (TP 8, PP 8, micro-batch 1,
// seq 2048) on A100-SXM; tests/sim checks the two agree.
inline constexpr double kReferenceActivityMix = 0.884;

// How much of a power-capped instruction the board caps kernel class by
// kernel class (RunByKernelClass) rather than on the instruction's average
// power: 0 = one effective clock for the whole instruction, 1 = GEMMs
// capped alone while memory-bound kernels keep the requested clock. Fitted
// on the A100 half of Perseus's real runs only (bench_fidelity --fit, on
// the same-time savings; docs/benchmarks.md, "Fidelity"); the A40 half is
// reported as held out. 1.00 since the limit binds whenever the GEMMs
// exceed it (RunByKernelClass; it was 0.80 while the limit bound only when
// an instruction's average did). The same half's power-limit sweeps prefer
// 0 (bench_fidelity --sweep): the share stands in for something the model
// misses, which is open (docs/benchmarks.md).
inline constexpr double kClassCapShare = 1.00;

// An instruction's time at fmax split into its parts, and the physics::Work.
struct WorkBreakdown {
  double compute_s = 0;  // GEMMs: scales with 1/f
  double memory_s = 0;   // HBM-bound: independent of the SM clock
  double comm_s = 0;     // TP all-reduces inside the node (NVLink or PCIe): NCCL's
                         // kernels copy and reduce at kCommActivity; independent of the
                         // SM clock
  // TP all-reduces over the node's network (KindCost::tp_link_gbps > 0): the
  // GPU waits on the adapter, drawing GpuSpec::p_block_w (Perseus's measured
  // power while blocked on communication) at any SM clock.
  double network_s = 0;
  Work work;  // compute + memory + comm: time_at_max_s = their sum; compute_fraction =
              // compute share; activity = mix of the k*Activity constants, normalised

  // The whole instruction at fmax without a power cap.
  double time_at_max_s() const { return work.time_at_max_s + network_s; }
};

// Throws model::InputError if the GPU lacks a throughput figure the cost
// needs (peak_bf16_tflops, hbm_gbps, nvlink_gbps when there is TP traffic
// inside a node).
WorkBreakdown CostToWork(const KindCost& cost, const GpuSpec& gpu);

// An instruction at `requested_mhz` under `power_limit_w` as the board runs
// it (its network_s added at the end, at P_block): when the limit binds, it caps each kernel class
// on its own (the board's power controller acts within milliseconds, shorter than a kernel), so
// tensor-core GEMMs, which draw the most, run at the clock where they meet the limit, while
// memory-bound kernels and collectives, which draw less, keep the requested clock. The limit binds
// when the GEMMs at the requested clock draw more than it (whether or not the instruction's
// average does). Without a binding limit it is physics::Run on the breakdown's work (one
// time-weighted activity). With one, time and energy are (1 - share) x Run's + share x the
// per-class figures (kClassCapShare). Time never rises with the requested clock.
OperatingPoint RunByKernelClass(const GpuSpec& gpu, const WorkBreakdown& work, double requested_mhz,
                                double power_limit_w, double share = kClassCapShare);

// Megatron's even split when layers % pp == 0; otherwise (and whenever asked)
// the split that minimises the slowest stage's forward+backward time at
// fmax, every stage at least one layer, so that the first and last stages,
// which also carry the embedding and the LM head, get fewer layers when that
// pays. `spec.parallel.layer_split` is ignored.
std::vector<int> BalancedLayerSplit(const WorkloadSpec& spec, const GpuSpec& gpu);

// ---- The simulated profile -----------------------------------------------------------

struct ProfileOptions {
  double power_limit_w = 0;  // 0 = the GPU's tdp_w; else within its power-limit range
  double class_cap_share = kClassCapShare;  // 0..1, see kClassCapShare
  // Lowest SM clock profiled; 0 = the lowest supported clock >= 0.6 x fmax
  // (Perseus profiled 855..1410 MHz on A100). Else a supported clock range value.
  int min_mhz = 0;
};

// The SM clocks SimulateProfile uses: the GPU's supported clocks from fmax
// down to the floor, highest first. Throws model::InputError on a bad option.
std::vector<int> ProfileClocks(const GpuSpec& gpu, const ProfileOptions& options);

struct SimulatedStage {
  StageCost cost;
  WorkBreakdown forward;
  WorkBreakdown backward;
  OperatingPoint forward_at_max;  // physics::Run at fmax under the power limit
  OperatingPoint backward_at_max;
  int min_energy_mhz = 0;  // profiled clock of least forward+backward energy
};

struct SimulatedWorkload {
  WorkloadSpec spec;
  std::vector<int> layer_split;
  double power_limit_w = 0;  // the limit used (W)
  std::vector<int> clocks;   // profiled clocks, highest first
  std::vector<SimulatedStage> stages;
  model::Profile profile;  // per GPU: time (s) and energy (J) per instruction
};

// Costs every stage, converts them to physics::Work on `gpu` and runs each
// (stage, kind) at every profiled clock. Throws model::InputError on a bad
// spec or option, and naming the workload's fields when an instruction would
// take longer than model::kMaxInstructionSeconds (a microbatch far too big
// for the GPUs of one stage).
SimulatedWorkload SimulateWorkload(const WorkloadSpec& spec, const GpuSpec& gpu,
                                   const ProfileOptions& options = {});

// Just the profile of SimulateWorkload.
model::Profile SimulateProfile(const WorkloadSpec& spec, const GpuSpec& gpu,
                               const ProfileOptions& options = {});

// The workload's profile with the metadata a simulated profile file carries:
// the GPU's name and P_block, source "simulated", the date now and this
// joulepipe's version (what `profile --simulate` writes).
model::Profile StampedProfile(const SimulatedWorkload& workload, const GpuSpec& gpu);

// ---- Figures for the summary -------------------------------------------------------------

// Default inter-node bandwidth per GPU for data-parallel traffic: 25 GB/s =
// one 200 Gb/s InfiniBand HDR adapter per GPU, as in DGX A100.
inline constexpr double kDefaultInterNodeGbps = 25.0;

// Seconds of one ring all-reduce of the stage's gradients across the dp
// pipelines: 2 (dp-1)/dp x parameters x 4 bytes (fp32 gradients) at
// `inter_node_gbps` GB/s per GPU. 0 when dp == 1.
double DpAllReduceSeconds(const StageCost& stage, int dp, double inter_node_gbps);

// Model FLOPs utilisation at fmax in the pipeline's steady state (no bubble,
// no DP sync): the model FLOPs of one microbatch over all stages, divided by
// pp x (the slowest stage's forward+backward time at fmax) x peak.
double SteadyStateMfu(const SimulatedWorkload& workload, const GpuSpec& gpu);

// One 1F1B iteration of `microbatches` at fmax, approximated by its critical
// path: sum over stages of forward and backward time + (M - 1) x the slowest
// stage's forward+backward + the slowest stage's DP all-reduce (not
// overlapped).
struct IterationEstimate {
  double time_s = 0;
  double mfu = 0;              // model FLOPs / (time x peak), per GPU
  double hardware_tflops = 0;  // executed GEMM TFLOP/s per GPU (incl. recompute)
};
IterationEstimate EstimateIteration(const SimulatedWorkload& workload, const GpuSpec& gpu,
                                    int microbatches,
                                    double inter_node_gbps = kDefaultInterNodeGbps);

}  // namespace joulepipe::physics
