// End to end: the workload model and the GPU model, with nothing fitted to
// the profile, predict how a measured GPT-3 175B / BLOOM stage responds to
// the SM clock on A100-SXM (Perseus SOSP'24 profiles, TP 8 x PP 8, bf16,
// microbatch 1 x 2,048 tokens). bench_workload_validation prints the table,
// A40 included (where the prediction is worse; docs/workload-model.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/calibration.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::physics {
namespace {

ErrorStats Compare(const std::string& model_id, const std::string& profile_file,
                   const std::vector<int>& split) {
  const GpuSpec& gpu = FindGpu("a100-sxm");
  WorkloadSpec spec;
  spec.model = FindTransformer(model_id);
  spec.parallel.tp = 8;
  spec.parallel.pp = 8;
  spec.parallel.layer_split = split;
  spec.microbatch_size = 1;
  spec.seq_length = 2048;
  ProfileOptions options;
  options.power_limit_w = gpu.power_limit_max_w;  // the boards Perseus measured ran 500 W
  options.min_mhz = 855;
  const model::Profile simulated = SimulateProfile(spec, gpu, options);
  const model::Profile measured =
      model::ReadProfileCsv(std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + profile_file);
  return CompareClockResponse(measured, simulated, 900);
}

TEST(WorkloadValidation, Gpt3OnA100TracksTheMeasuredClockResponse) {
  const ErrorStats s = Compare("gpt3-175b", "gpt3-175b+a100_sxm_bf16.csv", {});
  EXPECT_EQ(s.points, 8 * 2 * 35);  // 8 stages x 2 kinds x 900..1410 MHz
  EXPECT_LE(s.median_time, 0.03);
  EXPECT_LE(s.median_energy, 0.06);
  EXPECT_LE(s.max_time, 0.05);
  EXPECT_LE(s.max_energy, 0.09);
}

TEST(WorkloadValidation, BloomOnA100TracksTheMeasuredClockResponse) {
  // Perseus split BLOOM's 70 layers as 9 per stage, 7 on the last.
  const ErrorStats s = Compare("bloom-176b", "bloom+a100_sxm_bf16.csv", {9, 9, 9, 9, 9, 9, 9, 7});
  EXPECT_LE(s.median_time, 0.04);
  EXPECT_LE(s.median_energy, 0.04);
  EXPECT_LE(s.max_time, 0.06);
  // 0.034 with kClassCapShare 0.15; the share refitted on Perseus's real
  // A100 runs (0.80, then 1.00 once the limit binds whenever the GEMMs
  // exceed it) trades the forward energy's top clocks on this one profile
  // (0.0827 now) for better times and energies elsewhere: the sums of the
  // eight medians fell from 17.4 to 12.3 % (time) and 26.7 to 21.2 %
  // (energy) (docs/benchmarks.md, Fidelity).
  EXPECT_LE(s.max_energy, 0.085);
}

// `site` and `tune` print FrameworkValidation(kMegatron)'s claim under every
// projection: "median error <= T % time, <= E % energy" over the four measured
// Perseus profiles, each kind apart (bench_workload_validation's table). It
// must hold for the model as built: issue 44 found such a line outliving the
// model it described.
TEST(WorkloadValidation, TheValidationLineThatProjectionsPrintHolds) {
  const std::string claim(FrameworkValidation(Framework::kMegatron));
  double time_pct = 0, energy_pct = 0;
  const std::size_t at = claim.find("median error <= ");
  ASSERT_NE(at, std::string::npos) << claim;
  ASSERT_EQ(std::sscanf(claim.c_str() + at, "median error <= %lf %% time, <= %lf %% energy",
                        &time_pct, &energy_pct),
            2)
      << claim;
  const std::vector<int> bloom = {9, 9, 9, 9, 9, 9, 9, 7};
  struct Case {
    const char* model;
    const char* gpu;
    const char* file;
    std::vector<int> split;
  };
  double worst_time = 0, worst_energy = 0;
  for (const Case& c : {Case{"gpt3-175b", "a100-sxm", "gpt3-175b+a100_sxm_bf16.csv", {}},
                        Case{"bloom-176b", "a100-sxm", "bloom+a100_sxm_bf16.csv", bloom},
                        Case{"gpt3-175b", "a40", "gpt3-175b+a40_bf16.csv", {}},
                        Case{"bloom-176b", "a40", "bloom+a40_bf16.csv", bloom}}) {
    const GpuSpec& gpu = FindGpu(c.gpu);
    WorkloadSpec spec;
    spec.model = FindTransformer(c.model);
    spec.parallel.tp = 8;
    spec.parallel.pp = 8;
    spec.parallel.layer_split = c.split;
    spec.microbatch_size = 1;
    spec.seq_length = 2048;
    ProfileOptions options;
    options.power_limit_w = gpu.power_limit_max_w;
    options.min_mhz = 855;
    const model::Profile simulated = SimulateProfile(spec, gpu, options);
    const model::Profile measured =
        model::ReadProfileCsv(std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + c.file);
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      model::Profile only;
      for (int st = 0; st < measured.num_stages(); ++st) {
        for (const model::ClockPoint& p : measured.Points(st, kind)) only.Add(st, kind, p);
      }
      const ErrorStats e = CompareClockResponse(only, simulated, 900);
      worst_time = std::max(worst_time, e.median_time);
      worst_energy = std::max(worst_energy, e.median_energy);
    }
  }
  EXPECT_LE(100 * worst_time, time_pct) << claim;
  EXPECT_LE(100 * worst_energy, energy_pct) << claim;
  // And it is not loose by more than a rounding.
  EXPECT_GT(100 * worst_time, time_pct - 0.15) << claim;
  EXPECT_GT(100 * worst_energy, energy_pct - 0.15) << claim;
}

TEST(WorkloadValidation, CompareNeedsTheMeasuredTopClock) {
  model::Profile measured, simulated;
  measured.Add(0, model::Kind::kForward, {1410, 1.0, 400});
  measured.Add(0, model::Kind::kForward, {1200, 1.1, 350});
  simulated.Add(0, model::Kind::kForward, {1200, 1.1, 350});
  EXPECT_THROW(CompareClockResponse(measured, simulated, 900), model::InputError);
  simulated.Add(0, model::Kind::kForward, {1410, 1.0, 400});
  const ErrorStats same = CompareClockResponse(measured, simulated, 900);
  EXPECT_EQ(same.points, 2);
  EXPECT_DOUBLE_EQ(same.max_time, 0);
  // A simulated curve 10 % slower at 1200 MHz is a 10 % error there.
  model::Profile slower;
  slower.Add(0, model::Kind::kForward, {1410, 2.0, 800});
  slower.Add(0, model::Kind::kForward, {1200, 2.0 * 1.1 * 1.1, 700});
  EXPECT_NEAR(CompareClockResponse(measured, slower, 900).max_time, 0.1, 1e-12);
}

}  // namespace
}  // namespace joulepipe::physics
