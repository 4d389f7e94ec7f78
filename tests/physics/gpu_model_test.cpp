// The GPU catalog (data/gpus/*.json, ParseGpuSpec, FindGpu) and the DVFS
// model (Voltage, Power, Run) as users of gpu_model.hpp rely on them.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::physics {
namespace {

using model::InputError;
using Json = nlohmann::json;

std::string ReadGpuFile(const std::string& name) {
  std::ifstream in(std::string(JOULEPIPE_SOURCE_DIR) + "/data/gpus/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The message of the InputError that parsing `json` (as "a40.json") throws.
std::string ParseError(const Json& json) {
  try {
    ParseGpuSpec(json.dump(), "a40.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GpuCatalogTest, HoldsTheSixGpuTypesSortedById) {
  std::vector<std::string> ids;
  for (const GpuSpec& gpu : GpuCatalog()) ids.push_back(gpu.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"a100-pcie-80gb", "a100-sxm4-80gb", "a40", "h100-sxm",
                                           "h200-sxm", "v100-sxm2"}));
}

TEST(GpuCatalogTest, EveryNumericFieldHasASource) {
  const std::vector<std::string> fields = {
      "min_sm_mhz",    "max_sm_mhz",    "sm_step_mhz",       "memory_mhz",
      "memory_gib",    "tdp_w",         "power_limit_min_w", "power_limit_max_w",
      "idle_w",        "p_block_w",     "peak_bf16_tflops",  "hbm_gbps",
      "nvlink_gbps",   "dvfs.v_min_v",  "dvfs.v_max_v",      "dvfs.ridge_mhz",
      "dvfs.static_w", "dvfs.dynamic_w"};
  for (const GpuSpec& gpu : GpuCatalog()) {
    for (const std::string& field : fields) {
      auto it = gpu.sources.find(field);
      ASSERT_NE(it, gpu.sources.end()) << gpu.id << " has no source for " << field;
      EXPECT_GE(it->second.size(), 10u) << gpu.id << " " << field;
    }
  }
}

TEST(GpuCatalogTest, CalibratedAndDerivedParametersSaySo) {
  // The DVFS parameters of the two calibrated GPUs come from bench/calibration;
  // every other GPU's are derived (not measured by us), and say so.
  for (const GpuSpec& gpu : GpuCatalog()) {
    const bool calibrated = gpu.id == "a100-sxm4-80gb" || gpu.id == "a40";
    for (const char* field : {"dvfs.v_max_v", "dvfs.ridge_mhz", "dvfs.static_w"}) {
      const std::string& source = gpu.sources.at(field);
      EXPECT_EQ(source.starts_with("calibrated: bench/calibration"), calibrated)
          << gpu.id << " " << field << ": " << source;
      if (!calibrated) {
        EXPECT_TRUE(source.starts_with("derived:")) << gpu.id << " " << field;
      }
    }
  }
}

TEST(GpuCatalogTest, EveryFileParsesOnItsOwnAndMatchesTheCatalog) {
  for (const GpuSpec& gpu : GpuCatalog()) {
    const GpuSpec parsed = ParseGpuSpec(ReadGpuFile(gpu.id + ".json"), gpu.id + ".json");
    EXPECT_EQ(parsed.name, gpu.name);
    EXPECT_EQ(parsed.max_sm_mhz, gpu.max_sm_mhz);
    EXPECT_DOUBLE_EQ(parsed.dvfs.ridge_mhz, gpu.dvfs.ridge_mhz);
    // Clock lists run from max to exactly min.
    const std::vector<int> clocks = gpu.SupportedSmClocks();
    EXPECT_EQ(clocks.front(), gpu.max_sm_mhz) << gpu.id;
    EXPECT_EQ(clocks.back(), gpu.min_sm_mhz) << gpu.id;
    EXPECT_LE(gpu.power_limit_min_w, gpu.tdp_w);
    EXPECT_LE(gpu.tdp_w, gpu.power_limit_max_w);
  }
}

TEST(GpuCatalogTest, A100ClocksAre210To1410In15MhzSteps) {
  const std::vector<int> clocks = FindGpu("a100").SupportedSmClocks();
  ASSERT_EQ(clocks.size(), 81u);
  EXPECT_EQ(clocks.front(), 1410);
  EXPECT_EQ(clocks[1], 1395);
  EXPECT_EQ(clocks.back(), 210);
  EXPECT_TRUE(std::is_sorted(clocks.rbegin(), clocks.rend()));
  EXPECT_EQ(FindGpu("a40").SupportedSmClocks().front(), 1740);
}

TEST(GpuCatalogTest, FindsIdsAndAliasesCaseInsensitively) {
  EXPECT_EQ(FindGpu("a100-sxm4-80gb").id, "a100-sxm4-80gb");
  EXPECT_EQ(FindGpu("A100-SXM").id, "a100-sxm4-80gb");
  EXPECT_EQ(FindGpu("a100").id, "a100-sxm4-80gb");
  EXPECT_EQ(FindGpu("a100-pcie").id, "a100-pcie-80gb");
  EXPECT_EQ(FindGpu("A40").id, "a40");
  EXPECT_EQ(FindGpu("H100").id, "h100-sxm");
  EXPECT_EQ(FindGpu("h100-sxm5-80gb").id, "h100-sxm");
  EXPECT_EQ(FindGpu("h200").id, "h200-sxm");
  EXPECT_EQ(FindGpu("V100").id, "v100-sxm2");
  EXPECT_EQ(&FindGpu("a40"), &FindGpu("A40"));  // one catalog entry
}

TEST(GpuCatalogTest, UnknownGpuListsTheKnownIds) {
  try {
    FindGpu("b200");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown GPU \"b200\""), std::string::npos) << message;
    for (const GpuSpec& gpu : GpuCatalog()) {
      EXPECT_NE(message.find(gpu.id), std::string::npos) << message;
    }
  }
}

TEST(GpuCatalogTest, A100SxmKeepsNvidiaTdpAndThe500WBoardLimit) {
  // NVIDIA's 400 W default; the HGX boards the Perseus profiles come from ran
  // at 500 W (they draw 475-480 W at 1410 MHz).
  const GpuSpec& a100 = FindGpu("a100");
  EXPECT_EQ(a100.tdp_w, 400);
  EXPECT_EQ(a100.power_limit_max_w, 500);
}

TEST(ParseGpuSpecTest, ErrorsNameTheFileTheFieldAndWhatIsExpected) {
  const Json good = Json::parse(ReadGpuFile("a40.json"));
  EXPECT_NO_THROW(ParseGpuSpec(good.dump(), "a40.json"));

  Json bad = good;
  bad["dvfs"]["v_min_v"] = -1;
  EXPECT_EQ(ParseError(bad), "a40.json: field \"dvfs.v_min_v\" must be > 0 (got -1)");

  bad = good;
  bad.erase("tdp_w");
  EXPECT_EQ(ParseError(bad), "a40.json: field \"tdp_w\" is missing");

  bad = good;
  bad["max_sm_mhz"] = 100;
  EXPECT_NE(ParseError(bad).find("field \"max_sm_mhz\" must be >= min_sm_mhz = 210 (got 100)"),
            std::string::npos)
      << ParseError(bad);

  bad = good;
  bad["sm_step_mhz"] = 0;
  EXPECT_NE(ParseError(bad).find("field \"sm_step_mhz\" must be > 0"), std::string::npos);

  bad = good;
  bad["sm_step_mhz"] = 7;  // does not divide 1740 - 210
  EXPECT_NE(ParseError(bad).find("field \"sm_step_mhz\" must divide"), std::string::npos);

  bad = good;
  bad["max_sm_mhz"] = 1740.5;
  EXPECT_NE(ParseError(bad).find("field \"max_sm_mhz\" must be an integer"), std::string::npos);

  bad = good;
  bad["dvfs"]["ridge_mhz"] = 2000;
  EXPECT_NE(ParseError(bad).find("field \"dvfs.ridge_mhz\" must be <= max_sm_mhz = 1740"),
            std::string::npos)
      << ParseError(bad);

  bad = good;
  bad["dvfs"]["v_max_v"] = 0.5;
  EXPECT_NE(ParseError(bad).find("field \"dvfs.v_max_v\" must be >= dvfs.v_min_v"),
            std::string::npos);

  bad = good;
  bad["tdp_w"] = 350;  // above the max limit
  EXPECT_NE(ParseError(bad).find("field \"power_limit_max_w\" must be >= tdp_w = 350"),
            std::string::npos)
      << ParseError(bad);

  bad = good;
  bad["power_limit_min_w"] = 320;
  EXPECT_NE(ParseError(bad).find("field \"tdp_w\" must be >= power_limit_min_w = 320"),
            std::string::npos)
      << ParseError(bad);

  bad = good;
  bad["idle_w"] = "thirty";
  EXPECT_NE(ParseError(bad).find("field \"idle_w\" must be a number (got \"thirty\")"),
            std::string::npos);

  bad = good;
  bad["dvfs"]["v_mni_v"] = 0.7;  // typo
  EXPECT_NE(ParseError(bad).find("field \"dvfs.v_mni_v\" is not a known field"), std::string::npos);

  bad = good;
  bad["sources"]["tdp"] = "somewhere";
  EXPECT_NE(ParseError(bad).find("field \"sources.tdp\" does not name a field"), std::string::npos);

  EXPECT_NE(ParseError(Json::array()).find("a40.json: expected a JSON object"), std::string::npos);
  try {
    ParseGpuSpec("{ \"id\": ", "a40.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a40.json: not valid JSON"), std::string::npos);
  }
}

TEST(GpuModelTest, VoltageIsTheFloorUpToTheRidgeThenRisesToVmax) {
  const GpuSpec& a100 = FindGpu("a100");
  const DvfsModel& d = a100.dvfs;
  EXPECT_DOUBLE_EQ(Voltage(a100, 210), d.v_min_v);
  EXPECT_DOUBLE_EQ(Voltage(a100, 900), d.v_min_v);
  EXPECT_DOUBLE_EQ(Voltage(a100, d.ridge_mhz), d.v_min_v);
  EXPECT_DOUBLE_EQ(Voltage(a100, 1410), d.v_max_v);
  EXPECT_GT(Voltage(a100, d.ridge_mhz + 15), d.v_min_v);
  double last = 0;
  for (int mhz : a100.SupportedSmClocks()) {  // highest first
    if (last > 0) {
      EXPECT_LE(Voltage(a100, mhz), last);
    }
    last = Voltage(a100, mhz);
  }
  // Measured floor 0.67-0.71 V (research/gpu_data.md).
  for (const GpuSpec& gpu : GpuCatalog()) {
    EXPECT_GE(gpu.dvfs.v_min_v, 0.66) << gpu.id;
    EXPECT_LE(gpu.dvfs.v_min_v, 0.72) << gpu.id;
  }
}

TEST(GpuModelTest, PowerBelowTheRidgeIsLinearInClock) {
  // On the voltage floor P = static + k f: equal clock steps add equal power.
  const GpuSpec& a100 = FindGpu("a100");
  const double p600 = Power(a100, 1.0, 600), p750 = Power(a100, 1.0, 750),
               p900 = Power(a100, 1.0, 900);
  EXPECT_NEAR(p750 - p600, p900 - p750, 1e-9);
  EXPECT_NEAR(Power(a100, 1.0, 1410), a100.dvfs.static_w + a100.dvfs.dynamic_w, 1e-9);
  EXPECT_DOUBLE_EQ(Power(a100, 0.0, 1410), a100.dvfs.static_w);
}

TEST(GpuModelTest, PowerCapLowersTheEffectiveClockToWherePowerMeetsTheLimit) {
  const GpuSpec& a40 = FindGpu("a40");
  const Work work{0.1, 0.7, 1.0};
  // Uncapped, activity-1 work would draw more than the A40's 300 W at 1740.
  ASSERT_GT(Power(a40, work.activity, 1740), a40.tdp_w);
  const OperatingPoint capped = physics::Run(a40, work, 1740);
  EXPECT_TRUE(capped.power_capped);
  EXPECT_LT(capped.effective_mhz, 1740);
  EXPECT_GT(capped.effective_mhz, 1300);  // measured: A40 capped above ~1400 MHz
  EXPECT_NEAR(capped.power_w, a40.tdp_w, 0.05);
  EXPECT_NEAR(Power(a40, work.activity, capped.effective_mhz), a40.tdp_w, 0.05);
  EXPECT_DOUBLE_EQ(capped.energy_j, capped.power_w * capped.time_s);
  // Every clock requested above the effective one runs the same.
  const OperatingPoint also = physics::Run(a40, work, 1600);
  EXPECT_NEAR(also.effective_mhz, capped.effective_mhz, 1e-6);
  EXPECT_NEAR(also.time_s, capped.time_s, 1e-12);
  // A lower limit caps lower; a clock below the cap is untouched.
  EXPECT_LT(physics::Run(a40, work, 1740, 200).effective_mhz, capped.effective_mhz);
  const OperatingPoint free = physics::Run(a40, work, 1200);
  EXPECT_FALSE(free.power_capped);
  EXPECT_DOUBLE_EQ(free.effective_mhz, 1200);
  // A limit below the power at the min clock pins the min clock.
  const OperatingPoint pinned = physics::Run(a40, work, 1740, 50);
  EXPECT_TRUE(pinned.power_capped);
  EXPECT_DOUBLE_EQ(pinned.effective_mhz, a40.min_sm_mhz);
}

TEST(GpuModelTest, RequestedClocksAreClampedToTheGpuRange) {
  const GpuSpec& a100 = FindGpu("a100");
  const Work work{0.05, 0.8, 0.5};
  EXPECT_DOUBLE_EQ(physics::Run(a100, work, 5000, 500).effective_mhz, 1410);
  EXPECT_DOUBLE_EQ(physics::Run(a100, work, 10, 500).effective_mhz, 210);
  EXPECT_DOUBLE_EQ(physics::Run(a100, work, 1410, 500).time_s, work.time_at_max_s);
}

TEST(GpuModelTest, TimeFallsWithClockAndOnlyTheComputeShareScales) {
  const GpuSpec& a100 = FindGpu("a100");
  const Work work{0.05, 0.8, 1.0};
  double last_time = 0;
  for (int mhz : a100.SupportedSmClocks()) {  // highest first: time rises
    const double t = physics::Run(a100, work, mhz, 500).time_s;
    EXPECT_GE(t, last_time) << mhz;
    last_time = t;
  }
  // t(f) = t_max (beta fmax / f + 1 - beta): at fmax/2 the compute share doubles.
  EXPECT_NEAR(physics::Run(a100, work, 705, 500).time_s, 0.05 * (0.8 * 2 + 0.2), 1e-12);
  const Work memory_bound{0.05, 0.0, 1.0};
  EXPECT_DOUBLE_EQ(physics::Run(a100, memory_bound, 705, 500).time_s, 0.05);
}

TEST(GpuModelTest, EnergyIsUShapedOnCalibratedA100Work) {
  // GPT-3 175B stage forward as calibrated (bench/calibration): beta ~0.8,
  // activity ~1, run at the 500 W limit of the measured boards. Measured
  // energy minimum: 1065-1080 MHz at ~0.745 of E(1410).
  const GpuSpec& a100 = FindGpu("a100");
  const Work work{0.049, 0.82, 1.0};
  int best_mhz = 0;
  double best = 1e300;
  for (int mhz : a100.SupportedSmClocks()) {
    const double e = physics::Run(a100, work, mhz, 500).energy_j;
    if (e < best) best = e, best_mhz = mhz;
  }
  EXPECT_GE(best_mhz, 990);
  EXPECT_LE(best_mhz, 1170);
  const double e_max = physics::Run(a100, work, 1410, 500).energy_j;
  EXPECT_LT(best, 0.82 * e_max);
  EXPECT_GT(best, 0.68 * e_max);
  EXPECT_GT(physics::Run(a100, work, 600, 500).energy_j, best * 1.05);  // rises again below
}

}  // namespace
}  // namespace joulepipe::physics
