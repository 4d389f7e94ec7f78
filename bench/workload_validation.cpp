// End-to-end validation of the workload model x GPU model (no fitting to the
// profile) against Perseus's measured stage profiles: the error of the clock
// response t(f)/t(fmax) and E(f)/E(fmax) over clocks >= 900 MHz, per
// workload and kind. Configuration as measured: TP 8 x PP 8, microbatch 1 x
// 2,048 tokens, bf16, maximum power limit.
#include <cstdio>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/calibration.hpp"
#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/workload.hpp"

namespace {

using namespace joulepipe;

struct Case {
  const char* model;
  const char* gpu;
  const char* profile;
  std::vector<int> split;
};

model::Profile OnlyKind(const model::Profile& p, model::Kind kind) {
  model::Profile out;
  for (int s = 0; s < p.num_stages(); ++s) {
    for (const model::ClockPoint& point : p.Points(s, kind)) out.Add(s, kind, point);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // --class-cap-share X: the profiles with another physics::kClassCapShare
  // (bench_fidelity fits it on real runs; this shows what it does here).
  double share = physics::kClassCapShare;
  if (argc == 3 && std::string(argv[1]) == "--class-cap-share") share = std::stod(argv[2]);
  std::printf("class_cap_share %.2f\n", share);
  const std::vector<int> bloom_split = {9, 9, 9, 9, 9, 9, 9, 7};
  const std::vector<Case> cases = {
      {"gpt3-175b", "a100-sxm", "gpt3-175b+a100_sxm_bf16.csv", {}},
      {"bloom-176b", "a100-sxm", "bloom+a100_sxm_bf16.csv", bloom_split},
      {"gpt3-175b", "a40", "gpt3-175b+a40_bf16.csv", {}},
      {"bloom-176b", "a40", "bloom+a40_bf16.csv", bloom_split},
  };
  std::printf(
      "Clock response, simulated (workload x GPU model) vs measured (Perseus), clocks >= "
      "900 MHz\nabsolute error of t(f)/t(fmax) and E(f)/E(fmax), %%: median / p90 / max\n\n");
  std::printf("%-28s %-9s %7s %22s %22s\n", "workload", "kind", "points", "time", "energy");
  for (const Case& c : cases) {
    const physics::GpuSpec& gpu = physics::FindGpu(c.gpu);
    physics::WorkloadSpec spec;
    spec.model = physics::FindTransformer(c.model);
    spec.parallel.tp = 8;
    spec.parallel.pp = 8;
    spec.parallel.layer_split = c.split;
    spec.microbatch_size = 1;
    spec.seq_length = 2048;
    physics::ProfileOptions options;
    options.power_limit_w = gpu.power_limit_max_w;
    options.min_mhz = 855;
    options.class_cap_share = share;
    const model::Profile simulated = physics::SimulateProfile(spec, gpu, options);
    const model::Profile measured =
        model::ReadProfileCsv(std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/" + c.profile);
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      const physics::ErrorStats s =
          physics::CompareClockResponse(OnlyKind(measured, kind), simulated, 900);
      std::printf("%-28s %-9s %7d %6.2f / %5.2f / %5.2f %6.2f / %5.2f / %5.2f\n",
                  (std::string(c.model) + " " + c.gpu).c_str(),
                  std::string(model::KindName(kind)).c_str(), s.points, 100 * s.median_time,
                  100 * s.p90_time, 100 * s.max_time, 100 * s.median_energy, 100 * s.p90_energy,
                  100 * s.max_energy);
    }
  }
  return 0;
}
