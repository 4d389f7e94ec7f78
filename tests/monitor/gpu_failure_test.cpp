// MonitorOptions::tolerate_gpu_failures: a GPU lost in the middle of a
// window costs only its own figures from then on, not the whole measurement
// (`joulepipe measure` keeps the command's result; tests/cli has that side).
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "joulepipe/monitor/monitor.hpp"
#include "monitor_test_support.hpp"

namespace joulepipe::monitor {
namespace {

using testing::FakeMeter;

// A FakeMeter whose every read throws once `lost_after_s` have passed.
class LosableMeter final : public GpuMeter {
 public:
  LosableMeter(int index, double power_w, bool has_counter, double lost_after_s)
      : meter_(index, power_w, has_counter),
        lost_at_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(lost_after_s))) {}
  int index() const override { return meter_.index(); }
  std::optional<uint64_t> ReadEnergyMj() const override {
    Check();
    return meter_.ReadEnergyMj();
  }
  double ReadPowerW() const override {
    Check();
    return meter_.ReadPowerW();
  }

 private:
  void Check() const {
    if (Clock::now() >= lost_at_) throw std::runtime_error("GPU is lost");
  }
  FakeMeter meter_;
  Clock::time_point lost_at_;
};

MonitorOptions Options(bool tolerate) {
  MonitorOptions o;
  o.cpu = CpuMode::kOff;
  o.sampling_period_s = 0.02;
  o.counter_period_s = 0.1;
  o.tolerate_gpu_failures = tolerate;
  return o;
}

std::vector<std::unique_ptr<GpuMeter>> OneHealthyOneLost(bool has_counter, double lost_after_s) {
  std::vector<std::unique_ptr<GpuMeter>> meters;
  meters.push_back(std::make_unique<FakeMeter>(0, 100.0, has_counter));
  meters.push_back(std::make_unique<LosableMeter>(1, 200.0, has_counter, lost_after_s));
  return meters;
}

TEST(GpuFailure, WithoutToleranceEndThrows) {
  Monitor monitor(OneHealthyOneLost(true, 0.4), Options(false));
  monitor.Begin("job");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_THROW(monitor.End("job"), std::runtime_error);
}

TEST(GpuFailure, LostGpuKeepsWhatWasMeasuredUntilThen) {
  for (const bool has_counter : {true, false}) {
    for (const Edges edges : {Edges::kAligned, Edges::kCheap}) {
      SCOPED_TRACE(std::string(has_counter ? "counter" : "sampling") +
                   (edges == Edges::kAligned ? ", aligned" : ", cheap"));
      // Begin waits up to one counter period for an update (aligned edges),
      // so the GPU is lost 0.3-0.4 s into the window.
      Monitor monitor(OneHealthyOneLost(has_counter, 0.4), Options(true));
      monitor.Begin("job", edges);
      std::this_thread::sleep_for(std::chrono::milliseconds(800));
      Measurement m;
      ASSERT_NO_THROW(m = monitor.End("job"));
      ASSERT_EQ(m.gpus.size(), 2u);
      EXPECT_FALSE(m.complete());

      const GpuEnergy& ok = m.gpus[0];
      EXPECT_FALSE(ok.failed);
      EXPECT_DOUBLE_EQ(ok.measured_s, m.duration_s);
      EXPECT_NEAR(ok.energy_j, 100.0 * m.duration_s, 100.0 * 0.1 + 1e-9);

      const GpuEnergy& lost = m.gpus[1];
      EXPECT_TRUE(lost.failed);
      EXPECT_EQ(lost.error, "GPU is lost");
      EXPECT_FALSE(lost.aligned);
      EXPECT_GT(lost.measured_s, 0.15);
      EXPECT_LT(lost.measured_s, 0.45);
      // Up to the last good reading: the counter publishes every 0.1 s.
      EXPECT_NEAR(lost.energy_j, 200.0 * lost.measured_s, 200.0 * 0.1 + 1e-9);
      EXPECT_DOUBLE_EQ(m.gpu_energy_j, ok.energy_j + lost.energy_j);
    }
  }
}

TEST(GpuFailure, HealthyGpusAreUnchangedByTolerance) {
  Monitor monitor(OneHealthyOneLost(true, 1e9), Options(true));
  monitor.Begin("job", Edges::kAligned);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Measurement m = monitor.End("job");
  EXPECT_TRUE(m.complete());
  for (const GpuEnergy& g : m.gpus) {
    EXPECT_FALSE(g.failed);
    EXPECT_TRUE(g.aligned);
    EXPECT_TRUE(g.error.empty());
    EXPECT_DOUBLE_EQ(g.measured_s, m.duration_s);
  }
  EXPECT_NEAR(m.gpus[1].energy_j, 200.0 * m.duration_s, 200.0 * 0.01);
}

}  // namespace
}  // namespace joulepipe::monitor
