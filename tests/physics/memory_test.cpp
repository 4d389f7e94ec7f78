// The memory model (physics/memory.hpp) against Korthikanti et al. 2022's
// Table 2 formulas and against Megatron-LM's theoretical memory estimate
// (megatron/training/theoretical_memory_usage.py: 18 or 6 + 12 / dp bytes
// per parameter of the most loaded shard; sbh (18 + 4 f / h) per layer with
// sequence parallelism, p microbatches in flight on the first stage), both
// computed by hand here.

#include "joulepipe/physics/memory.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "joulepipe/model/error.hpp"

namespace joulepipe::physics {
namespace {

WorkloadSpec Gpt3Spec(int tp, int pp, int dp) {
  WorkloadSpec spec;
  spec.model = FindTransformer("gpt3-175b");
  spec.parallel.tp = tp;
  spec.parallel.pp = pp;
  spec.parallel.dp = dp;
  spec.microbatch_size = 1;
  spec.seq_length = 2048;
  return spec;
}

TEST(Memory, LayerActivationsFollowKorthikantiTable2) {
  // GPT-3 175B: q = kv = h, f = 4h, so the counts reduce to the paper's.
  WorkloadSpec spec = Gpt3Spec(1, 8, 1);
  spec.framework = Framework::kHfEager;  // the score matrix is stored
  const double s = 2048, b = 1, h = 12288, a = 96;
  MemoryOptions sp;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(spec, false, sp), s * b * h * (34 + 5 * a * s / h));
  for (int t : {2, 8}) {
    spec.parallel.tp = t;
    MemoryOptions no_sp;
    no_sp.sequence_parallel = false;
    EXPECT_DOUBLE_EQ(LayerActivationBytes(spec, false, no_sp),
                     s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t)))
        << "tensor parallel " << t;
    EXPECT_DOUBLE_EQ(LayerActivationBytes(spec, false, sp), s * b * h / t * (34 + 5 * a * s / h))
        << "tensor + sequence parallel " << t;
  }
  // Fused attention keeps no score matrix: Megatron's 18 + 4 f / h.
  spec.framework = Framework::kMegatron;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(spec, false, sp), s * b * h / 8 * (18 + 4 * 4.0));
}

TEST(Memory, MatchesMegatronsTheoreticalEstimateForGpt3OnTheFirstStage) {
  const int t = 8, p = 8, dp = 16;
  const WorkloadSpec spec = Gpt3Spec(t, p, dp);
  const PipelineShape shape{PipelineShape::Kind::k1F1B, 96, 1};
  const MemoryEstimate est = EstimateMemory(spec, shape, FindGpu("a100-sxm"));
  const double s = 2048, b = 1, h = 12288, f = 49152, L = 96;
  const double v = spec.padded_vocab();  // 51,200: 50,257 padded to 128 x 8
  // Megatron's parameter count: no biases, no (replicated) position table.
  const double layer = 2 * h * (f + 2) + 4 * h * h;
  const double shard = ((layer * L + 2 * h) / p + v * h) / t;
  const double megatron_state = shard * (6 + 12.0 / dp);
  const double megatron_act =
      (s * b * h * (18 + 4 * f / h) * L + 8 * s * b * p + s * b * h * p) / t;
  const StageMemory& first = est.stages[0];
  EXPECT_EQ(first.in_flight_chunks, p);
  // Ours adds the biases and the position table Megatron leaves out (0.9 %).
  EXPECT_NEAR(first.model_state_bytes / megatron_state, 1, 0.015);
  EXPECT_NEAR(first.activation_bytes / megatron_act, 1, 1e-3);
  std::printf(
      "[memory] GPT-3 175B TP 8 PP 8 DP 16 1F1B mb 1, stage 0: model state %.2f GiB (Megatron "
      "%.2f), activations %.2f GiB (Megatron %.2f); peak stage %d of %.1f GiB, headroom %.1f "
      "GiB\n",
      first.model_state_bytes / (1 << 30), megatron_state / (1 << 30),
      first.activation_bytes / (1 << 30), megatron_act / (1 << 30), est.peak_stage,
      est.peak_bytes() / (1 << 30), est.headroom_bytes() / (1 << 30));
  EXPECT_TRUE(est.Fits(0.1));
}

TEST(Memory, BytesPerParameterAreMegatrons) {
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParameter(Precision::kBf16, 1, false), 18);
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParameter(Precision::kBf16, 16, true), 6 + 12.0 / 16);
  EXPECT_DOUBLE_EQ(ModelStateBytesPerParameter(Precision::kTf32, 4, true), 8 + 8.0 / 4);
  EXPECT_THROW(ModelStateBytesPerParameter(Precision::kBf16, 0, true), model::InputError);
}

TEST(Memory, SchedulesAndRecomputationMoveTheActivations) {
  const WorkloadSpec spec = Gpt3Spec(8, 8, 16);
  const GpuSpec& gpu = FindGpu("a100-sxm");
  const auto act = [&](const WorkloadSpec& w, PipelineShape shape) {
    return EstimateMemory(w, shape, gpu).stages[0].activation_bytes;
  };
  const double one_f_one_b = act(spec, {PipelineShape::Kind::k1F1B, 96, 1});
  // GPipe keeps all 96 microbatches, 1F1B 8 on stage 0.
  EXPECT_NEAR(act(spec, {PipelineShape::Kind::kGPipe, 96, 1}) / one_f_one_b, 12, 0.01);
  // Interleaved with V = 2: 1 + (p - 1) / (p V) more (Megatron's penalty).
  EXPECT_NEAR(act(spec, {PipelineShape::Kind::kInterleaved, 96, 2}) / one_f_one_b, 1 + 7.0 / 16,
              0.01);
  // Full recomputation keeps each layer's input (2 sbh / t) and one layer.
  WorkloadSpec full = spec;
  full.recompute = Recompute::kFull;
  const double s = 2048, h = 12288;
  const double expected = 8 * (12 * 2 * s * h / 8 + 8 * s + s * h / 8) + s * h / 8 * 34;
  EXPECT_NEAR(act(full, {PipelineShape::Kind::k1F1B, 96, 1}) / expected, 1, 1e-9);
  // The last stage holds the fp32 logits of one microbatch.
  const MemoryEstimate est = EstimateMemory(spec, {PipelineShape::Kind::k1F1B, 96, 1}, gpu);
  EXPECT_EQ(est.stages[7].in_flight_chunks, 1);
  EXPECT_GT(est.stages[7].activation_bytes, 4 * s * spec.padded_vocab() / 8);
}

TEST(Memory, AConfigurationThatCannotFitIsReported) {
  // GPT-3 175B on 8 GPUs per pipeline: 22 B parameters per GPU at TP 8 PP 1.
  const WorkloadSpec spec = Gpt3Spec(8, 1, 1);
  const MemoryEstimate est =
      EstimateMemory(spec, {PipelineShape::Kind::k1F1B, 8, 1}, FindGpu("a100-sxm"));
  EXPECT_FALSE(est.Fits(0));
  EXPECT_LT(est.headroom_bytes(), 0);
}

TEST(Memory, InFlightChunksRejectsBadCounts) {
  EXPECT_THROW(InFlightChunks({PipelineShape::Kind::k1F1B, 0, 1}, 4, 0), model::InputError);
  EXPECT_THROW(InFlightChunks({PipelineShape::Kind::k1F1B, 8, 1}, 4, 4), model::InputError);
  EXPECT_THROW(InFlightChunks({PipelineShape::Kind::kInterleaved, 8, 0}, 4, 0), model::InputError);
}

}  // namespace
}  // namespace joulepipe::physics
