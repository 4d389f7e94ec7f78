// PowerTrace: one GPU's power over time, as a training rank records it, and
// the join of a job's rank traces into the job's power on one time axis
// (issue 45: what the grid sees of a real job).
//
// Recording. A thread of the trace's own reads the GPU's instant power
// every interval_s (NVML's power reading; on most boards it is itself an
// average over tens of ms, so intervals below 10 ms add samples, not
// detail) for duration_s from construction, stamping each sample with the
// wall clock (Unix seconds: what nodes share, to within their clock sync).
// The training thread marks each step's end (MarkStepEnd, a short lock
// once per step); those marks align the ranks below. A failed reading is
// counted and skipped. Memory: at most duration_s / interval_s samples.
//
// Joining. Ranks on different nodes stamp with clocks that may differ by
// more than a bin, so the join aligns each trace on the iteration
// boundaries: in synchronous training every rank ends iteration i at about
// the same moment (the gradient synchronisation waits for all of them), so
// a trace's offset to the first trace is the median, over the iterations
// both marked, of the difference between their step ends. Traces without
// a common iteration are taken on their clocks as they are (offset 0, and
// the join says so). The job's power in each bin of the common window is
// the sum of every rank's last sample at or before the bin's middle (a
// rank's power holds between readings).
//
// JSON of one rank's trace (PowerTraceToJson; version 1):
//   {"version":1, "kind":"power_trace", "rank":3, "gpu":"NVIDIA H100 ...",
//    "interval_s":0.01, "read_errors":0,
//    "samples":[[unix_s, watts], ...], "step_ends":[[iteration, unix_s], ...]}
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "joulepipe/monitor/monitor.hpp"

namespace joulepipe::monitor {

// The longest trace a rank records, and its finest and coarsest interval.
inline constexpr double kMaxTraceS = 24 * 3600;
inline constexpr double kMinTraceIntervalS = 0.001;
inline constexpr double kMaxTraceIntervalS = 10;
// The most samples one trace holds (what its file may hold): a day at 10 ms.
inline constexpr std::size_t kMaxTraceSamples = 8'640'000;

struct PowerTraceOptions {
  double interval_s = 0.01;  // kMinTraceIntervalS..kMaxTraceIntervalS
  double duration_s = 60;    // > 0, at most kMaxTraceS, and at most kMaxTraceSamples samples
};

struct PowerTraceData {
  int rank = 0;
  std::string gpu;
  double interval_s = 0.01;
  std::uint64_t read_errors = 0;
  // Recorded through joulepipe's simulated NVML library: the figures are
  // simulated, not measured (JSON "simulated": true; absent = false).
  bool simulated = false;
  std::vector<double> t_s;    // Unix seconds of each sample, ascending
  std::vector<double> watts;  // the GPU's power at that moment
  struct StepEnd {
    std::int64_t iteration = 0;
    double t_s = 0;  // Unix seconds
  };
  std::vector<StepEnd> step_ends;  // ascending in both
};

class PowerTrace {
 public:
  // Starts recording at once. Throws model::InputError naming
  // PowerTraceOptions::<field> for a bad option; `meter` must not be null.
  PowerTrace(std::unique_ptr<GpuMeter> meter, PowerTraceOptions options);
  ~PowerTrace();  // stops the thread
  PowerTrace(const PowerTrace&) = delete;
  PowerTrace& operator=(const PowerTrace&) = delete;

  // Training thread: iteration `iteration` ended now. Ignored once the
  // trace is over, and for an iteration not above the last one marked.
  void MarkStepEnd(std::int64_t iteration) noexcept;
  // Whether duration_s has passed (the thread has stopped by itself).
  bool done() const;
  // Stops recording (idempotent) and returns what was recorded, with
  // `rank` and `gpu` filled in.
  PowerTraceData Finish(int rank, const std::string& gpu);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string PowerTraceToJson(const PowerTraceData& trace);
// Throws model::InputError naming `source` and the field.
PowerTraceData PowerTraceFromJson(const std::string& text, const std::string& source);
// The trace file at `path` (model::ReadWholeFile's limits and errors).
PowerTraceData ReadPowerTraceFile(const std::string& path);

struct JoinedTrace {
  double dt_s = 0;                // bin width: the coarsest trace's interval
  double start_unix_s = 0;        // the first bin's start, on the first trace's clock
  std::vector<double> total_w;    // the job's power in each bin
  std::vector<int> ranks;         // of the traces, in the order given
  std::vector<double> offset_s;   // each trace's clock minus the first's, as applied
  std::vector<int> common_steps;  // iterations each trace shares with the first (0: clock only)
  std::vector<std::vector<double>> rank_w;  // [trace][bin]
};

// `align_on_steps` false: every trace on its own clock. Throws
// model::InputError when fewer than one trace is given, two traces have
// the same rank, or the traces share no time window once aligned.
JoinedTrace JoinPowerTraces(const std::vector<PowerTraceData>& traces, bool align_on_steps = true);

}  // namespace joulepipe::monitor
