// Monitor over the simulated NVML library (src/sim_nvml), each test in a
// child process (NVML is process-wide; see tests/gpu/sim_nvml_child.hpp):
// counter GPUs vs the counter-not-supported fault (sampling fallback), GPU
// selection, aligned windows against the GPU model's idle power.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "../gpu/sim_nvml_child.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/monitor/monitor.hpp"
#include "joulepipe/physics/gpu_model.hpp"

namespace joulepipe::monitor {
namespace {

using gpu::testing::RunInChild;
using gpu::testing::SimEnv;
using gpu::testing::TempFile;

double IdleW() {
  return physics::FindGpu("a100-sxm4-80gb").idle_w;
}

MonitorOptions NoCpu() {
  MonitorOptions o;
  o.cpu = CpuMode::kOff;
  return o;
}

TEST(NvmlMonitor, CounterGpusAlignedWindowMatchesIdlePower) {
  RunInChild(SimEnv("", {{"JOULEPIPE_SIM_NVML_COUNT", "2"}}), [] {
    Monitor monitor(NoCpu());
    ASSERT_EQ(monitor.gpu_count(), 2);
    EXPECT_EQ(monitor.gpu_source(0), EnergySource::kCounter);
    EXPECT_EQ(monitor.gpu_name(0), "NVIDIA A100-SXM4-80GB");
    EXPECT_TRUE(gpu::Nvml().simulated);
    monitor.Begin("job", Edges::kAligned);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const Measurement m = monitor.End("job");
    ASSERT_EQ(m.gpus.size(), 2u);
    for (const GpuEnergy& g : m.gpus) {
      EXPECT_TRUE(g.aligned);
      EXPECT_FALSE(g.approximate);
      EXPECT_NEAR(g.energy_j / m.duration_s, IdleW(), IdleW() * 0.01);
    }
  });
}

TEST(NvmlMonitor, CounterNotSupportedFallsBackToSampling) {
  TempFile config(
      R"({"count": 2, "devices": [{}, {"faults": {"energy_counter_not_supported": true}}]})");
  RunInChild(SimEnv(config.path()), [] {
    MonitorOptions o = NoCpu();
    o.sampling_period_s = 0.02;
    Monitor monitor(o);
    ASSERT_EQ(monitor.gpu_count(), 2);
    EXPECT_EQ(monitor.gpu_source(0), EnergySource::kCounter);
    EXPECT_EQ(monitor.gpu_source(1), EnergySource::kSampling);
    EXPECT_NE(monitor.methodology().find("GPU 1: power sampling every 20 ms"), std::string::npos)
        << monitor.methodology();
    monitor.Begin("w", Edges::kAligned);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const Measurement m = monitor.End("w");
    EXPECT_EQ(m.gpus[0].source, EnergySource::kCounter);
    EXPECT_TRUE(m.gpus[0].aligned);
    EXPECT_EQ(m.gpus[1].source, EnergySource::kSampling);
    EXPECT_FALSE(m.gpus[1].aligned);
    for (const GpuEnergy& g : m.gpus) {
      EXPECT_NEAR(g.energy_j / m.duration_s, IdleW(), IdleW() * 0.02) << g.index;
    }
  });
}

TEST(NvmlMonitor, SelectsVisibleGpusAndRejectsOthers) {
  RunInChild(SimEnv("", {{"JOULEPIPE_SIM_NVML_COUNT", "4"}, {"CUDA_VISIBLE_DEVICES", "2,3"}}), [] {
    MonitorOptions o = NoCpu();
    o.gpus = std::vector<int>{1};
    Monitor monitor(o);
    ASSERT_EQ(monitor.gpu_count(), 1);
    EXPECT_EQ(monitor.gpu_index(0), 1);
    o.gpus = std::vector<int>{2};
    try {
      Monitor bad(o);
      ADD_FAILURE() << "no error";
    } catch (const model::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("GPU 2 is not visible (visible GPUs: 0-1"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(NvmlMonitor, CheapWindowsCarryTheCounterGranularity) {
  RunInChild(SimEnv(""), [] {
    Monitor monitor(NoCpu());
    // 8 cheap 250 ms windows: each within one counter update (6.2 J at the
    // 100 ms period) of idle power. Their mean is not asserted: where the
    // edges fall against the updates depends on scheduling, so 8 windows
    // average out only in expectation (a loaded machine drew 5.1% low).
    for (int i = 0; i < 8; ++i) {
      monitor.Begin("step");
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      const Measurement m = monitor.End("step");
      EXPECT_FALSE(m.gpus.at(0).aligned);
      EXPECT_NEAR(m.gpu_energy_j, IdleW() * m.duration_s, IdleW() * 0.1 + 0.5);
    }
  });
}

}  // namespace
}  // namespace joulepipe::monitor
