// bench_window_cost: the cost of one measurement window (Monitor::Begin +
// Monitor::End into a reused Measurement) on the simulated NVML library,
// counter mode, cheap edges, CPU off, with 1 and 8 GPUs. Target: < 20 us per
// window. No CUDA synchronisation is involved (the monitor does none).
//
// Usage: bench_window_cost [windows]   (default 20000)
// Uses $JOULEPIPE_NVML_LIBRARY if set, else sim-nvml/libnvidia-ml.so.1 next
// to this executable (the build directory).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/monitor/monitor.hpp"

namespace {

using joulepipe::monitor::Clock;
using joulepipe::monitor::CpuMode;
using joulepipe::monitor::Measurement;
using joulepipe::monitor::Monitor;
using joulepipe::monitor::MonitorOptions;

using joulepipe::bench::Percentile;

void Run(int gpus, int windows) {
  MonitorOptions o;
  o.cpu = CpuMode::kOff;
  o.gpus = std::vector<int>();
  for (int i = 0; i < gpus; ++i) o.gpus->push_back(i);
  Monitor monitor(o);
  Measurement m;
  for (int i = 0; i < 1000; ++i) {  // warm-up: window slots, Measurement storage
    monitor.Begin("step");
    monitor.End("step", &m);
  }
  std::vector<double> us(windows);
  for (int i = 0; i < windows; ++i) {
    const Clock::time_point t0 = Clock::now();
    monitor.Begin("step");
    monitor.End("step", &m);
    us[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  std::printf("%d GPU%s: median %.2f us, p99 %.2f us, max %.2f us per window (%d windows, %s)\n",
              gpus, gpus == 1 ? " " : "s", Percentile(us, 0.5), Percentile(us, 0.99),
              Percentile(us, 1.0), windows,
              joulepipe::monitor::EnergySourceName(monitor.gpu_source(0)));
}

}  // namespace

int main(int argc, char** argv) {
  const int windows = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (windows < 1) {
    std::fprintf(stderr, "usage: bench_window_cost [windows >= 1]\n");
    return 2;
  }
  const char* library = std::getenv(joulepipe::gpu::kNvmlLibraryEnv);
  if (!library || !*library) {
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    const std::string sim = (self.parent_path() / "sim-nvml" / "libnvidia-ml.so.1").string();
    ::setenv(joulepipe::gpu::kNvmlLibraryEnv, sim.c_str(), 1);
  }
  ::setenv("JOULEPIPE_SIM_NVML_COUNT", "8", 0);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  try {
    std::printf("bench_window_cost: Monitor::Begin + End(name, &m), counter mode, cheap edges\n");
    std::printf("%s\n", joulepipe::gpu::NvmlMethodology().c_str());
    Run(1, windows);
    Run(8, windows);
    std::printf("target: < 20 us per window\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_window_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
