// Tests of the transformer workload model (sim/workload.hpp): the model
// catalog, FLOP and byte counts against hand-computed values, where uneven
// stages come from, parallelism, recomputation, the simulated profile's
// clocks and energies, the calibration it is pinned to, and input errors.
#include "joulepipe/physics/workload.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::physics {
namespace {

using model::Kind;

// A100-SXM4-80GB throughput figures from NVIDIA's datasheet and a DVFS model
// of the catalog's shape; fixed here so these tests do not move when the GPU
// catalog is recalibrated. The 500 W limit leaves dense work uncapped.
GpuSpec TestA100() {
  GpuSpec gpu;
  gpu.id = "test-a100";
  gpu.min_sm_mhz = 210;
  gpu.max_sm_mhz = 1410;
  gpu.sm_step_mhz = 15;
  gpu.tdp_w = 500;
  gpu.power_limit_min_w = 100;
  gpu.power_limit_max_w = 500;
  gpu.idle_w = 62;
  gpu.p_block_w = 83.64;
  gpu.peak_bf16_tflops = 312;
  gpu.hbm_gbps = 2039;
  gpu.nvlink_gbps = 300;
  gpu.dvfs = {0.7125, 0.85, 1080, 56, 419};
  return gpu;
}

WorkloadSpec Spec(const std::string& model, int tp, int pp, int dp = 1) {
  WorkloadSpec spec;
  spec.model = FindTransformer(model);
  spec.parallel.tp = tp;
  spec.parallel.pp = pp;
  spec.parallel.dp = dp;
  return spec;
}

// The message of the InputError `f` throws ("" if none).
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const model::InputError& e) {
    return e.what();
  }
  return "";
}

// The field() of the InputError `f` throws ("" if none or unnamed).
template <typename F>
std::string FieldOf(F f) {
  try {
    f();
  } catch (const model::InputError& e) {
    return e.field();
  }
  return "";
}

// Library messages name fields, never a front end's flags.
void ExpectError(const std::string& message, std::initializer_list<std::string> needles) {
  ASSERT_FALSE(message.empty()) << "no InputError thrown";
  EXPECT_EQ(message.find("--"), std::string::npos) << "names a flag: " << message;
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in: " << message;
  }
}

// ---- Catalog --------------------------------------------------------------------

TEST(TransformerCatalog, HasTheIssueModelsWithPublishedParameterCounts) {
  const std::vector<std::pair<std::string, double>> nominal = {
      {"gpt3-1.3b", 1.3e9},
      {"gpt3-2.7b", 2.7e9},
      {"gpt3-6.7b", 6.7e9},
      {"gpt3-13b", 13e9},
      {"gpt3-175b", 175e9},
      {"llama3-8b", 8.03e9},
      {"llama3-70b", 70.6e9},
      {"llama3-405b", 405e9},
      {"bloom-176b", 176.2e9},
      {"bloom-3b", 3.0e9},
      // Merak README (ml-energy/zeus @38cb3f9 merak/examples): 1,276.40M;
      // Hugging Face t5-3b: 2.85B.
      {"bert-huge", 1276.40e6},
      {"t5-3b", 2.85e9}};
  for (const auto& [id, params] : nominal) {
    const TransformerConfig& m = FindTransformer(id);
    EXPECT_EQ(m.id, id);
    EXPECT_NEAR(m.Parameters() / params, 1.0, 0.025) << id << ": " << m.Parameters();
    for (const char* field : {"layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "mlp",
                              "position", "tied_embeddings", "seq_length"}) {
      EXPECT_FALSE(m.sources.count(field) == 0 || m.sources.at(field).empty())
          << id << " has no source for " << field;
    }
  }
  EXPECT_EQ(TransformerCatalog().size(), nominal.size());
}

TEST(TransformerCatalog, ArchitectureFacts) {
  const TransformerConfig& llama = FindTransformer("llama3-70b");
  EXPECT_EQ(llama.layers, 80);
  EXPECT_EQ(llama.kv_heads, 8);
  EXPECT_EQ(llama.kv_dim(), 1024);
  EXPECT_EQ(llama.mlp, MlpKind::kSwiglu);
  EXPECT_FALSE(llama.tied_embeddings);
  const TransformerConfig& bloom = FindTransformer("bloom-176b");
  EXPECT_EQ(bloom.position, PositionKind::kAlibi);
  EXPECT_TRUE(bloom.embedding_norm);
  // Megatron's padding to a multiple of 128 x TP gives BLOOM's released
  // 250880-row embedding at TP 8, and GPT-3's 51200.
  WorkloadSpec spec = Spec("bloom-176b", 8, 1);
  EXPECT_EQ(spec.padded_vocab(), 250880);
  spec = Spec("gpt3-175b", 8, 1);
  EXPECT_EQ(spec.padded_vocab(), 51200);
  spec.parallel.tp = 1;
  EXPECT_EQ(spec.padded_vocab(), 50304);
}

// The encoder and the encoder-decoder Perseus trained (bench_fidelity).
TEST(TransformerCatalog, EncoderAndEncoderDecoderFacts) {
  const TransformerConfig& bert = FindTransformer("bert-huge-uncased");
  EXPECT_EQ(bert.id, "bert-huge");
  EXPECT_TRUE(bert.head_transform);
  EXPECT_EQ(bert.token_types, 2);
  EXPECT_EQ(bert.total_layers(), 24);
  EXPECT_FALSE(bert.IsCrossAttentionLayer(23));
  const TransformerConfig& t5 = FindTransformer("t5-3b");
  EXPECT_EQ(t5.total_layers(), 48);
  EXPECT_EQ(t5.q_dim(), 4096);  // 32 heads of 128 on a hidden size of 1024
  EXPECT_EQ(t5.position, PositionKind::kRelative);
  EXPECT_EQ(t5.mlp, MlpKind::kRelu);
  EXPECT_FALSE(t5.IsCrossAttentionLayer(23));
  EXPECT_TRUE(t5.IsCrossAttentionLayer(24));
  // By hand: attention 4 x 1024 x 4096, MLP 2 x 1024 x 16384, RMS norms of
  // 1024 (two in an encoder layer, three in a decoder layer).
  const double attention = 4.0 * 1024 * 4096, mlp = 2.0 * 1024 * 16384;
  EXPECT_DOUBLE_EQ(t5.LayerParameters(), attention + mlp + 2 * 1024);
  EXPECT_DOUBLE_EQ(t5.LayerParameters(true), 2 * attention + mlp + 3 * 1024);
}

TEST(TransformerCatalog, AliasesAreCaseInsensitiveAndUnknownIdsListTheKnownOnes) {
  EXPECT_EQ(FindTransformer("GPT3").id, "gpt3-175b");
  EXPECT_EQ(FindTransformer("Llama3.1-405B").id, "llama3-405b");
  ExpectError(ErrorOf([] { FindTransformer("gpt4"); }),
              {"unknown model 'gpt4'", "gpt3-175b", "llama3-70b", "bloom-176b"});
}

constexpr char kTinyJson[] = R"({
  "id": "tiny", "name": "Tiny", "layers": 4, "hidden": 64, "ffn_hidden": 256,
  "heads": 4, "kv_heads": 4, "vocab": 1, "mlp": "gelu", "norm": "rmsnorm",
  "position": "rope", "tied_embeddings": false, "embedding_norm": false,
  "linear_bias": false, "seq_length": 128
})";

std::string Edited(const std::string& from, const std::string& to) {
  std::string text = kTinyJson;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(TransformerConfigParse, BadInputNamesTheSourceAndField) {
  EXPECT_EQ(ParseTransformerConfig(kTinyJson, "tiny.json").layers, 4);
  ExpectError(ErrorOf([] { ParseTransformerConfig(Edited("\"layers\": 4,", ""), "t.json"); }),
              {"t.json", "missing field 'layers'"});
  ExpectError(ErrorOf([] { ParseTransformerConfig(Edited("\"gelu\"", "\"silu\""), "t.json"); }),
              {"t.json", "'mlp'", "silu", "gelu, swiglu, relu"});
  ExpectError(ErrorOf([] {
                ParseTransformerConfig(
                    Edited("\"layers\": 4,", "\"layers\": 4, \"decoder_layers\": -1,"), "t");
              }),
              {"'decoder_layers'", "0..1000000", "-1"});
  // A head width of its own lifts the hidden % heads rule (T5).
  EXPECT_EQ(ParseTransformerConfig(
                Edited("\"heads\": 4", "\"heads\": 8, \"attention_head_dim\": 12"), "t")
                .q_dim(),
            96);
  ExpectError(ErrorOf([] { ParseTransformerConfig(Edited("\"heads\": 4", "\"heads\": 5"), "t"); }),
              {"'hidden' (64)", "'heads' (5)", "attention_head_dim"});
  ExpectError(
      ErrorOf([] { ParseTransformerConfig(Edited("\"kv_heads\": 4", "\"kv_heads\": 3"), "t"); }),
      {"'kv_heads' (3)"});
  ExpectError(
      ErrorOf([] { ParseTransformerConfig(Edited("\"layers\": 4", "\"layers\": -4"), "t"); }),
      {"'layers'", "> 0", "-4"});
  ExpectError(ErrorOf([] { ParseTransformerConfig(Edited("\"layers\"", "\"n_layers\""), "t"); }),
              {"unknown field 'n_layers'"});
  ExpectError(ErrorOf([] { ParseTransformerConfig("{", "t.json"); }), {"t.json", "not valid JSON"});
}

// ---- FLOPs and bytes ---------------------------------------------------------------

TEST(StageCosts, ModelFlopsMatchTheHandFormulaAndSixNT) {
  // GPT-3 175B, one sequence of 2048 tokens, TP 8 x PP 8.
  const WorkloadSpec spec = Spec("gpt3-175b", 8, 8);
  const std::vector<StageCost> stages = ComputeStageCosts(spec);
  double total = 0;
  for (const StageCost& s : stages) total += 8 * (s.forward.model_flops + s.backward.model_flops);
  // Forward per layer 24 T h^2 + 4 T s h; LM head 2 T h V; backward twice.
  const double T = 2048, s = 2048, h = 12288, V = 51200, l = 96;
  const double hand = 3 * (l * (24 * T * h * h + 4 * T * s * h) + 2 * T * h * V);
  EXPECT_NEAR(total / hand, 1.0, 1e-12);
  // The rule of thumb: 6 x parameters x tokens, within a few per cent.
  const double six_nt = 6 * spec.model.Parameters() * T;
  EXPECT_NEAR(total / six_nt, 1.0, 0.04) << total << " vs " << six_nt;
}

TEST(StageCosts, OneLlamaLayerByHand) {
  // Llama 3 70B with one layer per stage: a middle stage is exactly a layer.
  WorkloadSpec spec = Spec("llama3-70b", 8, 80);
  spec.microbatch_size = 2;
  const StageCost middle = ComputeStageCosts(spec)[40];
  const double T = 2 * 8192, s = 8192, h = 8192, k = 1024, f = 28672, t = 8;
  const double gemm = (2 * T * h * (h + 2 * k) + 4 * T * s * h + 2 * T * h * h + 6 * T * h * f) / t;
  EXPECT_NEAR(middle.forward.gemm_flops / gemm, 1.0, 1e-12);
  // Elementwise bytes (bf16): norms, residuals, fused attention, RoPE, SwiGLU.
  const double elements =
      10 * T * h + T * (2 * h + 2 * k) / t + 2 * T * (h + k) / t + 3 * T * f / t;
  EXPECT_NEAR(middle.forward.activation_bytes / (2 * elements), 1.0, 1e-12);
  EXPECT_NEAR(middle.forward.weight_bytes / (2 * spec.model.LayerParameters() / t), 1.0, 1e-12);
  EXPECT_NEAR(middle.backward.weight_bytes / (10 * spec.model.LayerParameters() / t), 1.0, 1e-12);
  // Two ring all-reduces of T x h bf16 each way: 2 (t-1)/t x 2 x 2 T h bytes.
  EXPECT_NEAR(middle.forward.tp_comm_bytes / (2.0 * 7 / 8 * 2 * 2 * T * h), 1.0, 1e-12);
  EXPECT_EQ(middle.backward.tp_comm_bytes, middle.forward.tp_comm_bytes);
}

// The hf-eager framework profile adds exactly the score tensor's passes to
// a layer's elementwise traffic and nothing else; parsing names the field.
TEST(StageCosts, EagerAttentionAddsTheScoreTensorsPasses) {
  WorkloadSpec spec = Spec("gpt3-1.3b", 2, 4);
  spec.microbatch_size = 8;
  const StageCost fused = ComputeStageCosts(spec)[1];
  spec.framework = Framework::kHfEager;
  const StageCost eager = ComputeStageCosts(spec)[1];
  const double T = 8 * 2048, s = 2048, heads_per_gpu = 16 / 2.0, layers = 6;
  EXPECT_NEAR((eager.forward.activation_bytes - fused.forward.activation_bytes) /
                  (layers * 2 * kEagerScorePassesForward * T * s * heads_per_gpu),
              1.0, 1e-12);
  EXPECT_NEAR((eager.backward.activation_bytes - fused.backward.activation_bytes) /
                  (layers * 2 * kEagerScorePassesBackward * T * s * heads_per_gpu),
              1.0, 1e-12);
  EXPECT_EQ(eager.forward.gemm_flops, fused.forward.gemm_flops);
  EXPECT_EQ(eager.forward.weight_bytes, fused.forward.weight_bytes);
  EXPECT_EQ(ParseFramework("hf-eager"), Framework::kHfEager);
  EXPECT_EQ(FrameworkName(Framework::kMegatron), "megatron");
  ExpectError(ErrorOf([] { ParseFramework("deepspeed"); }),
              {"WorkloadSpec::framework", "'deepspeed'", "megatron, hf-eager"});
}

// fp32 with TF32 matmuls: every element twice the bytes, GEMMs at half the
// rate, the FLOPs unchanged.
TEST(StageCosts, Tf32DoublesTheBytesAndHalvesTheGemmRate) {
  WorkloadSpec spec = Spec("gpt3-1.3b", 2, 4);
  spec.microbatch_size = 4;
  const StageCost bf16 = ComputeStageCosts(spec)[1];
  spec.precision = Precision::kTf32;
  const StageCost tf32 = ComputeStageCosts(spec)[1];
  EXPECT_EQ(tf32.forward.gemm_flops, bf16.forward.gemm_flops);
  EXPECT_NEAR(tf32.forward.activation_bytes / bf16.forward.activation_bytes, 2.0, 1e-12);
  EXPECT_NEAR(tf32.forward.weight_bytes / bf16.forward.weight_bytes, 2.0, 1e-12);
  EXPECT_NEAR(tf32.forward.tp_comm_bytes / bf16.forward.tp_comm_bytes, 2.0, 1e-12);
  // Backward weights: read the weight (2 or 4 B) + the fp32 main gradient (8 B).
  EXPECT_NEAR(tf32.backward.weight_bytes / bf16.backward.weight_bytes, 12.0 / 10.0, 1e-12);
  const GpuSpec gpu = TestA100();
  EXPECT_NEAR(CostToWork(tf32.forward, gpu).compute_s / CostToWork(bf16.forward, gpu).compute_s,
              1 / kTf32PeakShare, 1e-12);
  // Eager attention in fp32 has no casts: 9.5 / 10.5 four-byte passes.
  spec.framework = Framework::kHfEager;
  const StageCost eager = ComputeStageCosts(spec)[1];
  const double T = 4 * 2048, s = 2048, heads_per_gpu = 16 / 2.0, layers = 6;
  EXPECT_NEAR((eager.forward.activation_bytes - tf32.forward.activation_bytes) /
                  (layers * 4 * kEagerScorePassesForwardFp32 * T * s * heads_per_gpu),
              1.0, 1e-12);
  EXPECT_EQ(ParsePrecision("tf32"), Precision::kTf32);
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
  ExpectError(ErrorOf([] { ParsePrecision("fp8"); }),
              {"WorkloadSpec::precision", "'fp8'", "bf16, tf32"});
}

// The last stage's cross-entropy as each framework computes it, per logit
// (T x V / t elements): Megatron's vocab-parallel loss 34 B forward and 14 B
// backward; a Hugging Face model trained eagerly (Merak's
// CrossEntropyLoss over the logits) 16 and 20 in fp32, 6 more each way in
// bf16 for the casts to and from fp32.
TEST(StageCosts, TheLossCostsWhatTheFrameworksKernelsMove) {
  WorkloadSpec spec = Spec("bloom-3b", 1, 4);
  spec.parallel.layer_split = {8, 8, 8, 6};
  spec.microbatch_size = 4;
  spec.seq_length = 1024;
  const double logits = 4.0 * 1024 * spec.padded_vocab();
  // Eager minus fused loss bytes per logit on the last stage, {forward,
  // backward}. The frameworks' attention passes differ too: the middle
  // stage's eager - fused difference per layer takes them out.
  auto loss_difference = [&](Precision precision) {
    spec.precision = precision;
    spec.framework = Framework::kHfEager;
    const std::vector<StageCost> eager = ComputeStageCosts(spec);
    spec.framework = Framework::kMegatron;
    const std::vector<StageCost> fused = ComputeStageCosts(spec);
    const StageCost &e = eager.back(), &f = fused.back(), &em = eager[1], &fm = fused[1];
    const double per_layer = static_cast<double>(f.layers) / fm.layers;
    return std::pair{(e.forward.activation_bytes - f.forward.activation_bytes -
                      per_layer * (em.forward.activation_bytes - fm.forward.activation_bytes)) /
                         logits,
                     (e.backward.activation_bytes - f.backward.activation_bytes -
                      per_layer * (em.backward.activation_bytes - fm.backward.activation_bytes)) /
                         logits};
  };
  const auto [fp32_forward, fp32_backward] = loss_difference(Precision::kTf32);
  EXPECT_NEAR(fp32_forward, 16.0 - 34.0, 1e-9);
  EXPECT_NEAR(fp32_backward, 20.0 - 14.0, 1e-9);
  // bf16 under autocast: the eager loss adds the casts (6 B each way).
  const auto [bf16_forward, bf16_backward] = loss_difference(Precision::kBf16);
  EXPECT_NEAR(bf16_forward, 22.0 - 34.0, 1e-9);
  EXPECT_NEAR(bf16_backward, 26.0 - 14.0, 1e-9);
}

// A decoder layer of an encoder-decoder is an encoder layer plus one more
// attention block; the layer split counts encoder and decoder layers, and
// the balanced split of an encoder-decoder is the best contiguous one.
TEST(StageCosts, DecoderLayersAddCrossAttention) {
  WorkloadSpec spec = Spec("t5-3b", 1, 2);
  spec.microbatch_size = 4;
  const std::vector<StageCost> stages = ComputeStageCosts(spec);
  ASSERT_EQ(stages.size(), 2u);  // even split: 24 encoder, 24 decoder layers
  const double T = 4 * 512, s = 512, h = 1024, q = 4096, f = 16384;
  const double attention = 2 * T * h * 3 * q + 4 * T * s * q + 2 * T * q * h;
  const double layer = attention + 2 * 2 * T * h * f;
  const double head = 2 * T * h * 32128;
  EXPECT_NEAR(stages[0].forward.gemm_flops / (24 * layer), 1.0, 1e-12);
  EXPECT_NEAR(stages[1].forward.gemm_flops / (24 * (layer + attention) + head), 1.0, 1e-12);
  // The decoder's cross-attention and its norms, plus the final norm (the
  // first stage holds the embedding, the last its tied copy).
  EXPECT_NEAR(stages[1].parameters - stages[0].parameters, 24 * (4 * h * q + h) + h, 1.0);
  const std::vector<int> balanced = BalancedLayerSplit(Spec("t5-3b", 1, 4), TestA100());
  EXPECT_EQ(std::accumulate(balanced.begin(), balanced.end(), 0), 48);
  // Decoder layers cost more, so the encoder stages take more layers.
  EXPECT_GT(balanced[0], balanced[3]);
  auto slowest = [&](const std::vector<int>& split) {
    WorkloadSpec w = Spec("t5-3b", 1, 4);
    w.parallel.layer_split = split;
    double worst = 0;
    for (const StageCost& c : ComputeStageCosts(w)) {
      worst = std::max(worst, CostToWork(c.forward, TestA100()).work.time_at_max_s +
                                  CostToWork(c.backward, TestA100()).work.time_at_max_s);
    }
    return worst;
  };
  EXPECT_LT(slowest(balanced), slowest({12, 12, 12, 12}));
  EXPECT_LE(slowest(balanced),
            slowest({balanced[0] + 1, balanced[1] - 1, balanced[2], balanced[3]}));
}

TEST(StageCosts, BackwardIsTwiceForwardAndFullRecomputeAddsOneForward) {
  WorkloadSpec spec = Spec("gpt3-13b", 4, 4);
  const StageCost plain = ComputeStageCosts(spec)[1];
  EXPECT_NEAR(plain.backward.gemm_flops / plain.forward.gemm_flops, 2.0, 1e-12);
  spec.recompute = Recompute::kFull;
  const StageCost full = ComputeStageCosts(spec)[1];
  EXPECT_NEAR(full.backward.gemm_flops / full.forward.gemm_flops, 3.0, 1e-12);
  // Recomputation is work, not model FLOPs; the forward is unchanged.
  EXPECT_EQ(full.backward.model_flops, plain.backward.model_flops);
  EXPECT_EQ(full.forward.gemm_flops, plain.forward.gemm_flops);
  EXPECT_GT(full.backward.activation_bytes, plain.backward.activation_bytes);
  EXPECT_GT(full.backward.tp_comm_bytes, plain.backward.tp_comm_bytes);
}

TEST(StageCosts, TensorParallelismSplitsPerGpuFlops) {
  const StageCost tp4 = ComputeStageCosts(Spec("llama3-70b", 4, 8))[3];
  const StageCost tp8 = ComputeStageCosts(Spec("llama3-70b", 8, 8))[3];
  EXPECT_NEAR(tp4.forward.gemm_flops / tp8.forward.gemm_flops, 2.0, 1e-12);
  EXPECT_NEAR(tp4.backward.gemm_flops / tp8.backward.gemm_flops, 2.0, 1e-12);
  EXPECT_NEAR(tp4.parameters / tp8.parameters, 2.0, 1e-3);
  // Ring all-reduce: 2 (t-1)/t of the same tensor.
  EXPECT_NEAR(tp8.forward.tp_comm_bytes / tp4.forward.tp_comm_bytes, (7.0 / 8) / (3.0 / 4), 1e-12);
  EXPECT_EQ(ComputeStageCosts(Spec("llama3-70b", 1, 8))[3].forward.tp_comm_bytes, 0);
}

TEST(StageCosts, FirstAndLastStagesCarryTheEmbeddingAndTheHead) {
  const WorkloadSpec spec = Spec("gpt3-175b", 8, 8);
  const std::vector<StageCost> stages = ComputeStageCosts(spec);
  ASSERT_EQ(stages.size(), 8u);
  const StageCost &first = stages[0], &middle = stages[3], &last = stages[7];
  EXPECT_TRUE(first.embedding && !first.lm_head);
  EXPECT_TRUE(last.lm_head && !last.embedding);
  EXPECT_EQ(middle.first_layer, 36);
  // The embedding is memory-bound: no GEMM FLOPs, more bytes and an all-reduce.
  EXPECT_EQ(first.forward.gemm_flops, middle.forward.gemm_flops);
  EXPECT_GT(first.forward.activation_bytes, middle.forward.activation_bytes);
  EXPECT_GT(first.forward.tp_comm_bytes, middle.forward.tp_comm_bytes);
  EXPECT_GT(first.backward.weight_bytes, middle.backward.weight_bytes);
  // The LM head adds exactly 2 T h V / t forward FLOPs.
  EXPECT_NEAR(last.forward.gemm_flops - middle.forward.gemm_flops, 2.0 * 2048 * 12288 * 51200 / 8,
              1.0);
  EXPECT_GT(last.forward.activation_bytes, first.forward.activation_bytes);  // loss over logits
  for (int s = 2; s < 7; ++s) {
    EXPECT_EQ(stages[s].forward.gemm_flops, stages[1].forward.gemm_flops);
    EXPECT_EQ(stages[s].backward.hbm_bytes(), stages[1].backward.hbm_bytes());
  }
  const GpuSpec gpu = TestA100();
  auto time = [&](const StageCost& c) {
    return CostToWork(c.forward, gpu).work.time_at_max_s +
           CostToWork(c.backward, gpu).work.time_at_max_s;
  };
  EXPECT_GT(time(first), time(middle));
  EXPECT_GT(time(last), time(first));
}

TEST(StageCosts, ATinyVocabularyLeavesStagesNearlyEqual) {
  WorkloadSpec spec;
  spec.model = ParseTransformerConfig(kTinyJson, "tiny.json");
  spec.model.hidden = 4096;
  spec.model.ffn_hidden = 16384;
  spec.model.heads = 32;
  spec.model.kv_heads = 32;
  spec.model.seq_length = 2048;
  spec.parallel = {1, 4, 1, {}};
  const GpuSpec gpu = TestA100();
  const std::vector<StageCost> stages = ComputeStageCosts(spec);
  const double middle = CostToWork(stages[1].forward, gpu).work.time_at_max_s;
  for (const StageCost& s : stages) {
    // Only the embedding's output write and the final norm remain.
    EXPECT_NEAR(CostToWork(s.forward, gpu).work.time_at_max_s / middle, 1.0, 0.01) << s.stage;
  }
  // ... which a realistic vocabulary does not.
  spec.model.vocab = 128256;
  const std::vector<StageCost> big = ComputeStageCosts(spec);
  EXPECT_GT(CostToWork(big[3].forward, gpu).work.time_at_max_s / middle, 1.1);
}

// ---- Parallelism checks -------------------------------------------------------------

TEST(LayerSplit, ParsesAndValidates) {
  EXPECT_EQ(ParseLayerSplit("11,12, 12,11"), (std::vector<int>{11, 12, 12, 11}));
  ExpectError(ErrorOf([] { ParseLayerSplit("11,x,12"); }),
              {"Parallelism::layer_split entry 2", "'x'"});
  EXPECT_EQ(FieldOf([] { ParseLayerSplit("11,x,12"); }), "Parallelism::layer_split");
  ExpectError(ErrorOf([] { ParseLayerSplit("1,y", "layers.txt"); }), {"layers.txt entry 2"});
  ExpectError(ErrorOf([] { ParseLayerSplit("11,,12"); }), {"entry 2"});
  ExpectError(ErrorOf([] { ParseLayerSplit("0,12"); }), {"entry 1", "'0'"});

  WorkloadSpec spec = Spec("gpt3-175b", 8, 4);
  spec.parallel.layer_split = {24, 24, 24, 25};
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }),
              {"Parallelism::layer_split sums to 97", "has 96", "add up to 96"});
  EXPECT_EQ(FieldOf([&] { ResolveLayerSplit(spec); }), "Parallelism::layer_split");
  spec.parallel.layer_split = {48, 48};
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }),
              {"Parallelism::layer_split has 2 entries", "Parallelism::pp is 4"});
  spec.parallel.layer_split = {48, 0, 24, 24};
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }),
              {"Parallelism::layer_split entry 2 is 0", "at least one layer"});
  spec.parallel.layer_split = {20, 28, 24, 24};
  EXPECT_EQ(ResolveLayerSplit(spec), spec.parallel.layer_split);
  EXPECT_EQ(ComputeStageCosts(spec)[2].first_layer, 48);
}

TEST(LayerSplit, UnevenLayerCountsNeedASplit) {
  const WorkloadSpec spec = Spec("llama3-405b", 8, 8);  // 126 layers
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }),
              {"126 layers", "Parallelism::pp 8", "BalancedLayerSplit",
               "Parallelism::layer_split to 8 numbers", "e.g. 15,16,16,16,16,16,16,15"});
  EXPECT_EQ(FieldOf([&] { ResolveLayerSplit(spec); }), "Parallelism::layer_split");
  const std::vector<int> balanced = BalancedLayerSplit(spec, TestA100());
  ASSERT_EQ(balanced.size(), 8u);
  EXPECT_EQ(std::accumulate(balanced.begin(), balanced.end(), 0), 126);
  const int middle_max = *std::max_element(balanced.begin() + 1, balanced.end() - 1);
  EXPECT_LE(balanced.front(), middle_max);
  EXPECT_LT(balanced.back(), middle_max);  // the LM head and loss cost layers
  // It is never slower than the near-even split.
  auto slowest = [&](const std::vector<int>& split) {
    WorkloadSpec with = spec;
    with.parallel.layer_split = split;
    double worst = 0;
    for (const StageCost& c : ComputeStageCosts(with)) {
      worst = std::max(worst, CostToWork(c.forward, TestA100()).work.time_at_max_s +
                                  CostToWork(c.backward, TestA100()).work.time_at_max_s);
    }
    return worst;
  };
  EXPECT_LE(slowest(balanced), slowest({15, 16, 16, 16, 16, 16, 16, 15}));
}

TEST(LayerSplit, BalancedIsEvenWithoutEmbeddingOrHeadCost) {
  WorkloadSpec spec;
  spec.model = ParseTransformerConfig(kTinyJson, "tiny.json");
  spec.model.layers = 8;
  spec.parallel = {1, 4, 1, {}};
  EXPECT_EQ(BalancedLayerSplit(spec, TestA100()), (std::vector<int>{2, 2, 2, 2}));
}

TEST(Parallelism, ChecksNameTheField) {
  ExpectError(ErrorOf([] { ResolveLayerSplit(Spec("llama3-70b", 16, 8)); }),
              {"Parallelism::tp 16", "8 key/value heads"});
  EXPECT_EQ(FieldOf([] { ResolveLayerSplit(Spec("llama3-70b", 16, 8)); }), "Parallelism::tp");
  ExpectError(ErrorOf([] { ResolveLayerSplit(Spec("gpt3-1.3b", 1, 25)); }),
              {"Parallelism::pp 25", "24 layers"});
  EXPECT_EQ(FieldOf([] { ResolveLayerSplit(Spec("gpt3-1.3b", 1, 25)); }), "Parallelism::pp");
  ExpectError(ErrorOf([] { ResolveLayerSplit(Spec("gpt3-1.3b", 0, 4)); }),
              {"Parallelism::tp must be 1..1024 (got 0)"});
  ExpectError(ErrorOf([] { ResolveLayerSplit(Spec("gpt3-1.3b", 1, 0)); }),
              {"Parallelism::pp must be 1..1024 (got 0)"});
  WorkloadSpec spec = Spec("gpt3-175b", 8, 8);
  spec.seq_length = 4096;
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }),
              {"WorkloadSpec::seq_length 4096", "2048 learned positions"});
  EXPECT_EQ(FieldOf([&] { ResolveLayerSplit(spec); }), "WorkloadSpec::seq_length");
  spec.seq_length = -1;
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }),
              {"WorkloadSpec::seq_length must be 1..10000000", "or 0 for the model's own"});
  spec.seq_length = 0;
  spec.microbatch_size = 0;
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }), {"WorkloadSpec::microbatch_size"});
  EXPECT_EQ(FieldOf([&] { ResolveLayerSplit(spec); }), "WorkloadSpec::microbatch_size");
  spec.microbatch_size = 1;
  spec.parallel.dp = 0;
  ExpectError(ErrorOf([&] { ResolveLayerSplit(spec); }), {"Parallelism::dp"});
  EXPECT_EQ(FieldOf([&] { ResolveLayerSplit(spec); }), "Parallelism::dp");
  EXPECT_EQ(ParseRecompute("full"), Recompute::kFull);
  ExpectError(ErrorOf([] { ParseRecompute("selective"); }),
              {"WorkloadSpec::recompute 'selective'", "none, full"});
  EXPECT_EQ(FieldOf([] { ParseRecompute("selective"); }), "WorkloadSpec::recompute");
}

// Every count has a plausible range, and the job's GPUs are counted in 64
// bits: 2,000,000,000 data-parallel pipelines used to print "-589934592 GPUs".
TEST(Parallelism, CountsHaveRangesAndTheirProductIsBounded) {
  auto field_of = [](auto edit) {
    WorkloadSpec spec = Spec("gpt3-1.3b", 1, 4);
    edit(spec);
    return FieldOf([&] { ResolveLayerSplit(spec); });
  };
  auto message_of = [](auto edit) {
    WorkloadSpec spec = Spec("gpt3-1.3b", 1, 4);
    edit(spec);
    return ErrorOf([&] { ResolveLayerSplit(spec); });
  };
  EXPECT_EQ(field_of([](WorkloadSpec& s) { s.parallel.tp = 2048; }), "Parallelism::tp");
  EXPECT_EQ(field_of([](WorkloadSpec& s) { s.parallel.pp = 1025; }), "Parallelism::pp");
  ExpectError(message_of([](WorkloadSpec& s) { s.parallel.dp = 2000000000; }),
              {"Parallelism::dp must be 1..100000 (got 2000000000)"});
  // 1,024 x 16 x 100,000 GPUs: each count in range, the product not.
  WorkloadSpec big = Spec("gpt3-175b", 8, 16);
  big.parallel.dp = 100000;
  ExpectError(ErrorOf([&] { ResolveLayerSplit(big); }),
              {"Parallelism::tp 8 x Parallelism::pp 16 x Parallelism::dp 100000 = 12800000 GPUs",
               "at most 10000000"});
  big.parallel.dp = 78125;  // exactly 10,000,000
  EXPECT_NO_THROW(ResolveLayerSplit(big));
  ExpectError(message_of([](WorkloadSpec& s) { s.microbatch_size = 100000; }),
              {"WorkloadSpec::microbatch_size must be 1..65536 (got 100000)"});
  EXPECT_EQ(field_of([](WorkloadSpec& s) { s.seq_length = 20000000; }), "WorkloadSpec::seq_length");
}

// A microbatch too big for one stage's GPUs gives instructions of hours; the
// simulated profile says which workload fields to change instead of breaking
// a profile bound (model::kMaxInstructionSeconds).
TEST(SimulatedProfile, AnInstructionOverAnHourNamesTheWorkloadFields) {
  WorkloadSpec spec = Spec("gpt3-175b", 8, 8);
  spec.seq_length = 2048;
  spec.microbatch_size = 60000;
  const std::string message = ErrorOf([&] { SimulateWorkload(spec, TestA100()); });
  ExpectError(message, {"WorkloadSpec::microbatch_size 60000 x WorkloadSpec::seq_length 2048",
                        "more than an hour per microbatch", "Parallelism::tp"});
  EXPECT_EQ(FieldOf([&] { SimulateWorkload(spec, TestA100()); }), "WorkloadSpec::microbatch_size");
}

// ---- Time, power and the profile ---------------------------------------------------------

TEST(SimulatedProfile, ClocksTimesAndTheEnergyUShape) {
  const GpuSpec gpu = TestA100();
  const SimulatedWorkload w = SimulateWorkload(Spec("gpt3-175b", 8, 8), gpu);
  // Like Perseus's A100 profiles: 1410 down to 855 MHz in 15 MHz steps.
  ASSERT_EQ(w.clocks.size(), 38u);
  EXPECT_EQ(w.clocks.front(), 1410);
  EXPECT_EQ(w.clocks.back(), 855);
  w.profile.Validate(8, "simulated");
  for (int s = 0; s < 8; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const std::vector<model::ClockPoint>& points = w.profile.Points(s, kind);
      ASSERT_EQ(points.size(), 38u);
      // A lower clock is never faster; above the clock where the GEMMs meet
      // the 400 W limit, the board runs them at that clock whatever is
      // asked, so the top clocks take the same time.
      for (size_t i = 1; i < points.size(); ++i) {
        EXPECT_GE(points[i].time_s, points[i - 1].time_s);
      }
      EXPECT_GT(points.back().time_s, 1.3 * points.front().time_s);
      // Energy falls from fmax to the voltage floor's ridge, then rises again.
      const auto least = std::min_element(
          points.begin(), points.end(), [](const model::ClockPoint& a, const model::ClockPoint& b) {
            return a.energy_j < b.energy_j;
          });
      EXPECT_LT(least->energy_j, points.front().energy_j);
      EXPECT_LT(least->energy_j, points.back().energy_j);
      EXPECT_GT(least->mhz, 855);
      EXPECT_LT(least->mhz, 1410);
    }
    EXPECT_EQ(w.stages[s].min_energy_mhz, 1080);  // the ridge of TestA100's voltage curve
  }
  // Every figure comes from physics::Run at that clock.
  const OperatingPoint op = physics::Run(gpu, w.stages[7].backward.work, 1200, gpu.tdp_w);
  EXPECT_DOUBLE_EQ(w.profile.Find(7, Kind::kBackward, 1200)->energy_j, op.energy_j);
  EXPECT_DOUBLE_EQ(w.profile.Find(7, Kind::kBackward, 1200)->time_s, op.time_s);
}

TEST(SimulatedProfile, PowerLimitCapsTheHighClocks) {
  const GpuSpec gpu = TestA100();
  ProfileOptions options;
  options.power_limit_w = 300;
  const SimulatedWorkload w = SimulateWorkload(Spec("gpt3-175b", 8, 8), gpu, options);
  EXPECT_EQ(w.power_limit_w, 300);
  EXPECT_TRUE(w.stages[0].forward_at_max.power_capped);
  EXPECT_LE(w.stages[0].forward_at_max.power_w, 300 + 1e-6);
  const auto& points = w.profile.Points(0, Kind::kForward);
  EXPECT_NEAR(points[0].time_s / points[1].time_s, 1.0, 1e-6);  // 1410 and 1395 both capped
  options.power_limit_w = 50;
  ExpectError(ErrorOf([&] { SimulateWorkload(Spec("gpt3-175b", 8, 8), gpu, options); }),
              {"ProfileOptions::power_limit_w 50 W", "100..500 W", "or 0 for its TDP"});
  EXPECT_EQ(FieldOf([&] { SimulateWorkload(Spec("gpt3-175b", 8, 8), gpu, options); }),
            "ProfileOptions::power_limit_w");
  options.power_limit_w = -1;
  ExpectError(ErrorOf([&] { SimulateWorkload(Spec("gpt3-175b", 8, 8), gpu, options); }),
              {"ProfileOptions::power_limit_w must be a finite number of watts >= 0 (got -1)"});
  options.power_limit_w = 0;
  options.min_mhz = 100;
  ExpectError(ErrorOf([&] { ProfileClocks(gpu, options); }),
              {"ProfileOptions::min_mhz 100", "210..1410", "choose a clock in that range"});
  EXPECT_EQ(FieldOf([&] { ProfileClocks(gpu, options); }), "ProfileOptions::min_mhz");
  options.min_mhz = 1200;
  EXPECT_EQ(ProfileClocks(gpu, options).back(), 1200);
}

// Under a binding limit the board caps GEMMs alone; memory-bound kernels
// keep the requested clock. Share 0 is physics::Run; without a binding
// limit every share is physics::Run.
TEST(SimulatedProfile, APowerCapBindsGemmsHarderThanMemoryBoundKernels) {
  const GpuSpec gpu = TestA100();
  WorkBreakdown b;
  b.compute_s = 0.06;
  b.memory_s = 0.04;
  b.work.time_at_max_s = 0.1;
  b.work.compute_fraction = 0.6;
  b.work.activity = (0.6 * kGemmActivity + 0.4 * kMemoryActivity) / kReferenceActivityMix;
  const OperatingPoint run = physics::Run(gpu, b.work, 1410, 300);
  ASSERT_TRUE(run.power_capped);
  const OperatingPoint none = RunByKernelClass(gpu, b, 1410, 300, 0);
  EXPECT_EQ(none.time_s, run.time_s);
  EXPECT_EQ(none.energy_j, run.energy_j);
  const OperatingPoint by_class = RunByKernelClass(gpu, b, 1410, 300, 1);
  // GEMMs run where they draw exactly 300 W, memory-bound kernels at 1410 MHz
  // (they draw less than 300 W there).
  const double a_gemm = kGemmActivity / kReferenceActivityMix;
  const double a_memory = kMemoryActivity / kReferenceActivityMix;
  ASSERT_LT(Power(gpu, a_memory, 1410), 300);
  double lo = gpu.min_sm_mhz, hi = 1410;
  for (int i = 0; i < 60; ++i) {
    const double m = (lo + hi) / 2;
    (Power(gpu, a_gemm, m) > 300 ? hi : lo) = m;
  }
  const double t_gemm = 0.06 * 1410 / lo;
  // (The library bisects the clock to 1e-3 MHz: a relative 1e-6.)
  EXPECT_NEAR(by_class.time_s / (t_gemm + 0.04), 1, 1e-6);
  EXPECT_NEAR(by_class.energy_j / (300 * t_gemm + Power(gpu, a_memory, 1410) * 0.04), 1, 1e-6);
  // Memory-bound kernels at full clock waste energy that a lower locked clock
  // saves: the class model is costlier at 1410 MHz than the average one.
  EXPECT_GT(by_class.energy_j, run.energy_j);
  const OperatingPoint blend = RunByKernelClass(gpu, b, 1410, 300, 0.25);
  EXPECT_NEAR(blend.energy_j, 0.75 * run.energy_j + 0.25 * by_class.energy_j, 1e-9);
  EXPECT_NEAR(blend.time_s, 0.75 * run.time_s + 0.25 * by_class.time_s, 1e-12);
  // No binding limit: Run, whatever the share.
  const OperatingPoint free = RunByKernelClass(gpu, b, 1000, 500, 1);
  EXPECT_EQ(free.energy_j, physics::Run(gpu, b.work, 1000, 500).energy_j);
  ProfileOptions options;
  options.class_cap_share = 2;
  ExpectError(ErrorOf([&] { SimulateWorkload(Spec("gpt3-175b", 8, 8), gpu, options); }),
              {"ProfileOptions::class_cap_share must be 0..1"});
}

// A locked clock runs at the speed the power cap allows: time never rises
// with the requested clock, so no clock below the top is faster, for every
// catalogue GPU, model and precision, at every supported clock, under the
// GPU's default limit and under its lowest. (The limit used to bind only
// when an instruction's average power exceeded it: a 400 W A100 then ran
// GPT-3 175B's stage-0 forward 2.8 % faster at 1290 MHz than at 1410.)
TEST(SimulatedProfile, TimeNeverRisesWithTheRequestedClock) {
  int checked = 0;
  for (const GpuSpec& gpu : GpuCatalog()) {
    for (const TransformerConfig& model : TransformerCatalog()) {
      for (Precision precision : {Precision::kBf16, Precision::kTf32}) {
        WorkloadSpec spec;
        spec.model = model;
        spec.precision = precision;
        // TP traffic inside the node where the GPU has NVLink; two stages.
        spec.parallel.tp =
            gpu.nvlink_gbps > 0 && model.heads % 8 == 0 && model.kv_heads % 8 == 0 ? 8 : 1;
        spec.parallel.pp = model.layers % 2 == 0 ? 2 : 1;
        const std::vector<StageCost> costs = ComputeStageCosts(spec);
        for (double limit :
             {gpu.tdp_w, gpu.power_limit_min_w > 0 ? gpu.power_limit_min_w : gpu.tdp_w}) {
          for (const StageCost& cost : costs) {
            for (const KindCost* kind : {&cost.forward, &cost.backward}) {
              const WorkBreakdown work = CostToWork(*kind, gpu);
              double slower = 0;  // the time at the next lower clock
              int below = 0;
              std::vector<int> clocks = gpu.SupportedSmClocks();
              std::sort(clocks.begin(), clocks.end());  // lowest first
              for (int mhz : clocks) {
                const double t = RunByKernelClass(gpu, work, mhz, limit).time_s;
                if (below > 0) {
                  ASSERT_LE(t, slower * (1 + 1e-9))
                      << gpu.id << " " << model.id << " " << PrecisionName(precision) << " "
                      << limit << " W stage " << cost.stage << ": " << mhz << " MHz takes " << t
                      << " s, " << below << " MHz " << slower << " s";
                }
                slower = t;
                below = mhz;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

TEST(SimulatedProfile, WorkSplitsComputeMemoryAndCommunication) {
  const GpuSpec gpu = TestA100();
  KindCost cost;
  cost.gemm_flops = 312e12 * kGemmEfficiency;  // 1 s of GEMM at fmax
  cost.activation_bytes = 2039e9 * kMemoryEfficiency * 0.5;
  cost.tp_comm_bytes = 300e9 * 0.25;
  const WorkBreakdown b = CostToWork(cost, gpu);
  EXPECT_NEAR(b.compute_s, 1.0, 1e-12);
  EXPECT_NEAR(b.memory_s, 0.5, 1e-12);
  EXPECT_NEAR(b.comm_s, 0.25, 1e-12);
  EXPECT_NEAR(b.work.time_at_max_s, 1.75, 1e-12);
  EXPECT_NEAR(b.work.compute_fraction, 1.0 / 1.75, 1e-12);
  EXPECT_NEAR(b.work.activity * kReferenceActivityMix,
              (kGemmActivity + 0.5 * kMemoryActivity + 0.25 * kCommActivity) / 1.75, 1e-12);
  GpuSpec no_nvlink = gpu;
  no_nvlink.nvlink_gbps = 0;
  ExpectError(ErrorOf([&] { CostToWork(cost, no_nvlink); }), {"nvlink_gbps"});
}

// The GEMM efficiency is calibrated against Narayanan et al. (SC'21), Table
// 1: GPT-3 175B on 1024 A100s (TP 8, PP 16, DP 8, global batch 1536, full
// recomputation) at 138 TFLOP/s per GPU. Micro-batch 1 => 192 microbatches.
TEST(Calibration, ReproducesMegatronGpt3Throughput) {
  WorkloadSpec spec = Spec("gpt3-175b", 8, 16, 8);
  spec.recompute = Recompute::kFull;
  const SimulatedWorkload w = SimulateWorkload(spec, TestA100());
  const IterationEstimate it = EstimateIteration(w, TestA100(), 192);
  EXPECT_NEAR(it.hardware_tflops, 138, 138 * 0.02) << it.time_s << " s";
  EXPECT_LT(it.mfu, SteadyStateMfu(w, TestA100()));  // the bubble and the sync cost
}

// The activity normalisation matches the GPU catalog's: the reference mix
// (GPT-3 175B, TP 8, PP 8 on A100) averages exactly activity 1.
TEST(Calibration, ReferenceWorkloadHasMeanActivityOne) {
  const SimulatedWorkload w = SimulateWorkload(Spec("gpt3-175b", 8, 8), TestA100());
  double sum = 0;
  for (const SimulatedStage& s : w.stages)
    sum += s.forward.work.activity + s.backward.work.activity;
  EXPECT_NEAR(sum / (2 * w.stages.size()), 1.0, 0.005);
}

TEST(Summary, DataParallelAllReduceAndMfu) {
  const SimulatedWorkload w = SimulateWorkload(Spec("gpt3-175b", 8, 8, 4), TestA100());
  const StageCost& middle = w.stages[3].cost;
  const double params = 12 * 12288.0 * 12288 + 13 * 12288.0;  // one GPT-3 layer
  EXPECT_NEAR(middle.parameters / (12 * params / 8), 1.0, 1e-12);
  EXPECT_NEAR(DpAllReduceSeconds(middle, 4, 25), 2.0 * 3 / 4 * 4 * middle.parameters / 25e9, 1e-12);
  EXPECT_EQ(DpAllReduceSeconds(middle, 1, 25), 0);
  const double mfu = SteadyStateMfu(w, TestA100());
  EXPECT_GT(mfu, 0.3);
  EXPECT_LT(mfu, kGemmEfficiency);
  // Many microbatches approach the steady state.
  EXPECT_NEAR(EstimateIteration(w, TestA100(), 100000).mfu / mfu, 1.0, 0.001);
}

}  // namespace
}  // namespace joulepipe::physics

namespace joulepipe::physics {
namespace {

// Where the ranks sit decides whether a TP group's all-reduces leave the
// node (Megatron: TP ranks adjacent; Merak: a pipeline's stages adjacent).
TEST(Placement, TpLeavesTheNodeOnlyWhenANodeHoldsNoWholeGroups) {
  WorkloadSpec spec = Spec("gpt3-6.7b", 2, 4, 2);
  EXPECT_FALSE(TpCrossesNodes(spec));  // gpus_per_node 0: inside, as before
  spec.placement.gpus_per_node = 4;
  EXPECT_FALSE(TpCrossesNodes(spec));  // tp-first: {0,1}, {2,3} per node
  spec.placement.rank_order = RankOrder::kPpFirst;
  EXPECT_TRUE(TpCrossesNodes(spec));  // pp-first: {0,4} spans nodes 0 and 1
  spec.placement.gpus_per_node = 8;
  EXPECT_FALSE(TpCrossesNodes(spec));  // one node holds the whole 2 x 4 block
  spec.placement.gpus_per_node = 12;
  EXPECT_TRUE(TpCrossesNodes(spec));  // {8,12} straddles nodes 0 and 1
  spec.placement.rank_order = RankOrder::kTpFirst;
  spec.parallel.tp = 8;
  spec.placement.gpus_per_node = 4;
  EXPECT_TRUE(TpCrossesNodes(spec));  // tp-first TP 8 on 4-GPU nodes
  spec.parallel.tp = 1;
  spec.placement.rank_order = RankOrder::kPpFirst;
  EXPECT_FALSE(TpCrossesNodes(spec));  // no TP, nothing to cross
  EXPECT_EQ(TpNetworkGbpsPerGpu(spec), 0.0);
}

TEST(Placement, AllReducesThatLeaveTheNodeShareItsNetwork) {
  const GpuSpec gpu = TestA100();
  WorkloadSpec inside = Spec("gpt3-6.7b", 2, 4);
  inside.placement.gpus_per_node = 4;
  inside.placement.node_network_gbps = 25;
  WorkloadSpec across = inside;
  across.placement.rank_order = RankOrder::kPpFirst;
  EXPECT_EQ(TpNetworkGbpsPerGpu(inside), 0.0);
  EXPECT_DOUBLE_EQ(TpNetworkGbpsPerGpu(across), 25.0 / 4);
  const std::vector<StageCost> a = ComputeStageCosts(inside);
  const std::vector<StageCost> b = ComputeStageCosts(across);
  for (std::size_t s = 0; s < a.size(); ++s) {
    // Same bytes; only the link differs.
    EXPECT_EQ(a[s].forward.tp_comm_bytes, b[s].forward.tp_comm_bytes);
    EXPECT_EQ(a[s].forward.tp_link_gbps, 0.0);
    EXPECT_DOUBLE_EQ(b[s].backward.tp_link_gbps, 6.25);
    const WorkBreakdown in = CostToWork(a[s].forward, gpu);
    const WorkBreakdown out = CostToWork(b[s].forward, gpu);
    EXPECT_NEAR(in.comm_s, a[s].forward.tp_comm_bytes / 300e9, 1e-15);
    EXPECT_EQ(in.network_s, 0.0);
    // Over the network the GPU is blocked, not copying: network_s, not comm_s.
    EXPECT_EQ(out.comm_s, 0.0);
    EXPECT_NEAR(out.network_s, b[s].forward.tp_comm_bytes / 6.25e9, 1e-15);
    EXPECT_EQ(out.compute_s, in.compute_s);
    EXPECT_EQ(out.memory_s, in.memory_s);
    EXPECT_NEAR(out.time_at_max_s(), out.work.time_at_max_s + out.network_s, 1e-15);
    // The wait costs network_s at P_block whatever the SM clock.
    WorkBreakdown active = out;
    active.network_s = 0;
    for (double mhz : {1410.0, 1005.0}) {
      const OperatingPoint with = RunByKernelClass(gpu, out, mhz, gpu.tdp_w);
      const OperatingPoint without = RunByKernelClass(gpu, active, mhz, gpu.tdp_w);
      EXPECT_NEAR(with.time_s - without.time_s, out.network_s, 1e-12) << mhz;
      EXPECT_NEAR(with.energy_j - without.energy_j, out.network_s * gpu.p_block_w, 1e-9) << mhz;
    }
  }
  // The profile follows: every instruction slower by exactly the comm time
  // at fmax, which the SM clock does not change.
  const SimulatedWorkload wa = SimulateWorkload(inside, gpu);
  const SimulatedWorkload wb = SimulateWorkload(across, gpu);
  EXPECT_GT(wb.stages[1].forward_at_max.time_s, wa.stages[1].forward_at_max.time_s);
  // A GPU without NVLink still simulates TP when it leaves the node anyway.
  GpuSpec no_nvlink = gpu;
  no_nvlink.nvlink_gbps = 0;
  EXPECT_GT(CostToWork(b[0].forward, no_nvlink).network_s, 0.0);
}

TEST(Placement, BadPlacementNamesTheField) {
  const GpuSpec gpu = TestA100();
  WorkloadSpec spec = Spec("gpt3-6.7b", 2, 4);
  spec.placement.rank_order = RankOrder::kPpFirst;
  spec.placement.gpus_per_node = 4;
  ExpectError(ErrorOf([&] { SimulateWorkload(spec, gpu); }),
              {"Placement::node_network_gbps", "leave the 4-GPU nodes", "pp-first"});
  spec.placement.node_network_gbps = -1;
  ExpectError(ErrorOf([&] { ComputeStageCosts(spec); }),
              {"Placement::node_network_gbps must be 0..100000"});
  spec.placement.node_network_gbps = 25;
  spec.placement.gpus_per_node = kMaxGpusPerNode + 1;
  ExpectError(ErrorOf([&] { ComputeStageCosts(spec); }),
              {"Placement::gpus_per_node must be 0..1024"});
  EXPECT_EQ(ParseRankOrder("pp-first"), RankOrder::kPpFirst);
  EXPECT_EQ(RankOrderName(ParseRankOrder("tp-first")), "tp-first");
  ExpectError(ErrorOf([] { ParseRankOrder("data-first"); }),
              {"Placement::rank_order 'data-first' is not one of tp-first, pp-first"});
}

}  // namespace
}  // namespace joulepipe::physics
