// Test helpers for the monitor part: a fake powercap RAPL tree and fake GPU
// meters whose energy counter follows a known power with NVML-like
// granularity (updated every `period_s`).
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "joulepipe/monitor/monitor.hpp"

namespace joulepipe::monitor::testing {

namespace fs = std::filesystem;

// A directory under the system temp dir, removed at the end of its scope.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ = fs::temp_directory_path() / ("joulepipe-monitor-test-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(device()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes `text` into `path` in place (same inode: an open fd sees it).
inline void WriteInPlace(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Adds a zone directory `dir` (e.g. "intel-rapl:0:0") under `root`.
inline void AddZone(const fs::path& root, const std::string& dir, const std::string& name,
                    uint64_t energy_uj, uint64_t max_range_uj) {
  fs::create_directories(root / dir);
  WriteInPlace(root / dir / "name", name + "\n");
  WriteInPlace(root / dir / "energy_uj", std::to_string(energy_uj) + "\n");
  WriteInPlace(root / dir / "max_energy_range_uj", std::to_string(max_range_uj) + "\n");
}

inline void SetEnergy(const fs::path& root, const std::string& dir, uint64_t energy_uj) {
  WriteInPlace(root / dir / "energy_uj", std::to_string(energy_uj) + "\n");
}

// A GPU drawing a constant `power_w`. With a counter, the counter is the
// exact integral published only at multiples of `period_s` (as NVML does).
class FakeMeter final : public GpuMeter {
 public:
  FakeMeter(int index, double power_w, bool has_counter, double period_s = 0.1)
      : index_(index),
        power_w_(power_w),
        has_counter_(has_counter),
        period_s_(period_s),
        start_(Clock::now()) {}
  int index() const override { return index_; }
  std::string name() const override { return "Fake GPU"; }
  std::optional<uint64_t> ReadEnergyMj() const override {
    ++counter_reads;
    if (!has_counter_) return std::nullopt;
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    const double published = std::floor(t / period_s_) * period_s_;
    return static_cast<uint64_t>(1e9 + power_w_ * published * 1e3);
  }
  double ReadPowerW() const override {
    ++power_reads;
    return power_w_;
  }
  mutable std::atomic<int64_t> counter_reads{0};
  mutable std::atomic<int64_t> power_reads{0};

 private:
  int index_;
  double power_w_;
  bool has_counter_;
  double period_s_;
  Clock::time_point start_;
};

}  // namespace joulepipe::monitor::testing
