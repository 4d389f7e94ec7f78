// StepLogger: CSV and JSONL lines (one per step, flushed), token figures,
// the summary.
#include "joulepipe/monitor/step_logger.hpp"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "monitor_test_support.hpp"

namespace joulepipe::monitor {
namespace {

using testing::FakeMeter;
using testing::TempDir;

std::vector<std::string> Lines(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

std::unique_ptr<Monitor> TwoGpuMonitor() {
  std::vector<std::unique_ptr<GpuMeter>> meters;
  meters.push_back(std::make_unique<FakeMeter>(0, 100, true));
  meters.push_back(std::make_unique<FakeMeter>(1, 50, true));
  MonitorOptions o;
  o.cpu = CpuMode::kOff;
  return std::make_unique<Monitor>(std::move(meters), o);
}

TEST(StepLogger, CsvHasOneFlushedLinePerStep) {
  TempDir dir;
  const auto path = dir.path() / "steps.csv";
  auto monitor = TwoGpuMonitor();
  StepLogger log(*monitor, {.path = path.string(), .tokens_per_step = 1000});
  ASSERT_EQ(Lines(path).size(), 1u);  // the header, before any step
  EXPECT_EQ(Lines(path)[0],
            "step,time_s,gpu_energy_j,cpu_energy_j,dram_energy_j,energy_j,avg_power_w,tokens,"
            "tokens_per_s,j_per_token,approximate,gpu0_energy_j,gpu1_energy_j");
  for (int i = 0; i < 3; ++i) {
    log.BeginStep();
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 2 ? 2 : 30));
    const StepRecord& r = log.EndStep(i == 1 ? 500 : -1);
    EXPECT_EQ(r.step, i);
    EXPECT_EQ(Lines(path).size(), static_cast<std::size_t>(i + 2)) << "not flushed";
  }
  const auto lines = Lines(path);
  for (int i = 0; i < 3; ++i) {
    const auto cells = Split(lines[i + 1]);
    ASSERT_EQ(cells.size(), 13u) << lines[i + 1];
    EXPECT_EQ(cells[0], std::to_string(i));
    const double time = std::stod(cells[1]);
    const double gpu = std::stod(cells[2]);
    EXPECT_EQ(cells[3], "");  // CPU not measured
    EXPECT_EQ(cells[4], "");
    EXPECT_DOUBLE_EQ(std::stod(cells[5]), gpu);  // GPU-only total
    // 30 ms steps are shorter than the 100 ms counter period: instant power.
    EXPECT_EQ(cells[10], "1");
    EXPECT_NEAR(gpu, 150 * time, 1e-6);
    EXPECT_NEAR(std::stod(cells[6]), 150, 1e-3);
    const double tokens = i == 1 ? 500 : 1000;
    EXPECT_DOUBLE_EQ(std::stod(cells[7]), tokens);
    EXPECT_NEAR(std::stod(cells[8]), tokens / time, tokens / time * 1e-6);
    EXPECT_NEAR(std::stod(cells[9]), gpu / tokens, 1e-9);
    EXPECT_NEAR(std::stod(cells[11]) + std::stod(cells[12]), gpu, 1e-6);
  }
  const StepSummary& s = log.summary();
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.approximate_steps, 3);
  EXPECT_DOUBLE_EQ(s.tokens, 2500);
  EXPECT_NEAR(s.avg_power_w(), 150, 1e-3);
  const std::string summary = log.FormatSummary();
  for (const char* needle : {"3 steps", "GPU-only", "tokens/s", "J/token", "approximate",
                             "Methodology: GPU 0, 1: NVML energy counter"}) {
    EXPECT_NE(summary.find(needle), std::string::npos) << needle << " not in " << summary;
  }
}

TEST(StepLogger, JsonlLinesParseWithNullsForWhatIsNotMeasured) {
  TempDir dir;
  const auto path = dir.path() / "steps.jsonl";
  auto monitor = TwoGpuMonitor();
  {
    StepLogger log(*monitor, {.path = path.string(), .format = LogFormat::kJsonl});
    for (int i = 0; i < 2; ++i) {
      log.BeginStep();
      std::this_thread::sleep_for(std::chrono::milliseconds(110));
      log.EndStep();
    }
  }
  const auto lines = Lines(path);
  ASSERT_EQ(lines.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["step"], i);
    EXPECT_TRUE(j["cpu_energy_j"].is_null());
    EXPECT_TRUE(j["dram_energy_j"].is_null());
    EXPECT_TRUE(j["tokens"].is_null());
    EXPECT_TRUE(j["j_per_token"].is_null());
    // 110 ms is over one counter update but far under
    // kCounterPeriodsForExact: the counter's delta, flagged.
    EXPECT_EQ(j["approximate"], true);
    ASSERT_EQ(j["gpus_energy_j"].size(), 2u);
    const double time = j["time_s"];
    // Counter windows: within one update of each GPU (10 J + 5 J).
    EXPECT_NEAR(j["gpu_energy_j"].get<double>(), 150 * time, 15.0 + 1e-6);
  }
}

TEST(StepLogger, UnwritablePathIsAnInputError) {
  auto monitor = TwoGpuMonitor();
  EXPECT_THROW(StepLogger(*monitor, {.path = "/nonexistent/dir/steps.csv"}), model::InputError);
  StepLogger no_file(*monitor, {});
  no_file.BeginStep();
  EXPECT_EQ(no_file.EndStep().step, 0);
  EXPECT_THROW(no_file.EndStep(), WindowError);
}

}  // namespace
}  // namespace joulepipe::monitor
