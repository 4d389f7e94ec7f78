// Per-step energy log for training loops, over a Monitor.
//
//   monitor::Monitor monitor(monitor::MonitorOptions{});
//   monitor::StepLogger log(monitor, {.path = "energy.csv", .tokens_per_step = 4 * 2048});
//   for (...) { log.BeginStep(); train_step(); log.EndStep(); }
//   std::fputs(log.FormatSummary().c_str(), stderr);
//
// Each EndStep writes one line and flushes it, so a crash loses at most the
// step in progress. CSV (a header line first):
//   step,time_s,gpu_energy_j,cpu_energy_j,dram_energy_j,energy_j,avg_power_w,
//   tokens,tokens_per_s,j_per_token,approximate,gpu<i>_energy_j...
// one gpu<i>_energy_j column per GPU (i = visible index); cpu/dram columns
// are empty when CPU energy is not measured, token columns when tokens are 0.
// JSONL: one object per line with the same keys, "gpus_energy_j" as a list
// and null for what is not measured. energy_j is the monitor's scope
// (Monitor::scope(): GPU-only or GPU+CPU+DRAM); the summary states it.
//
// Steps use Edges::kCheap windows named options.window_name: steps shorter
// than the counter's update period (~100 ms) are instant-power
// approximations (approximate = 1), longer ones carry the counter's ±1
// update-period edge error, which averages out over many steps.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "joulepipe/monitor/monitor.hpp"

namespace joulepipe::monitor {

enum class LogFormat { kCsv, kJsonl };

struct StepLoggerOptions {
  std::string path;  // "" = keep only the summary; else created/truncated
  LogFormat format = LogFormat::kCsv;
  double tokens_per_step = 0;  // default tokens of EndStep(); 0 = no token figures
  std::string window_name = "joulepipe.step";
};

struct StepRecord {
  int64_t step = 0;  // 0, 1, ...
  Measurement measurement;
  double tokens = 0;
  double avg_power_w = 0;   // energy_j / time_s
  double tokens_per_s = 0;  // 0 without tokens
  double j_per_token = 0;   // 0 without tokens
  double energy_j() const { return measurement.total_energy_j(); }
};

struct StepSummary {
  int64_t steps = 0;
  double time_s = 0;
  double gpu_energy_j = 0;
  double energy_j = 0;  // in the monitor's scope
  double tokens = 0;
  int64_t approximate_steps = 0;
  double avg_power_w() const { return time_s > 0 ? energy_j / time_s : 0; }
  double tokens_per_s() const { return time_s > 0 ? tokens / time_s : 0; }
  double j_per_token() const { return tokens > 0 ? energy_j / tokens : 0; }
};

class StepLogger {
 public:
  // Opens options.path (if any) and writes the CSV header. Throws
  // model::InputError naming the path if it cannot be opened. `monitor`
  // must outlive the logger.
  StepLogger(Monitor& monitor, StepLoggerOptions options);
  ~StepLogger();  // closes the file; a step still open is dropped
  StepLogger(const StepLogger&) = delete;
  StepLogger& operator=(const StepLogger&) = delete;

  void BeginStep();
  // Ends the step, writes its line and returns it (valid until the next
  // EndStep). tokens < 0: options.tokens_per_step. Throws WindowError
  // without BeginStep, model::InputError if the line cannot be written.
  const StepRecord& EndStep(double tokens = -1);

  const StepSummary& summary() const { return summary_; }
  // Steps, time, energy, average power, tokens/s, J/token, how many steps
  // were approximate, and the monitor's methodology.
  std::string FormatSummary() const;

 private:
  void WriteLine();

  Monitor& monitor_;
  StepLoggerOptions options_;
  std::FILE* file_ = nullptr;
  StepRecord record_;
  StepSummary summary_;
  std::string line_;  // reused: no allocation per step once warm
};

}  // namespace joulepipe::monitor
