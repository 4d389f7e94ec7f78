// bench_calibration: fits the GPU DVFS model to the measured Perseus stage
// profiles (data/profiles/*.csv) and prints
//   1. the fitted DVFS parameters per GPU type, as JSON to paste into
//      data/gpus/<id>.json ("dvfs"),
//   2. the per-(profile, kind) error table (median / p90 / max absolute
//      relative error of time and energy over clocks >= 900 MHz), for the
//      fitted parameters and for the stored catalog parameters (the latter is
//      what tests/sim/calibration_test.cpp checks),
//   3. with --rows, every clock: measured vs model time and energy.
//
// Usage: bench_calibration [--rows] [--stored-only]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/physics/calibration.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace {

using joulepipe::model::Kind;
using joulepipe::model::KindName;
using joulepipe::model::Profile;
using joulepipe::model::ReadProfileCsv;
namespace physics = joulepipe::physics;

constexpr int kMinErrorMhz = 900;

struct GpuProfiles {
  const char* gpu;
  std::vector<std::string> files;
  // Highest clock with a voltage-floor reading (nvidia-smi -q): the ridge
  // cannot lie below it. A100: 712.5 mV at 1080 MHz (nvidia-docker#1648);
  // A40: 706.25 mV at 1095 MHz (nvidia-docker#1447).
  double floor_seen_mhz;
};

const std::vector<GpuProfiles>& Inputs() {
  static const std::vector<GpuProfiles> inputs = {
      {"a100-sxm4-80gb", {"gpt3-175b+a100_sxm_bf16.csv", "bloom+a100_sxm_bf16.csv"}, 1080},
      {"a40", {"gpt3-175b+a40_bf16.csv", "bloom+a40_bf16.csv"}, 1095},
  };
  return inputs;
}

void PrintTableHeader() {
  std::printf("%-30s %-8s %4s | %7s %7s %7s | %7s %7s %7s\n", "profile", "kind", "n", "t med%",
              "t p90%", "t max%", "E med%", "E p90%", "E max%");
}

void PrintStats(const std::string& profile, const char* kind, const physics::ErrorStats& s) {
  std::printf("%-30s %-8s %4d | %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f\n", profile.c_str(), kind,
              s.points, 100 * s.median_time, 100 * s.p90_time, 100 * s.max_time,
              100 * s.median_energy, 100 * s.p90_energy, 100 * s.max_energy);
}

void PrintCalibration(const std::string& name, const physics::Calibration& cal, bool rows) {
  PrintStats(name, "forward", cal.Summary(kMinErrorMhz, Kind::kForward));
  PrintStats(name, "backward", cal.Summary(kMinErrorMhz, Kind::kBackward));
  PrintStats(name, "all", cal.Summary(kMinErrorMhz));
  if (!rows) return;
  std::printf("  works (stage kind: time_at_max_s compute_fraction activity):\n");
  for (const physics::FittedWork& w : cal.works) {
    std::printf("    %d %-8s %.6f %.4f %.4f\n", w.stage, std::string(KindName(w.kind)).c_str(),
                w.work.time_at_max_s, w.work.compute_fraction, w.work.activity);
  }
  std::printf("  %5s %-8s %5s %8s | %10s %10s %7s | %9s %9s %7s\n", "stage", "kind", "MHz",
              "eff MHz", "t meas s", "t model s", "t err%", "E meas J", "E model J", "E err%");
  for (const physics::CalibrationRow& r : cal.rows) {
    std::printf("  %5d %-8s %5d %8.1f | %10.5f %10.5f %7.2f | %9.3f %9.3f %7.2f\n", r.stage,
                std::string(KindName(r.kind)).c_str(), r.mhz, r.effective_mhz, r.measured_time_s,
                r.model_time_s, 100 * r.time_error, r.measured_energy_j, r.model_energy_j,
                100 * r.energy_error);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool rows = false, stored_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rows") == 0) {
      rows = true;
    } else if (std::strcmp(argv[i], "--stored-only") == 0) {
      stored_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--rows] [--stored-only]\n", argv[0]);
      return 2;
    }
  }
  const std::string dir = std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/";
  std::printf("GPU DVFS model calibration against measured Perseus stage profiles (%s)\n",
              dir.c_str());
  std::printf(
      "errors: |model - measured| / measured over clocks >= %d MHz (simulated vs "
      "measured, GPU-only energy)\n\n",
      kMinErrorMhz);

  for (const GpuProfiles& input : Inputs()) {
    const physics::GpuSpec& stored = physics::FindGpu(input.gpu);
    std::vector<Profile> profiles;
    for (const std::string& file : input.files) profiles.push_back(ReadProfileCsv(dir + file));
    const double limit = stored.power_limit_max_w;
    std::printf("== %s (profiles measured at the %.0f W power limit)\n", stored.id.c_str(), limit);

    if (!stored_only) {
      const auto start = std::chrono::steady_clock::now();
      physics::CalibrationOptions options;
      options.min_ridge_mhz = input.floor_seen_mhz;
      const physics::DvfsFit fit = physics::FitDvfs(stored, profiles, options);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("fitted in %.1f s, objective %.5f; paste into data/gpus/%s.json:\n", seconds,
                  fit.objective, stored.id.c_str());
      std::printf(
          "  \"dvfs\": {\n    \"v_min_v\": %.5g,\n    \"v_max_v\": %.4f,\n    \"ridge_mhz\": "
          "%.0f,\n    \"static_w\": %.1f,\n    \"dynamic_w\": %.1f\n  }\n",
          fit.dvfs.v_min_v, fit.dvfs.v_max_v, fit.dvfs.ridge_mhz, fit.dvfs.static_w,
          fit.dvfs.dynamic_w);
      std::printf(
          "  derived shape: ridge/fmax %.4f, v_max/v_min %.4f, static share of "
          "P(fmax, activity 1) %.4f\n",
          fit.dvfs.ridge_mhz / stored.max_sm_mhz, fit.dvfs.v_max_v / fit.dvfs.v_min_v,
          fit.dvfs.static_w / (fit.dvfs.static_w + fit.dvfs.dynamic_w));
      std::printf("errors with the fitted parameters:\n");
      PrintTableHeader();
      for (std::size_t i = 0; i < profiles.size(); ++i) {
        PrintCalibration(input.files[i], fit.calibrations[i], false);
      }
    }
    std::printf("errors with the stored catalog parameters (data/gpus/%s.json):\n",
                stored.id.c_str());
    PrintTableHeader();
    for (std::size_t i = 0; i < profiles.size(); ++i) {
      PrintCalibration(input.files[i], physics::FitWorks(stored, profiles[i]), rows);
    }
    std::printf("\n");
  }
  return 0;
}
