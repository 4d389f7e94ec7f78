#include "joulepipe/runtime/profiler.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
#include <utility>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/model/version.hpp"

namespace joulepipe::runtime {
namespace {

constexpr double kMadToSigma = 1.4826;  // MAD -> standard deviation (normal)
constexpr double kZ95 = 1.96;

// Median of v (sorts it). 0 for an empty vector.
double MedianInPlace(std::vector<double>& v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Trimmed mean of sorted v: drops floor(trim * n) values at each end.
double TrimmedMeanSorted(const std::vector<double>& v, double trim) {
  const size_t n = v.size();
  const size_t cut = static_cast<size_t>(std::floor(trim * static_cast<double>(n)));
  double sum = 0;
  for (size_t i = cut; i < n - cut; ++i) sum += v[i];
  return sum / static_cast<double>(n - 2 * cut);
}

// Robust relative standard deviation of v: 1.4826 * MAD / median. Sorts v;
// `scratch` holds the deviations.
double RelativeSpread(std::vector<double>& v, std::vector<double>& scratch) {
  const double median = MedianInPlace(v);
  if (v.size() < 2 || median <= 0) return 0;
  scratch.clear();
  for (double x : v) scratch.push_back(std::fabs(x - median));
  return kMadToSigma * MedianInPlace(scratch) / median;
}

double Confidence(double spread, size_t samples) {
  return kZ95 * spread / std::sqrt(static_cast<double>(samples));
}

void SortRows(std::vector<ProfileRow>& rows) {
  std::sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    if (a.stage != b.stage) return a.stage < b.stage;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.mhz > b.mhz;
  });
}

// Rows of one (stage, kind, clock): sample-weighted means; spreads and
// confidence from the worst (conservative); the requests of all of them.
ProfileRow CombineRows(const std::vector<const ProfileRow*>& rows) {
  ProfileRow m = *rows.front();
  if (rows.size() == 1) return m;
  double n = 0, t = 0, e = 0;
  m.time_spread = m.energy_spread = m.confidence = 0;
  m.approximate = false;
  m.requested_mhz.clear();
  for (const ProfileRow* row : rows) {
    const double w = std::max(1, row->samples);
    n += w;
    t += w * row->time_s;
    e += w * row->energy_j;
    m.time_spread = std::max(m.time_spread, row->time_spread);
    m.energy_spread = std::max(m.energy_spread, row->energy_spread);
    m.confidence = std::max(m.confidence, row->confidence);
    m.approximate = m.approximate || row->approximate;
    m.requested_mhz.insert(m.requested_mhz.end(), row->requested_mhz.begin(),
                           row->requested_mhz.end());
  }
  std::sort(m.requested_mhz.begin(), m.requested_mhz.end(), std::greater<>());
  m.requested_mhz.erase(std::unique(m.requested_mhz.begin(), m.requested_mhz.end()),
                        m.requested_mhz.end());
  m.samples = static_cast<int>(n);
  m.time_s = t / n;
  m.energy_j = e / n;
  return m;
}

// Rows grouped by (stage, kind, mhz), each group combined, sorted.
std::vector<ProfileRow> CombineByClock(const std::vector<const ProfileRow*>& rows) {
  std::map<std::tuple<int, model::Kind, int>, std::vector<const ProfileRow*>> by_key;
  for (const ProfileRow* row : rows) by_key[{row->stage, row->kind, row->mhz}].push_back(row);
  std::vector<ProfileRow> out;
  for (const auto& [key, group] : by_key) out.push_back(CombineRows(group));
  SortRows(out);
  return out;
}

void Summarise(ProfileReport& report) {
  report.max_confidence = report.max_time_spread = 0;
  report.approximate_rows = 0;
  for (const ProfileRow& r : report.rows) {
    report.max_confidence = std::max(report.max_confidence, r.confidence);
    report.max_time_spread = std::max(report.max_time_spread, r.time_spread);
    report.approximate_rows += r.approximate ? 1 : 0;
  }
}

}  // namespace

std::vector<int> CandidateClocks(const std::vector<int>& supported, double floor_fraction,
                                 int stride_mhz, int floor_mhz) {
  std::vector<int> all = supported;
  std::sort(all.begin(), all.end(), std::greater<>());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  if (all.empty()) return {};
  const int max = all.front();
  const double floor = std::max(floor_fraction * max, static_cast<double>(floor_mhz));
  std::vector<int> out;
  for (int mhz : all) {
    if (mhz < floor) break;
    // Keep a clock once it is at least `stride_mhz` below the last kept one.
    if (out.empty() || stride_mhz <= 0 || out.back() - mhz >= stride_mhz) out.push_back(mhz);
  }
  return out;
}

InSituProfiler::InSituProfiler(ProfilerOptions options) : options_(std::move(options)) {
  const auto& c = options_.clocks;
  if (c.empty()) throw model::InputError("in-situ profiler: no clocks to sweep");
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] <= 0 || (i > 0 && c[i] >= c[i - 1]))
      throw model::InputError(
          "in-situ profiler: clocks must be positive and strictly descending (highest first)");
  }
  if (!(options_.trim >= 0 && options_.trim < 0.5))
    throw model::InputError("in-situ profiler: trim must be in [0, 0.5)");
  if (options_.samples_per_clock < 0 || options_.warmup_iterations < 0 ||
      options_.stop_after_rises < 0 || options_.stage < 0 || options_.max_repeats < 0 ||
      options_.remeasure_iterations < 0 || !(options_.min_wait_s >= 0) ||
      !(options_.repeat_above >= 0))
    throw model::InputError("in-situ profiler: negative count, stage or wait threshold");
  const size_t capacity = std::max<size_t>(256, static_cast<size_t>(options_.samples_per_clock));
  for (KindState& k : kinds_) {
    k.times.reserve(capacity);
    k.energies.reserve(capacity);
    k.actual_mhz.reserve(capacity);
  }
  wait_powers_.reserve(kWaitCapacity);
  scratch_.reserve(capacity);
}

int InSituProfiler::ClockFor(model::Kind kind) {
  const KindState& k = kinds_[static_cast<size_t>(kind)];
  if (iterations_ < options_.warmup_iterations || k.finished) return options_.clocks.front();
  return options_.clocks[k.clock_index];
}

void InSituProfiler::OnInstruction(model::Kind kind, int mhz, double seconds, double joules,
                                   bool approximate, int actual_mhz) {
  KindState& k = kinds_[static_cast<size_t>(kind)];
  if (iterations_ < options_.warmup_iterations || k.finished) return;
  // A sample at another clock (the agent fell back, or a request was
  // overridden) says nothing about this clock.
  if (mhz != options_.clocks[k.clock_index]) return;
  if (!(seconds > 0) || !(joules > 0) || !std::isfinite(seconds) || !std::isfinite(joules)) return;
  if (!k.seen_this_step) {
    k.seen_this_step = true;
    // The clock of this kind changed at this instruction (every iteration
    // after a finished clock starts on a new one); drop the first sample.
    if (options_.drop_first_after_change && k.dropped == 0) {
      k.dropped = 1;
      return;
    }
  }
  if (k.times.size() == k.times.capacity()) return;  // enough; never reallocate here
  k.times.push_back(seconds);
  k.energies.push_back(joules);
  if (actual_mhz > 0) k.actual_mhz.push_back(actual_mhz);
  k.approximate = k.approximate || approximate;
}

void InSituProfiler::OnWait(double seconds, double joules) {
  if (!(seconds >= options_.min_wait_s) || !(joules > 0) || !std::isfinite(joules)) return;
  // A bounded ring of the latest waits (no allocation after the first
  // kWaitCapacity).
  if (wait_powers_.size() < kWaitCapacity) {
    wait_powers_.push_back(joules / seconds);
  } else {
    wait_powers_[waits_seen_ % kWaitCapacity] = joules / seconds;
  }
  ++waits_seen_;
}

void InSituProfiler::ClearSamples(KindState& k) {
  k.times.clear();
  k.energies.clear();
  k.actual_mhz.clear();
  k.approximate = false;
  k.dropped = 0;
  k.repeats = 0;
}

void InSituProfiler::FinishClock(model::Kind kind, KindState& k) {
  ProfileRow row;
  row.stage = options_.stage;
  row.kind = kind;
  row.mhz = options_.clocks[k.clock_index];
  row.requested_mhz = {row.mhz};
  if (!k.actual_mhz.empty()) {
    // The clock it ran at: the median report (a lock is a ceiling, so a
    // reading above the request is the reading's noise, not a faster run).
    std::sort(k.actual_mhz.begin(), k.actual_mhz.end());
    row.mhz = std::min(row.mhz, k.actual_mhz[k.actual_mhz.size() / 2]);
  }
  row.samples = static_cast<int>(k.times.size());
  row.approximate = k.approximate;
  row.time_spread = RelativeSpread(k.times, scratch_);  // sorts
  row.energy_spread = RelativeSpread(k.energies, scratch_);
  row.time_s = TrimmedMeanSorted(k.times, options_.trim);
  row.energy_j = TrimmedMeanSorted(k.energies, options_.trim);
  row.confidence = Confidence(row.energy_spread, k.times.size());
  if (k.remeasuring) {
    // The new samples replace the row this clock was requested for.
    const int requested = options_.clocks[k.clock_index];
    std::erase_if(rows_, [&](const ProfileRow& r) {
      return r.kind == kind && r.requested_mhz.front() == requested;
    });
    rows_.push_back(row);
    ClearSamples(k);
    if (k.redo.empty()) {
      k.finished = true;
      k.remeasuring = false;
    } else {
      k.clock_index = k.redo.front();
      k.redo.erase(k.redo.begin());
    }
    return;
  }
  rows_.push_back(row);

  // Early stop: energy above the lowest so far for stop_after_rises
  // consecutive clocks. Only a row that ran below the lowest-energy row's
  // clock counts: a throttled GPU runs several requests at one clock, and
  // their energies differ by noise alone, which is no sign that lower
  // clocks stop paying (it ended sweeps before any lower clock ran).
  if (k.lowest_energy_j == 0 || row.energy_j < k.lowest_energy_j) {
    k.lowest_energy_j = row.energy_j;
    k.lowest_mhz = row.mhz;
    k.rises = 0;
  } else if (row.mhz < k.lowest_mhz) {
    ++k.rises;
  }
  ClearSamples(k);
  if ((options_.stop_after_rises > 0 && k.rises >= options_.stop_after_rises) ||
      k.clock_index + 1 >= options_.clocks.size()) {
    k.finished = true;
  } else {
    ++k.clock_index;
  }
}

void InSituProfiler::OnStepEnd() {
  const bool warmup = iterations_ < options_.warmup_iterations;
  ++iterations_;
  for (size_t i = 0; i < kinds_.size(); ++i) {
    KindState& k = kinds_[i];
    k.seen_this_step = false;
    if (warmup || k.finished) continue;
    const size_t wanted = options_.samples_per_clock > 0
                              ? static_cast<size_t>(options_.samples_per_clock)
                              : size_t{1};
    if (k.times.size() < wanted) continue;
    if (k.remeasuring && k.repeats + 1 < options_.remeasure_iterations) {
      ++k.repeats;  // a re-measure takes its iterations whatever the spread
      continue;
    }
    if (!k.remeasuring && k.repeats < options_.max_repeats) {
      std::vector<double> energies = k.energies;  // once per kind per iteration
      if (Confidence(RelativeSpread(energies, scratch_), energies.size()) > options_.repeat_above) {
        ++k.repeats;
        continue;
      }
    }
    FinishClock(static_cast<model::Kind>(i), k);
  }
  if (!kinds_[0].finished || !kinds_[1].finished) return;
  if (!remeasure_queued_) {
    remeasure_queued_ = true;
    if (QueueRemeasures()) return;
  }
  done_.store(true, std::memory_order_release);
}

int InSituProfiler::IterationsLeft() const {
  if (done()) return 0;
  const int warmup = std::max(0, options_.warmup_iterations - iterations_);
  int left = 0;
  for (const KindState& k : kinds_) {
    if (k.finished && k.redo.empty()) continue;
    const int clocks = k.finished ? 0 : static_cast<int>(options_.clocks.size() - k.clock_index);
    const int remeasures =
        static_cast<int>(k.redo.size()) * std::max(1, options_.remeasure_iterations);
    left = std::max(left, clocks + remeasures);
  }
  return warmup + std::max(left, 1);
}

SweepLength SweepIterations(const ProfilerOptions& options) {
  const int clocks = static_cast<int>(options.clocks.size());
  const int warmup = std::max(0, options.warmup_iterations);
  return {warmup + clocks, warmup + clocks * (1 + std::max(0, options.max_repeats))};
}

bool InSituProfiler::QueueRemeasures() {
  if (options_.remeasure_iterations <= 0) return false;
  std::vector<model::ImplausibleRow> odd;
  try {
    odd = model::ImplausibleRows(ToProfile(Report()));
  } catch (const std::exception&) {
    return false;  // rows the profile cannot hold: the planner says why
  }
  for (const model::ImplausibleRow& bad : odd) {
    KindState& k = kinds_[static_cast<size_t>(bad.kind)];
    // The clocks requested for the row (a throttled GPU runs several
    // requests at the clock the row names).
    for (const ProfileRow& r : rows_) {
      if (r.kind != bad.kind || r.mhz != bad.mhz) continue;
      const auto at =
          std::find(options_.clocks.begin(), options_.clocks.end(), r.requested_mhz.front());
      if (at == options_.clocks.end()) continue;
      const size_t index = static_cast<size_t>(at - options_.clocks.begin());
      if (std::find(k.redo.begin(), k.redo.end(), index) == k.redo.end()) k.redo.push_back(index);
    }
    notes_.push_back(bad.why + model::Format("; measured again over %d iterations before planning",
                                             options_.remeasure_iterations));
  }
  bool queued = false;
  for (KindState& k : kinds_) {
    if (k.redo.empty()) continue;
    std::sort(k.redo.begin(), k.redo.end());  // highest clock first
    k.clock_index = k.redo.front();
    k.redo.erase(k.redo.begin());
    k.finished = false;
    k.remeasuring = true;
    queued = true;
  }
  return queued;
}

ProfileReport InSituProfiler::Report() const {
  ProfileReport report;
  std::vector<const ProfileRow*> rows;
  for (const ProfileRow& row : rows_) rows.push_back(&row);
  report.rows = CombineByClock(rows);
  for (const ProfileRow& row : report.rows) {
    if (row.requested_mhz.size() == 1 && row.requested_mhz.front() == row.mhz) continue;
    const std::vector<int>& asked = row.requested_mhz;
    const std::string clocks = asked.size() == 1 ? std::to_string(asked.front()) + " MHz"
                                                 : std::to_string(asked.size()) + " clocks from " +
                                                       std::to_string(asked.front()) + " to " +
                                                       std::to_string(asked.back()) + " MHz";
    report.notes.push_back(
        "stage " + std::to_string(row.stage) + " " + std::string(model::KindName(row.kind)) + ": " +
        clocks + " requested, the GPU ran " + std::to_string(row.mhz) +
        " MHz (throttled by its power or thermal cap): one row at " + std::to_string(row.mhz) +
        " MHz, so no plan asks for a clock it " + "does not run");
  }
  report.notes.insert(report.notes.end(), notes_.begin(), notes_.end());
  std::vector<double> powers = wait_powers_;
  report.p_block_samples = static_cast<int>(powers.size());
  report.p_block_w = MedianInPlace(powers);
  report.iterations = iterations_;
  report.gpu = options_.gpu;
  Summarise(report);
  return report;
}

ProfileReport MergeReports(const std::vector<ProfileReport>& reports) {
  ProfileReport merged;
  std::vector<const ProfileRow*> rows;
  std::vector<double> p_blocks;
  std::vector<std::string> gpus;  // distinct, in order of appearance
  for (const ProfileReport& r : reports) {
    for (const ProfileRow& row : r.rows) rows.push_back(&row);
    for (const std::string& note : r.notes) {
      if (std::find(merged.notes.begin(), merged.notes.end(), note) == merged.notes.end()) {
        merged.notes.push_back(note);
      }
    }
    if (r.p_block_samples > 0) p_blocks.push_back(r.p_block_w);
    merged.p_block_samples += r.p_block_samples;
    merged.iterations = std::max(merged.iterations, r.iterations);
    if (!r.gpu.empty() && std::find(gpus.begin(), gpus.end(), r.gpu) == gpus.end()) {
      gpus.push_back(r.gpu);
    }
  }
  // Ranks of one job normally share a GPU type; a mixed job names them all.
  for (const std::string& name : gpus) merged.gpu += (merged.gpu.empty() ? "" : ", ") + name;
  // Replicas of one stage (data-parallel ranks): combined per clock.
  merged.rows = CombineByClock(rows);
  merged.p_block_w = MedianInPlace(p_blocks);
  Summarise(merged);
  return merged;
}

model::Profile ToProfile(const ProfileReport& report) {
  model::Profile profile;
  for (const ProfileRow& r : report.rows) {
    model::ClockPoint point{r.mhz, r.time_s, r.energy_j};
    point.samples = r.samples;
    point.time_spread = r.time_spread;
    point.energy_spread = r.energy_spread;
    point.confidence = r.confidence;
    point.approximate = r.approximate;
    profile.Add(r.stage, r.kind, point, "in-situ profile");
  }
  model::ProfileMetadata& m = profile.metadata;
  m.gpu = report.gpu;
  if (report.p_block_samples > 0) {
    try {
      model::CheckPBlock(report.p_block_w, "ProfileReport::p_block_w");
      m.p_block_w = report.p_block_w;
    } catch (const model::InputError&) {
      // Implausible (a broken power reading): the profile goes without it.
    }
  }
  m.source = "measured";
  m.date = model::IsoUtcNow();
  m.joulepipe_version = std::string(model::Version());
  return profile;
}

std::string ProfileCsv(const ProfileReport& report) {
  return model::ProfileToCsv(ToProfile(report));
}

void WriteProfileCsv(const std::string& path, const ProfileReport& report) {
  model::WriteProfileCsv(path, ToProfile(report));
}

}  // namespace joulepipe::runtime
