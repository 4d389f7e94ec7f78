#include "joulepipe/monitor/power_trace.hpp"

#include "joulepipe/gpu/nvml.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/read_file.hpp"

namespace joulepipe::monitor {

namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void CheckOptions(const PowerTraceOptions& o) {
  if (!(o.interval_s >= kMinTraceIntervalS && o.interval_s <= kMaxTraceIntervalS)) {
    throw model::InputError("PowerTraceOptions::interval_s",
                            model::Format("PowerTraceOptions::interval_s must be %g..%g s (got %g)",
                                          kMinTraceIntervalS, kMaxTraceIntervalS, o.interval_s));
  }
  if (!(o.duration_s > 0 && o.duration_s <= kMaxTraceS)) {
    throw model::InputError(
        "PowerTraceOptions::duration_s",
        model::Format("PowerTraceOptions::duration_s must be seconds > 0, at most a day (got %g)",
                      o.duration_s));
  }
  if (o.duration_s / o.interval_s > static_cast<double>(kMaxTraceSamples)) {
    throw model::InputError(
        "PowerTraceOptions::duration_s",
        model::Format("PowerTraceOptions::duration_s / interval_s is %.0f samples, more than "
                      "the %zu a trace holds; record for less time or less often",
                      o.duration_s / o.interval_s, kMaxTraceSamples));
  }
}

}  // namespace

struct PowerTrace::State {
  std::unique_ptr<GpuMeter> meter;
  PowerTraceOptions options;
  mutable std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;      // guarded by mutex
  bool finished = false;  // the thread ended (duration passed or stopped)
  PowerTraceData data;    // guarded by mutex
  double end_unix_s = 0;
  std::thread thread;

  void Run() {
    using Steady = std::chrono::steady_clock;
    const auto period = std::chrono::duration_cast<Steady::duration>(
        std::chrono::duration<double>(options.interval_s));
    const auto start = Steady::now();
    const auto end = start + std::chrono::duration_cast<Steady::duration>(
                                 std::chrono::duration<double>(options.duration_s));
    auto next = start;
    std::unique_lock<std::mutex> lock(mutex);
    while (!stop && next <= end) {
      lock.unlock();
      double watts = 0;
      bool ok = true;
      try {
        watts = meter->ReadPowerW();
        ok = std::isfinite(watts) && watts >= 0;
      } catch (...) {
        ok = false;
      }
      const double t = UnixNow();
      lock.lock();
      if (ok) {
        data.t_s.push_back(t);
        data.watts.push_back(watts);
      } else {
        ++data.read_errors;
      }
      next += period;
      // A reading that took longer than a period: the next tick from now,
      // never a burst of catch-up readings.
      const auto now = Steady::now();
      if (next < now) next = now + period;
      wake.wait_until(lock, std::min(next, end + period), [this] { return stop; });
    }
    finished = true;
  }
};

PowerTrace::PowerTrace(std::unique_ptr<GpuMeter> meter, PowerTraceOptions options)
    : state_(std::make_unique<State>()) {
  if (!meter) throw std::invalid_argument("PowerTrace: meter is null");
  CheckOptions(options);
  state_->meter = std::move(meter);
  state_->options = options;
  state_->data.interval_s = options.interval_s;
  state_->data.t_s.reserve(
      static_cast<std::size_t>(std::min(options.duration_s / options.interval_s + 2, 1e5)));
  state_->end_unix_s = UnixNow() + options.duration_s;
  state_->thread = std::thread([s = state_.get()] { s->Run(); });
}

PowerTrace::~PowerTrace() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

void PowerTrace::MarkStepEnd(std::int64_t iteration) noexcept {
  const double t = UnixNow();
  try {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->finished || state_->stop || t > state_->end_unix_s) return;
    auto& ends = state_->data.step_ends;
    if (!ends.empty() && iteration <= ends.back().iteration) return;
    ends.push_back({iteration, t});
  } catch (...) {
  }
}

bool PowerTrace::done() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->finished;
}

PowerTraceData PowerTrace::Finish(int rank, const std::string& gpu) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  std::lock_guard<std::mutex> lock(state_->mutex);
  PowerTraceData out = state_->data;
  out.rank = rank;
  out.gpu = gpu;
  try {
    out.simulated = gpu::Nvml().simulated;
  } catch (const std::exception&) {
    out.simulated = false;  // no NVML: the meter was another's
  }
  return out;
}

// ---- JSON -------------------------------------------------------------------

std::string PowerTraceToJson(const PowerTraceData& t) {
  // Compact: a day of 10 ms samples is 8.6 M pairs. %.6f Unix seconds keeps
  // microseconds; %.3f W is below any board's resolution.
  std::string out = model::Format(
      "{\"version\":1,\"kind\":\"power_trace\",\"rank\":%d,\"gpu\":%s,\"interval_s\":%.17g,"
      "\"read_errors\":%llu,%s\n\"samples\":[",
      t.rank, nlohmann::json(t.gpu).dump().c_str(), t.interval_s,
      static_cast<unsigned long long>(t.read_errors), t.simulated ? "\"simulated\":true," : "");
  for (std::size_t i = 0; i < t.t_s.size(); ++i) {
    out += model::Format("%s[%.6f,%.3f]", i == 0 ? "" : (i % 8 == 0 ? ",\n" : ","), t.t_s[i],
                         t.watts[i]);
  }
  out += "],\n\"step_ends\":[";
  for (std::size_t i = 0; i < t.step_ends.size(); ++i) {
    out += model::Format("%s[%lld,%.6f]", i == 0 ? "" : ",",
                         static_cast<long long>(t.step_ends[i].iteration), t.step_ends[i].t_s);
  }
  out += "]}\n";
  return out;
}

PowerTraceData PowerTraceFromJson(const std::string& text, const std::string& source) {
  const nlohmann::json root = model::ParseJsonBounded(text, source);
  const auto fail = [&source](const std::string& field, const std::string& problem) {
    throw model::InputError(field, source + ": " + field + " " + problem);
  };
  if (!root.is_object()) fail("the top level", "must be a JSON object (a power trace)");
  const auto need = [&](const char* key) -> const nlohmann::json& {
    auto it = root.find(key);
    if (it == root.end()) {
      fail(key, std::string("is missing; is this a joulepipe power trace (power_trace=)?"));
    }
    return *it;
  };
  if (!need("kind").is_string() || need("kind").get<std::string>() != "power_trace") {
    fail("kind", "must be \"power_trace\", got " + model::Excerpt(need("kind")));
  }
  if (!need("version").is_number_integer() || need("version").get<std::int64_t>() != 1) {
    fail("version", "must be 1 (this joulepipe reads power traces of version 1), got " +
                        model::Excerpt(need("version")));
  }
  PowerTraceData t;
  const nlohmann::json& rank = need("rank");
  if (!rank.is_number_integer() || rank.get<std::int64_t>() < 0 ||
      rank.get<std::int64_t>() > std::numeric_limits<int>::max()) {
    fail("rank", "must be an integer >= 0, got " + model::Excerpt(rank));
  }
  t.rank = rank.get<int>();
  if (root.contains("gpu") && root["gpu"].is_string()) t.gpu = root["gpu"].get<std::string>();
  const nlohmann::json& interval = need("interval_s");
  if (!interval.is_number() || !(interval.get<double>() >= kMinTraceIntervalS &&
                                 interval.get<double>() <= kMaxTraceIntervalS)) {
    fail("interval_s",
         model::Format("must be %g..%g s, got ", kMinTraceIntervalS, kMaxTraceIntervalS) +
             model::Excerpt(interval));
  }
  t.interval_s = interval.get<double>();
  if (root.contains("simulated") && root["simulated"].is_boolean()) {
    t.simulated = root["simulated"].get<bool>();
  }
  if (root.contains("read_errors") && root["read_errors"].is_number_unsigned()) {
    t.read_errors = root["read_errors"].get<std::uint64_t>();
  }
  const nlohmann::json& samples = need("samples");
  if (!samples.is_array() || samples.size() > kMaxTraceSamples) {
    fail("samples", "must be an array of at most 8,640,000 [unix_s, watts] pairs");
  }
  t.t_s.reserve(samples.size());
  t.watts.reserve(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const nlohmann::json& s = samples[i];
    const std::string path = "samples[" + std::to_string(i) + "]";
    if (!s.is_array() || s.size() != 2 || !s[0].is_number() || !s[1].is_number()) {
      fail(path, "must be a [unix_s, watts] pair, got " + model::Excerpt(s));
    }
    const double at = s[0].get<double>(), w = s[1].get<double>();
    if (!std::isfinite(at) || (!t.t_s.empty() && at < t.t_s.back())) {
      fail(path, "has a time before the sample before it (samples must ascend in time)");
    }
    if (!(std::isfinite(w) && w >= 0 && w <= model::kMaxInstructionPowerW)) {
      fail(path, "has a power outside 0..5000 W: " + model::Excerpt(s[1]));
    }
    t.t_s.push_back(at);
    t.watts.push_back(w);
  }
  const nlohmann::json& ends = need("step_ends");
  if (!ends.is_array()) fail("step_ends", "must be an array of [iteration, unix_s] pairs");
  for (std::size_t i = 0; i < ends.size(); ++i) {
    const nlohmann::json& e = ends[i];
    const std::string path = "step_ends[" + std::to_string(i) + "]";
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number()) {
      fail(path, "must be an [iteration, unix_s] pair, got " + model::Excerpt(e));
    }
    PowerTraceData::StepEnd end{e[0].get<std::int64_t>(), e[1].get<double>()};
    if (!std::isfinite(end.t_s) ||
        (!t.step_ends.empty() &&
         (end.iteration <= t.step_ends.back().iteration || end.t_s < t.step_ends.back().t_s))) {
      fail(path, "must come after the step end before it, in iteration and in time");
    }
    t.step_ends.push_back(end);
  }
  return t;
}

PowerTraceData ReadPowerTraceFile(const std::string& path) {
  return PowerTraceFromJson(model::ReadWholeFile(path, "power trace"), path);
}

// ---- Joining ----------------------------------------------------------------

namespace {

// The median of (b's step end - a's step end) over the iterations both
// marked, and how many there were.
std::pair<double, int> StepOffset(const PowerTraceData& a, const PowerTraceData& b) {
  std::vector<double> d;
  std::size_t i = 0, j = 0;
  while (i < a.step_ends.size() && j < b.step_ends.size()) {
    if (a.step_ends[i].iteration < b.step_ends[j].iteration) {
      ++i;
    } else if (a.step_ends[i].iteration > b.step_ends[j].iteration) {
      ++j;
    } else {
      d.push_back(b.step_ends[j].t_s - a.step_ends[i].t_s);
      ++i;
      ++j;
    }
  }
  if (d.empty()) return {0.0, 0};
  std::sort(d.begin(), d.end());
  const std::size_t n = d.size();
  const double median = n % 2 == 1 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
  return {median, static_cast<int>(n)};
}

}  // namespace

JoinedTrace JoinPowerTraces(const std::vector<PowerTraceData>& traces, bool align_on_steps) {
  if (traces.empty()) {
    throw model::InputError("traces", "no power trace to join; give every rank's trace file");
  }
  JoinedTrace out;
  for (std::size_t k = 0; k < traces.size(); ++k) {
    for (std::size_t m = 0; m < k; ++m) {
      if (traces[m].rank == traces[k].rank) {
        throw model::InputError("rank", "two traces are of rank " + std::to_string(traces[k].rank) +
                                            " (the same file twice?); give each rank's trace once");
      }
    }
    if (traces[k].t_s.empty()) {
      throw model::InputError("samples", "the trace of rank " + std::to_string(traces[k].rank) +
                                             " has no sample; it recorded nothing");
    }
    out.ranks.push_back(traces[k].rank);
    out.dt_s = std::max(out.dt_s, traces[k].interval_s);
    const auto [offset, common] =
        align_on_steps && k > 0 ? StepOffset(traces[0], traces[k]) : std::pair<double, int>{0, 0};
    out.offset_s.push_back(offset);
    out.common_steps.push_back(k == 0 ? static_cast<int>(traces[0].step_ends.size()) : common);
  }
  // The common window, on the first trace's clock.
  double begin = -std::numeric_limits<double>::infinity();
  double end = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < traces.size(); ++k) {
    begin = std::max(begin, traces[k].t_s.front() - out.offset_s[k]);
    end = std::min(end, traces[k].t_s.back() - out.offset_s[k]);
  }
  if (!(end - begin >= out.dt_s)) {
    throw model::InputError(
        "samples", model::Format("the traces share no window of one interval (%.3g s) once "
                                 "aligned; were they recorded at the same time, by one job?",
                                 out.dt_s));
  }
  const auto bins = static_cast<std::size_t>(std::floor((end - begin) / out.dt_s));
  out.start_unix_s = begin;
  out.total_w.assign(bins, 0.0);
  out.rank_w.assign(traces.size(), std::vector<double>(bins, 0.0));
  for (std::size_t k = 0; k < traces.size(); ++k) {
    const PowerTraceData& t = traces[k];
    std::size_t i = 0;  // the last sample at or before the bin's middle
    for (std::size_t b = 0; b < bins; ++b) {
      const double at = begin + (static_cast<double>(b) + 0.5) * out.dt_s + out.offset_s[k];
      while (i + 1 < t.t_s.size() && t.t_s[i + 1] <= at) ++i;
      out.rank_w[k][b] = t.watts[i];
      out.total_w[b] += t.watts[i];
    }
  }
  return out;
}

}  // namespace joulepipe::monitor
