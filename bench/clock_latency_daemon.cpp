// Clock-change latency through joulepiped vs direct NVML.
//
// Starts the built joulepiped (next to this binary) on the simulated NVML
// library (<build>/sim-nvml/libnvidia-ml.so.1, permissions granted, no state
// file), then times N set_locked_clocks round trips through
// gpu::MakeDaemonClockControl, alternating between two clock ranges so every
// call changes the setting; then N direct gpu::Device::SetLockedClocks calls
// in this process on the same simulated library. Prints median, p99 and max
// of each. The figures are the software path's cost (socket round trip,
// JSON, validation, the simulated library's setter); a real driver adds its
// own setter time to both.
//
//   bench_clock_latency_daemon [--iterations N]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_stats.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/nvml.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median_us, p99_us, max_us;
};

Stats Summarise(const std::vector<double>& us) {
  using joulepipe::bench::Percentile;
  return {Percentile(us, 0.5), Percentile(us, 0.99), Percentile(us, 1.0)};
}

template <typename F>
std::vector<double> Time(int iterations, F&& call) {
  std::vector<double> us;
  us.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = Clock::now();
    call(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 5000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0)
      iterations = std::max(10, std::atoi(argv[i + 1]));
  }
  const std::filesystem::path build = std::filesystem::canonical("/proc/self/exe").parent_path();
  const std::string daemon = (build / "joulepiped").string();
  const std::string sim = (build / "sim-nvml" / "libnvidia-ml.so.1").string();
  if (!std::filesystem::exists(daemon) || !std::filesystem::exists(sim)) {
    std::fprintf(stderr, "build joulepiped and joulepipe_sim_nvml first (%s, %s)\n", daemon.c_str(),
                 sim.c_str());
    return 2;
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("clock-latency-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "sim.json")
      << R"({"count":2,"permissions":{"clocks":true,"power_limit":true}})";
  std::ofstream(dir / "joulepiped.json") << "{}";
  const std::string socket = (dir / "d.sock").string();
  ::setenv("JOULEPIPE_NVML_LIBRARY", sim.c_str(), 1);
  ::setenv("JOULEPIPE_SIM_NVML_CONFIG", (dir / "sim.json").c_str(), 1);

  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(daemon.c_str(), daemon.c_str(), "--config", (dir / "joulepiped.json").c_str(),
            "--socket", socket.c_str(), "--audit-log", (dir / "audit.log").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 500 && !std::filesystem::exists(socket); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  int status = 0;
  try {
    auto control = joulepipe::gpu::MakeDaemonClockControl(socket);
    const std::vector<int> clocks = control->SupportedSmClocks(0);
    const int a = clocks[clocks.size() / 2];
    const int b = clocks[2];
    Time(100, [&](int i) { control->SetLockedClocks(0, i % 2 ? a : b, b); });  // warm up
    const Stats through =
        Summarise(Time(iterations, [&](int i) { control->SetLockedClocks(0, i % 2 ? a : b, b); }));
    control->Restore();

    const joulepipe::gpu::Device device = joulepipe::gpu::ListAllDevices().at(1);
    Time(100, [&](int i) { device.SetLockedClocks(i % 2 ? a : b, b); });
    const Stats direct =
        Summarise(Time(iterations, [&](int i) { device.SetLockedClocks(i % 2 ? a : b, b); }));
    device.ResetLockedClocks();

    std::printf(
        "set_locked_clocks latency, %d calls each, simulated NVML library (%s), "
        "not a GPU driver:\n",
        iterations, sim.c_str());
    std::printf("  through joulepiped : median %7.1f us  p99 %7.1f us  max %8.1f us\n",
                through.median_us, through.p99_us, through.max_us);
    std::printf("  direct NVML        : median %7.1f us  p99 %7.1f us  max %8.1f us\n",
                direct.median_us, direct.p99_us, direct.max_us);
    std::printf("  daemon overhead    : median %7.1f us\n", through.median_us - direct.median_us);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_clock_latency_daemon: %s\n", e.what());
    status = 1;
  }
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  std::filesystem::remove_all(dir);
  return status;
}
