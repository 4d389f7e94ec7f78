// PowerTrace against a fake meter (recording, step marks, the end of the
// window), its JSON both ways, and the join of rank traces on their step
// ends.
#include "joulepipe/monitor/power_trace.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::monitor {
namespace {

class RampMeter : public GpuMeter {
 public:
  int index() const override { return 0; }
  std::optional<std::uint64_t> ReadEnergyMj() const override { return std::nullopt; }
  double ReadPowerW() const override {
    const int n = reads.fetch_add(1);
    if (fail_every > 0 && n % fail_every == fail_every - 1) throw std::runtime_error("lost");
    return 100 + n;
  }
  mutable std::atomic<int> reads{0};
  int fail_every = 0;
};

TEST(PowerTrace, RecordsUntilItsDurationThenStops) {
  auto meter = std::make_unique<RampMeter>();
  meter->fail_every = 5;
  PowerTraceOptions o;
  o.interval_s = 0.01;
  o.duration_s = 0.3;
  PowerTrace trace(std::move(meter), o);
  trace.MarkStepEnd(0);
  trace.MarkStepEnd(0);  // not above the last: ignored
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  trace.MarkStepEnd(1);
  const auto start = std::chrono::steady_clock::now();
  while (!trace.done() && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(trace.done());
  trace.MarkStepEnd(2);  // after the window: ignored
  const PowerTraceData d = trace.Finish(3, "GPU X");
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.gpu, "GPU X");
  // About 31 ticks; a loaded machine may read fewer, never more.
  EXPECT_GE(d.t_s.size() + d.read_errors, 10u);
  EXPECT_LE(d.t_s.size() + d.read_errors, 32u);
  EXPECT_GE(d.read_errors, 1u);
  EXPECT_TRUE(std::is_sorted(d.t_s.begin(), d.t_s.end()));
  ASSERT_EQ(d.step_ends.size(), 2u);
  EXPECT_EQ(d.step_ends[1].iteration, 1);
  EXPECT_GT(d.step_ends[1].t_s, d.step_ends[0].t_s);
  // A Unix time, not a steady clock's.
  EXPECT_GT(d.t_s.front(), 1.7e9);
}

TEST(PowerTrace, BadOptionsNameTheirField) {
  PowerTraceOptions o;
  o.interval_s = 0;
  try {
    PowerTrace t(std::make_unique<RampMeter>(), o);
    ADD_FAILURE() << "accepted a zero interval";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "PowerTraceOptions::interval_s");
  }
  o.interval_s = 0.001;
  o.duration_s = 20'000;  // 20 M samples
  try {
    PowerTrace t(std::make_unique<RampMeter>(), o);
    ADD_FAILURE() << "accepted 20 M samples";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the 8640000 a trace holds"), std::string::npos)
        << e.what();
  }
}

PowerTraceData Synthetic(int rank, double clock_offset_s, double phase_w) {
  // 10 s at 10 ms of a square wave: 400 W computing for 0.8 s, then 100 W
  // for 0.2 s at the all-reduce; a step ends at each all-reduce's end.
  PowerTraceData t;
  t.rank = rank;
  t.interval_s = 0.01;
  const double t0 = 1.8e9;
  for (int i = 0; i < 1000; ++i) {
    const double at = i * 0.01;
    const double in = std::fmod(at, 1.0);
    t.t_s.push_back(t0 + at + clock_offset_s);
    t.watts.push_back((in < 0.8 ? 400 : 100) + phase_w);
  }
  for (int k = 0; k < 9; ++k) t.step_ends.push_back({k, t0 + k + 1.0 + clock_offset_s});
  return t;
}

TEST(PowerTrace, JoinAlignsRanksOnTheirStepEnds) {
  // Rank 1's clock is 0.37 s ahead: on its own clock its swings fall
  // between rank 0's; aligned on the step ends they coincide.
  const std::vector<PowerTraceData> traces = {Synthetic(0, 0, 0), Synthetic(1, 0.37, 10)};
  const JoinedTrace j = JoinPowerTraces(traces);
  ASSERT_EQ(j.offset_s.size(), 2u);
  EXPECT_NEAR(j.offset_s[1], 0.37, 1e-6);  // Unix seconds: double's 0.2 us
  EXPECT_EQ(j.common_steps[1], 9);
  EXPECT_DOUBLE_EQ(j.dt_s, 0.01);
  double peak = 0, trough = 1e9;
  for (double w : j.total_w) {
    peak = std::max(peak, w);
    trough = std::min(trough, w);
  }
  EXPECT_DOUBLE_EQ(peak, 810);    // both computing
  EXPECT_DOUBLE_EQ(trough, 210);  // both at the all-reduce
  // On their clocks the troughs do not meet.
  const JoinedTrace raw = JoinPowerTraces(traces, /*align_on_steps=*/false);
  double raw_trough = 1e9;
  for (double w : raw.total_w) raw_trough = std::min(raw_trough, w);
  EXPECT_DOUBLE_EQ(raw_trough, 510);

  // JSON both ways keeps what the join uses.
  const PowerTraceData back = PowerTraceFromJson(PowerTraceToJson(traces[1]), "rank1.json");
  EXPECT_EQ(back.rank, 1);
  ASSERT_EQ(back.t_s.size(), traces[1].t_s.size());
  EXPECT_NEAR(back.t_s[5], traces[1].t_s[5], 1e-6);
  EXPECT_EQ(back.step_ends.size(), 9u);
  EXPECT_NEAR(JoinPowerTraces({traces[0], back}).offset_s[1], 0.37, 1e-6);
}

TEST(PowerTrace, JoinRefusesWhatItCannotJoin) {
  const PowerTraceData a = Synthetic(0, 0, 0);
  EXPECT_THROW(JoinPowerTraces({a, a}), model::InputError);  // the same rank twice
  PowerTraceData later = Synthetic(1, 100, 0);
  later.step_ends.clear();  // no common iteration: on its clock, 100 s later
  try {
    JoinPowerTraces({a, later});
    ADD_FAILURE() << "joined traces 100 s apart";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("share no window"), std::string::npos) << e.what();
  }
  try {
    PowerTraceFromJson(R"({"version":1,"kind":"profile"})", "x.json");
    ADD_FAILURE() << "read a non-trace";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: kind must be \"power_trace\""), std::string::npos)
        << e.what();
  }
  try {
    PowerTraceFromJson(
        R"({"version":1,"kind":"power_trace","rank":0,"interval_s":0.01,"samples":[[2,5],[1,5]],"step_ends":[]})",
        "y.json");
    ADD_FAILURE() << "read samples out of order";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("samples[1] has a time before the sample before it"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace joulepipe::monitor
