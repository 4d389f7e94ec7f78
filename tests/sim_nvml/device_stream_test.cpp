// The simulated GPU's streams and events (joulepipe/sim_nvml/device_stream.hpp):
// the host runs ahead of the device up to the launch queue's depth, a
// kernel's duration and power follow the clock in force while it runs, and
// CUDA events time what the device did, not what the host did.
#include "joulepipe/sim_nvml/device_stream.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "joulepipe/physics/gpu_model.hpp"
#include "sim_nvml_test_support.hpp"

namespace joulepipe::sim_nvml::testing {
namespace {

struct Cuda {
  decltype(&::nvmlJoulepipeSimStreamCreate) stream_create = nullptr;
  decltype(&::nvmlJoulepipeSimStreamDestroy) stream_destroy = nullptr;
  decltype(&::nvmlJoulepipeSimLaunchKernel) launch = nullptr;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuStreamSynchronize) stream_sync = nullptr;
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventQuery) event_query = nullptr;
  decltype(&::cuEventSynchronize) event_sync = nullptr;
  decltype(&::cuEventElapsedTime) elapsed = nullptr;
  decltype(&::cuEventDestroy_v2) event_destroy = nullptr;
};

const Cuda& Api() {
  static const Cuda api = [] {
    Cuda c;
    void* lib = Lib().handle;
    Lookup(lib, "nvmlJoulepipeSimStreamCreate", c.stream_create);
    Lookup(lib, "nvmlJoulepipeSimStreamDestroy", c.stream_destroy);
    Lookup(lib, "nvmlJoulepipeSimLaunchKernel", c.launch);
    Lookup(lib, "cuInit", c.init);
    Lookup(lib, "cuStreamSynchronize", c.stream_sync);
    Lookup(lib, "cuEventCreate", c.event_create);
    Lookup(lib, "cuEventRecord", c.event_record);
    Lookup(lib, "cuEventQuery", c.event_query);
    Lookup(lib, "cuEventSynchronize", c.event_sync);
    Lookup(lib, "cuEventElapsedTime", c.elapsed);
    Lookup(lib, "cuEventDestroy_v2", c.event_destroy);
    return c;
  }();
  return api;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class DeviceStreamTest : public SimNvmlTest {
 protected:
  void SetUp() override {
    SimNvmlTest::SetUp();
    ASSERT_NE(Api().launch, nullptr);
    ASSERT_EQ(Api().init(0), kCudaSuccess);
  }
  // A stream on a fresh simulated A100 with clock permission; `extra` adds
  // config fields.
  CUstream Open(unsigned depth = 0, nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json config = {{"permissions", {{"clocks", true}}}, {"power_reading", "instant"}};
    config.update(extra);
    device_ = InitWith(config);
    CUstream stream = nullptr;
    EXPECT_EQ(Api().stream_create(device_, depth, &stream), kCudaSuccess);
    return stream;
  }
  // Milliseconds the device took between two events recorded around `work`.
  float DeviceMs(CUstream stream, const std::function<void()>& work) {
    CUevent start = nullptr, end = nullptr;
    EXPECT_EQ(Api().event_create(&start, 0), kCudaSuccess);
    EXPECT_EQ(Api().event_create(&end, 0), kCudaSuccess);
    EXPECT_EQ(Api().event_record(start, stream), kCudaSuccess);
    work();
    EXPECT_EQ(Api().event_record(end, stream), kCudaSuccess);
    EXPECT_EQ(Api().event_sync(end), kCudaSuccess);
    float ms = -1;
    EXPECT_EQ(Api().elapsed(&ms, start, end), kCudaSuccess);
    Api().event_destroy(start);
    Api().event_destroy(end);
    return ms;
  }
  nvmlDevice_t device_ = nullptr;
};

const physics::GpuSpec& A100() {
  return physics::FindGpu("a100-sxm4-80gb");
}

TEST_F(DeviceStreamTest, TheHostRunsAheadAndEventsTimeTheDevice) {
  const CUstream stream = Open();
  CUevent start = nullptr, end = nullptr;
  ASSERT_EQ(Api().event_create(&start, 0), kCudaSuccess);
  ASSERT_EQ(Api().event_create(&end, 0), kCudaSuccess);
  const auto host = std::chrono::steady_clock::now();
  ASSERT_EQ(Api().event_record(start, stream), kCudaSuccess);
  for (int k = 0; k < 20; ++k) ASSERT_EQ(Api().launch(stream, 0.005, 1.0, 1.0), kCudaSuccess);
  ASSERT_EQ(Api().event_record(end, stream), kCudaSuccess);
  const double enqueue_s = Seconds(host);
  // 100 ms of device work was queued in a fraction of that: the host did
  // not wait, and the end event is not reached yet.
  EXPECT_LT(enqueue_s, 0.05);
  EXPECT_EQ(Api().event_query(end), kCudaErrorNotReady);
  float ms = 0;
  EXPECT_EQ(Api().elapsed(&ms, start, end), kCudaErrorNotReady);
  ASSERT_EQ(Api().event_sync(end), kCudaSuccess);
  EXPECT_EQ(Api().event_query(end), kCudaSuccess);
  ASSERT_EQ(Api().elapsed(&ms, start, end), kCudaSuccess);
  EXPECT_GE(ms, 100 * 0.99);
  EXPECT_LT(ms, 100 * 1.5 + 20);
  EXPECT_EQ(Api().event_destroy(start), kCudaSuccess);
  EXPECT_EQ(Api().event_destroy(end), kCudaSuccess);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaSuccess);
}

TEST_F(DeviceStreamTest, AFullLaunchQueueBlocksTheHost) {
  const CUstream stream = Open(/*depth=*/2);
  const auto host = std::chrono::steady_clock::now();
  // The device takes the first, the queue holds two more: the fourth launch
  // waits until the first kernel ends (20 ms).
  for (int k = 0; k < 4; ++k) ASSERT_EQ(Api().launch(stream, 0.02, 1.0, 1.0), kCudaSuccess);
  EXPECT_GE(Seconds(host), 0.018);
  ASSERT_EQ(Api().stream_sync(stream), kCudaSuccess);
  EXPECT_GE(Seconds(host), 0.079);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaSuccess);
}

TEST_F(DeviceStreamTest, AKernelsComputeShareSlowsWithTheClockItsMemoryShareDoesNot) {
  const CUstream stream = Open();
  const int half = static_cast<int>(A100().max_sm_mhz / 2);
  ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device_, half, half), NVML_SUCCESS);
  const double f = Clock(device_);  // the supported clock at or below half
  const double ratio = A100().max_sm_mhz / f;
  const float compute = DeviceMs(stream, [&] { Api().launch(stream, 0.02, 1.0, 1.0); });
  const float memory = DeviceMs(stream, [&] { Api().launch(stream, 0.02, 0.0, 1.0); });
  EXPECT_NEAR(compute, 20 * ratio, 20 * ratio * 0.1 + 3) << f << " MHz";
  EXPECT_NEAR(memory, 20, 20 * 0.1 + 3);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaSuccess);
}

TEST_F(DeviceStreamTest, AClockChangeActsOnTheKernelRunningThen) {
  const CUstream stream = Open();
  const int half = static_cast<int>(A100().max_sm_mhz / 2);
  // 60 ms of compute at the highest clock; after about 20 ms the clock is
  // halved, so the other 40 ms of work take about twice as long.
  const float ms = DeviceMs(stream, [&] {
    Api().launch(stream, 0.06, 1.0, 1.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(nvml().nvmlDeviceSetGpuLockedClocks(device_, half, half), NVML_SUCCESS);
  });
  const double ratio = A100().max_sm_mhz / static_cast<double>(Clock(device_));
  const double expected = 20 + 40 * ratio;
  EXPECT_GT(ms, 60 + 0.5 * (expected - 60)) << "the change did not slow the running kernel";
  EXPECT_LT(ms, expected * 1.3 + 10);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaSuccess);
}

TEST_F(DeviceStreamTest, PowerFollowsTheRunningKernelAndTheCallLogHasIt) {
  const std::string log = Path("calls.jsonl");
  const CUstream stream = Open(0, {{"call_log", log}});
  ASSERT_EQ(Api().launch(stream, 0.2, 0.8, 0.7), kCudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  EXPECT_NEAR(InstantPowerMw(device_) / 1000.0, physics::Power(A100(), 0.7, A100().max_sm_mhz),
              0.01);
  ASSERT_EQ(Api().stream_sync(stream), kCudaSuccess);
  // Idle between kernels: the device waits at its clock.
  EXPECT_NEAR(InstantPowerMw(device_) / 1000.0, A100().p_block_w, 0.01);
  std::ifstream in(log);
  std::string line, kernel;
  while (std::getline(in, line)) {
    if (line.find("\"function\":\"kernel\"") != std::string::npos) kernel = line;
  }
  ASSERT_FALSE(kernel.empty());
  const nlohmann::json k = nlohmann::json::parse(kernel)["args"];
  EXPECT_GE(k["end_unix_s"].get<double>() - k["start_unix_s"].get<double>(), 0.2 * 0.99);
  EXPECT_EQ(k["start_mhz"].get<double>(), A100().max_sm_mhz);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaSuccess);
}

TEST_F(DeviceStreamTest, BadHandlesAndValuesAreRefused) {
  const CUstream stream = Open();
  EXPECT_EQ(Api().launch(stream, 0, 1, 1), kCudaErrorInvalidValue);
  EXPECT_EQ(Api().launch(stream, 0.01, 1.5, 1), kCudaErrorInvalidValue);
  EXPECT_EQ(Api().launch(nullptr, 0.01, 1, 1), kCudaErrorInvalidHandle);
  EXPECT_EQ(Api().stream_sync(nullptr), kCudaErrorInvalidHandle);
  CUevent never = nullptr;
  ASSERT_EQ(Api().event_create(&never, 0), kCudaSuccess);
  EXPECT_EQ(Api().event_query(never), kCudaSuccess);  // never recorded: done, as in CUDA
  float ms = 0;
  EXPECT_EQ(Api().elapsed(&ms, never, never), kCudaErrorInvalidHandle);
  Api().event_destroy(never);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaSuccess);
  EXPECT_EQ(Api().stream_destroy(stream), kCudaErrorInvalidHandle);
}

}  // namespace
}  // namespace joulepipe::sim_nvml::testing
