// The discrete-event training simulator (simulator.hpp).
//
// The hot loop is one pass over each pipeline's DAG in topological order per
// iteration: an instruction's end is the latest end of its predecessors (plus
// the edge's P2P latency) plus its duration. Everything it reads is a flat
// array indexed by topological position, prepared once per run for each
// candidate plan that the policy actually deploys; nothing is allocated per
// instruction. Energy needs no per-instruction work at all: a GPU's energy
// is sum e + P_block * (T - sum t) (simulator.hpp), so per plan and stage the
// two sums are precomputed and each GPU costs O(1) per iteration.
#include "joulepipe/sim/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

#include "counter_random.hpp"
#include "job_checks.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::sim {

namespace {

using model::InputError;

constexpr std::uint64_t kSpeedStream = 1;
constexpr std::uint64_t kStallStream = 2;
constexpr double kTruncation = 3.0;  // |z| <= 3 standard deviations
// Plan choice tolerates round-off in predicted times (T' * s / s != T'): the
// coordinator's tolerance, coord::kTimeTolerance.
using coord::kTimeTolerance;

std::string Num(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%g", value);
  return buffer;
}

void Require(bool ok, const std::string& message) {
  if (!ok) throw InputError(message);
}

// The same for a value of one field; `message` names it as "Struct::member".
using model::Require;

// The numbers (job_checks.hpp), P_block and the straggler's pipeline.
void CheckJob(const JobSpec& job, const schedule::Spec& spec) {
  CheckJobNumbers(job, spec);
  model::CheckPBlock(job.p_block_w, "JobSpec::p_block_w");
  const Straggler& g = job.straggler;
  Require(g.pipeline >= -1 && g.pipeline < job.pipelines, "Straggler::pipeline",
          "Straggler::pipeline must be -1 (none) or 0.." + std::to_string(job.pipelines - 1) +
              " (got " + std::to_string(g.pipeline) + ")");
}

}  // namespace

const char* PolicyName(Policy policy) {
  return policy == Policy::kBaseline ? "baseline" : "joulepipe";
}

bool Straggler::ActiveAt(int iteration) const {
  if (pipeline < 0 || iteration < from_iteration) return false;
  if (for_iterations == 0) return true;
  const int since = iteration - from_iteration;
  if (period == 0) return since < for_iterations;
  return since % period < for_iterations;
}

double Straggler::SlowdownOf(int p, int iteration) const {
  return p == pipeline && ActiveAt(iteration) ? slowdown : 1.0;
}

double SimulationResult::TotalTime() const {
  double sum = 0;
  for (const IterationResult& r : iterations) sum += r.time_s;
  return sum;
}

double SimulationResult::TotalEnergy() const {
  double sum = 0;
  for (const IterationResult& r : iterations) sum += r.energy_j;
  return sum;
}

// Per candidate, by topological position: profiled time and energy; per
// physical stage: their sums.
struct Simulator::Tables {
  std::vector<double> time, energy;
  std::vector<double> stage_time, stage_energy;
  // Calibrated wait model only: per position, the seconds the plan lowers
  // the wait after it (LoweredS of the gap in the candidate's noiseless walk).
  std::vector<double> planned_lowered_s;
  // Per physical stage: the seconds the plan lowers the wait before its
  // first instruction (the pipeline fill).
  std::vector<double> planned_head_s;
};

Simulator::Simulator(const schedule::Schedule& schedule, const model::Profile& profile,
                     const JobSpec& job, std::vector<CandidatePlan> candidates, int baseline,
                     int intrinsic)
    : schedule_(schedule),
      profile_(profile),
      job_(job),
      candidates_(std::move(candidates)),
      baseline_(baseline),
      intrinsic_(intrinsic),
      stages_(schedule.spec.stages) {
  CheckJob(job_, schedule_.spec);
  const int n = schedule_.num_nodes();
  Require(n > 0 && stages_ >= 1 &&
              schedule_.topological_order.size() == static_cast<std::size_t>(n) &&
              schedule_.predecessors.size() == static_cast<std::size_t>(n),
          "schedule is empty or inconsistent; build it with schedule::Build");
  const int count = static_cast<int>(candidates_.size());
  Require(count >= 1, "candidates must not be empty: pass at least the baseline plan");
  Require(baseline_ >= 0 && baseline_ < count, "baseline must index the candidates (0.." +
                                                   std::to_string(count - 1) + ", got " +
                                                   std::to_string(baseline_) + ")");
  Require(intrinsic_ >= 0 && intrinsic_ < count, "intrinsic must index the candidates (0.." +
                                                     std::to_string(count - 1) + ", got " +
                                                     std::to_string(intrinsic_) + ")");

  // Topological layout.
  position_of_.assign(n, -1);
  node_at_ = schedule_.topological_order;
  for (int pos = 0; pos < n; ++pos) {
    const int node = node_at_[pos];
    Require(node >= 0 && node < n && position_of_[node] < 0,
            "schedule's topological_order is not a permutation of its nodes");
    position_of_[node] = pos;
  }
  stage_at_.resize(n);
  pred_begin_.assign(1, 0);
  for (int pos = 0; pos < n; ++pos) {
    const int node = node_at_[pos];
    const int stage = schedule_.nodes[node].stage;
    stage_at_[pos] = stage;
    for (int q : schedule_.predecessors[node]) {
      Require(position_of_[q] < pos, "schedule's topological_order puts a node before its input");
      pred_.push_back(position_of_[q]);
      pred_latency_.push_back(schedule_.nodes[q].stage != stage ? job_.p2p_latency_s : 0.0);
    }
    pred_begin_.push_back(static_cast<int>(pred_.size()));
  }

  // Dense clock lookup per profile row.
  const int profile_stages = profile_.num_stages();
  row_at_.resize(n);
  row_min_mhz_.assign(2 * static_cast<std::size_t>(std::max(profile_stages, 1)), 0);
  row_points_.assign(row_min_mhz_.size(), {});
  for (int pos = 0; pos < n; ++pos) {
    const model::Instruction& instruction = schedule_.nodes[node_at_[pos]];
    const int row = schedule::ProfileStage(schedule_.spec, profile_stages, instruction);
    const std::vector<model::ClockPoint>& points = profile_.Points(row, instruction.kind);
    Require(row < profile_stages && !points.empty(),
            "the profile has no " + std::string(model::KindName(instruction.kind)) +
                " rows for stage " + std::to_string(row) + " (needed by " +
                model::Describe(instruction) + "); profile every stage the schedule runs");
    const int id = 2 * row + static_cast<int>(instruction.kind);
    row_at_[pos] = id;
    if (!row_points_[id].empty()) continue;
    const int lo = points.back().mhz, hi = points.front().mhz;  // highest first
    row_min_mhz_[id] = lo;
    row_points_[id].assign(static_cast<std::size_t>(hi - lo + 1), nullptr);
    // One point per clock, as Profile::Find(.., mhz) gives it: the row
    // without knobs, else the fastest (the first at its clock). The
    // simulator does not run knob settings (SimPlan names clocks only).
    for (const model::ClockPoint& point : points) {
      const model::ClockPoint*& slot = row_points_[id][point.mhz - lo];
      if (slot == nullptr || (point.knob == 0 && slot->knob != 0)) slot = &point;
    }
  }

  // Every candidate must be complete and use profiled clocks.
  for (int c = 0; c < count; ++c) {
    const CandidatePlan& plan = candidates_[c];
    const std::string name = "candidate " + std::to_string(c);
    Require(plan.mhz.size() == static_cast<std::size_t>(n),
            name + " has " + std::to_string(plan.mhz.size()) + " clocks but the schedule has " +
                std::to_string(n) + " instructions (one clock per node id)");
    Require(std::isfinite(plan.time_s) && plan.time_s > 0,
            name + " time_s must be the predicted iteration time, finite and > 0 (got " +
                Num(plan.time_s) + ")");
    for (int pos = 0; pos < n; ++pos) {
      const int node = node_at_[pos];
      if (PointAt(pos, plan.mhz[node]) != nullptr) continue;
      throw InputError(name + " runs " + model::Describe(schedule_.nodes[node]) + " at " +
                       std::to_string(plan.mhz[node]) +
                       " MHz, which the profile has not measured; use a profiled clock");
    }
  }

  // Least-energy-within lookup.
  std::vector<coord::Candidate> index(count);
  for (int c = 0; c < count; ++c) index[c] = {candidates_[c].time_s, candidates_[c].energy_j};
  index_.emplace(std::move(index), intrinsic_);

  // Per-GPU speed factors, a pure function of (seed, pipeline, stage).
  speed_.assign(static_cast<std::size_t>(job_.pipelines) * stages_, 1.0);
  if (job_.clock_variability > 0) {
    for (int p = 0; p < job_.pipelines; ++p) {
      for (int s = 0; s < stages_; ++s) {
        double z = 0;
        for (std::uint64_t attempt = 0;; ++attempt) {
          z = detail::Normal(job_.seed, kSpeedStream, p, s, attempt);
          if (std::abs(z) <= kTruncation) break;
        }
        speed_[static_cast<std::size_t>(p) * stages_ + s] = 1.0 + job_.clock_variability * z;
      }
    }
  }

  // Each pipeline's stretch: its intrinsic-plan time with its own GPUs (and
  // the P2P latency) over the predicted time. Noiseless pipelines: 1.
  // With persistent noise the policy measures plans instead of trusting
  // their predicted times.
  measure_ = job_.clock_variability > 0 || job_.p2p_latency_s > 0;
}

const model::ClockPoint* Simulator::PointAt(int position, int mhz) const {
  const int id = row_at_[position];
  const int offset = mhz - row_min_mhz_[id];
  if (offset < 0 || offset >= static_cast<int>(row_points_[id].size())) return nullptr;
  return row_points_[id][offset];
}

Simulator::Tables Simulator::BuildTables(int candidate) const {
  const int n = schedule_.num_nodes();
  const CandidatePlan& plan = candidates_[candidate];
  Tables t;
  t.time.resize(n);
  t.energy.resize(n);
  t.stage_time.assign(stages_, 0.0);
  t.stage_energy.assign(stages_, 0.0);
  // Per stage in execution order, so the sums add in the order Replay does.
  for (int s = 0; s < stages_; ++s) {
    for (int node : schedule_.stage_order[s]) {
      const int pos = position_of_[node];
      const model::ClockPoint* point = PointAt(pos, plan.mhz[node]);
      t.time[pos] = point->time_s;
      t.energy[pos] = point->energy_j;
      t.stage_time[s] += point->time_s;
      t.stage_energy[s] += point->energy_j;
    }
  }
  if (job_.waits.calibrated()) {
    std::vector<double> factor(stages_, 1.0), start(n), finish(n);
    const double end = Walk(t, factor.data(), 0.0, start.data(), finish.data());
    t.planned_lowered_s.assign(n, 0.0);
    t.planned_head_s.assign(stages_, 0.0);
    for (int s = 0; s < stages_; ++s) {
      const std::vector<int>& order = schedule_.stage_order[s];
      if (!order.empty()) {
        t.planned_head_s[s] = job_.waits.LoweredS(start[position_of_[order.front()]]);
      }
      for (std::size_t k = 0; k < order.size(); ++k) {
        const int pos = position_of_[order[k]];
        const double next = k + 1 < order.size() ? start[position_of_[order[k + 1]]] : end;
        t.planned_lowered_s[pos] = job_.waits.LoweredS(std::max(0.0, next - finish[pos]));
      }
    }
  }
  return t;
}

// Seconds of an actual wait of gap_s spent at the wait clock when the plan
// lowers planned_s seconds of it (the clock is down L after the instruction
// and the restore is requested planned_s later): planned_s if the wait is
// as long as planned or longer; if it is shorter, the next instruction's
// begin cuts it short, leaving what remains after the switch and margin.
double Simulator::LoweredS(double planned_s, double gap_s) const {
  if (planned_s <= 0) return 0;
  const model::WaitModel& w = job_.waits;
  return std::min(planned_s, std::max(0.0, gap_s - w.switch_latency_s - w.margin_s));
}

double Simulator::Walk(const Tables& t, const double* factor, double stall, double* start,
                       double* finish) const {
  // Dependencies first, so every predecessor's end is known.
  const int n = static_cast<int>(node_at_.size());
  double end = 0;
  for (int pos = 0; pos < n; ++pos) {
    double ready = stall;
    for (int e = pred_begin_[pos]; e < pred_begin_[pos + 1]; ++e) {
      ready = std::max(ready, finish[pred_[e]] + pred_latency_[e]);
    }
    start[pos] = ready;
    finish[pos] = ready + t.time[pos] * factor[stage_at_[pos]];
    end = std::max(end, finish[pos]);
  }
  return end;
}

// What one Run (or one Choose) has computed so far: the tables of the
// candidates it touched, measured plan times and plan choices.
struct Simulator::Cache {
  std::vector<int> table_of;  // candidate -> index in tables, or -1
  std::vector<Tables> tables;
  std::map<std::tuple<int, int, double>, double> measured;  // (pipeline, candidate, slowdown)
  std::map<std::tuple<int, double, double>, int> chosen;    // (pipeline, slowdown, T')
};

const Simulator::Tables& Simulator::TablesOf(int candidate, Cache* cache) const {
  if (cache->table_of.empty()) cache->table_of.assign(candidates_.size(), -1);
  if (cache->table_of[candidate] < 0) {
    cache->table_of[candidate] = static_cast<int>(cache->tables.size());
    cache->tables.push_back(BuildTables(candidate));
  }
  return cache->tables[cache->table_of[candidate]];
}

double Simulator::Measure(int pipeline, int candidate, double slowdown, Cache* cache) const {
  const auto key = std::make_tuple(pipeline, candidate, slowdown);
  const auto found = cache->measured.find(key);
  if (found != cache->measured.end()) return found->second;
  std::vector<double> factor(stages_), start(node_at_.size()), finish(node_at_.size());
  for (int s = 0; s < stages_; ++s) {
    factor[s] = speed_[static_cast<std::size_t>(pipeline) * stages_ + s] * slowdown;
  }
  const double time =
      Walk(TablesOf(candidate, cache), factor.data(), 0.0, start.data(), finish.data());
  cache->measured.emplace(key, time);
  return time;
}

int Simulator::MeasuredBestWithin(int pipeline, double slowdown, double limit_s,
                                  Cache* cache) const {
  const auto key = std::make_tuple(pipeline, slowdown, limit_s);
  const auto found = cache->chosen.find(key);
  if (found != cache->chosen.end()) return found->second;
  // Along the Pareto chain (ascending predicted time, descending energy) the
  // measured time rises too; binary search for the last one that fits.
  const std::vector<int>& chain = index_->chain();
  auto fits = [&](std::size_t k) {
    return Measure(pipeline, chain[k], slowdown, cache) <= limit_s * (1 + kTimeTolerance);
  };
  // If none does, the baseline does: T' is at least its measured time.
  int best = baseline_;
  if (fits(0)) {
    std::size_t lo = 0, hi = chain.size();
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    best = chain[lo];
  }
  cache->chosen.emplace(key, best);
  return best;
}

std::vector<int> Simulator::Choose(Policy policy, int iteration, int detection_lag,
                                   double* target_s) const {
  Cache cache;
  return Choose(policy, iteration, detection_lag, target_s, &cache);
}

std::vector<int> Simulator::Choose(Policy policy, int iteration, int detection_lag,
                                   double* target_s, Cache* cache) const {
  const int d = job_.pipelines;
  if (policy == Policy::kBaseline) {
    if (target_s != nullptr) *target_s = candidates_[baseline_].time_s;
    return std::vector<int>(d, baseline_);
  }
  // Each pipeline's slowdown as the policy knows it.
  const int known = iteration - detection_lag;
  std::vector<double> slow(d, 1.0);
  if (known >= 0) {
    for (int p = 0; p < d; ++p) slow[p] = job_.straggler.SlowdownOf(p, known);
  }
  return ChooseFor(slow, target_s, cache);
}

std::vector<int> Simulator::ChooseFor(const std::vector<double>& slow, double* target_s,
                                      Cache* cache) const {
  const int d = job_.pipelines;
  if (!measure_) {
    // Noiseless pipelines: predicted times are exact; the coordinator's rule.
    coord::PlanChoice choice = index_->Choose(slow);
    if (target_s != nullptr) *target_s = choice.target_s;
    return std::move(choice.candidate_of_pipeline);
  }
  std::vector<int> plan(d, intrinsic_);
  // Persistent noise: T' is what the job would take at max clocks, measured
  // on each pipeline's own GPUs; every pipeline runs the least-energy plan
  // that, measured the same way, fits within it.
  double target = 0;
  for (int p = 0; p < d; ++p) target = std::max(target, Measure(p, baseline_, slow[p], cache));
  if (target_s != nullptr) *target_s = target;
  for (int p = 0; p < d; ++p) plan[p] = MeasuredBestWithin(p, slow[p], target, cache);
  return plan;
}

const char* DetectionName(Detection detection) {
  return detection == Detection::kMeasured ? "measured" : "oracle";
}

SimulationResult Simulator::Run(Policy policy, const RunOptions& options) const {
  CheckIterationIndex("RunOptions::detection_lag", options.detection_lag,
                      "iterations until the policy knows of a slowdown; 0 = immediate");
  coord::CheckStragglerOptions(options.detector);
  CheckIterationIndex("RunOptions::timeline_iterations", options.timeline_iterations,
                      "iterations recorded in the timeline; 0 records none");
  if (!(options.waveform_dt_s == 0 ||
        (options.waveform_dt_s >= 1e-4 && options.waveform_dt_s <= 10))) {
    throw model::InputError("RunOptions::waveform_dt_s",
                            model::Format("RunOptions::waveform_dt_s must be 0 (no waveform) or "
                                          "1e-4..10 s (got %g); 0.01 gives 10 ms bins",
                                          options.waveform_dt_s));
  }
  const int n = schedule_.num_nodes();
  const int d = job_.pipelines, iterations = job_.iterations, S = stages_;
  const double pb = job_.p_block_w, g = job_.gpus_per_stage;

  SimulationResult result;
  result.policy = policy;
  result.pipelines = d;
  result.stages = S;
  result.gpus_per_stage = job_.gpus_per_stage;
  result.iterations.resize(iterations);
  result.plan.resize(static_cast<std::size_t>(iterations) * d);
  result.finish_s.resize(static_cast<std::size_t>(iterations) * d);
  result.gpu_energy_j.resize(static_cast<std::size_t>(iterations) * d * S);

  // Oracle choices do not depend on simulated outcomes: all of them first,
  // then tables for exactly the candidates used. Measured ones are made at
  // each iteration's start from what the detector has seen so far.
  Cache cache;
  const bool measured = policy == Policy::kJoulepipe && options.detection == Detection::kMeasured;
  std::optional<coord::StragglerDetector> detector;
  std::vector<int> current;  // measured: the plans in force
  double current_target = 0;
  if (measured) {
    detector.emplace(d, options.detector);
    current = ChooseFor(std::vector<double>(d, 1.0), &current_target, &cache);
  }
  for (int i = 0; i < iterations && !measured; ++i) {
    const std::vector<int> chosen =
        Choose(policy, i, options.detection_lag, &result.iterations[i].target_s, &cache);
    for (int p = 0; p < d; ++p) {
      result.plan[static_cast<std::size_t>(i) * d + p] = chosen[p];
      TablesOf(chosen[p], &cache);
    }
  }
  const std::vector<Tables>& tables = cache.tables;
  const std::vector<int>& table_of = cache.table_of;
  std::vector<double> measured_s(d), predicted(d);  // kMeasured, per iteration

  std::vector<double> finish(n), start(n);
  std::vector<double> factor(S);
  std::vector<double> stage_end(static_cast<std::size_t>(d) * S);  // for the timeline
  std::vector<double> stall_of(d);
  // Calibrated wait model: per (pipeline, stage), seconds lowered in this
  // iteration, the end of its last instruction and the plan's lowering of
  // the wait after it (the tail wait is known once every pipeline is done).
  // Only joulepipe lowers waits: the baseline is the job without it.
  const bool lower = job_.waits.calibrated() && policy == Policy::kJoulepipe;
  const double save_w = lower ? std::min(pb, job_.waits.saving_w()) : 0;
  std::vector<double> lowered_of(lower ? static_cast<std::size_t>(d) * S : 0);
  std::vector<double> last_end(lowered_of.size()), last_planned(lowered_of.size());
  double clock = 0;  // job time at the iteration's start
  bool recording_done = options.timeline_iterations == 0;
  bool record = false;  // this iteration's events go into the timeline
  const bool wave = options.waveform_dt_s > 0;
  result.waveform.dt_s = options.waveform_dt_s;
  auto emit = [&](const TimelineEvent& event) {
    // The whole TP group draws what the event's one GPU draws.
    if (wave) result.waveform.Add(event.start_s, event.duration_s, g * event.energy_j);
    if (!record) return;
    if (result.timeline.size() >= options.max_timeline_events) {
      result.timeline_truncated = true;
      recording_done = true;
      return;
    }
    result.timeline.push_back(event);
  };

  for (int i = 0; i < iterations; ++i) {
    IterationResult& it = result.iterations[i];
    if (measured) {
      it.target_s = current_target;
      for (int p = 0; p < d; ++p) {
        result.plan[static_cast<std::size_t>(i) * d + p] = current[p];
        TablesOf(current[p], &cache);
      }
    }
    record = !recording_done && i < options.timeline_iterations;
    const bool trace = record || wave;  // events are made for either
    it.straggler_active = job_.straggler.ActiveAt(i);
    double compute_end = 0;
    for (int p = 0; p < d; ++p) {
      const Tables& t = tables[table_of[result.plan[static_cast<std::size_t>(i) * d + p]]];
      const double slow = job_.straggler.SlowdownOf(p, i);
      for (int s = 0; s < S; ++s) factor[s] = speed_[static_cast<std::size_t>(p) * S + s] * slow;
      double stall = 0;
      if (job_.stall_probability > 0 && detail::Uniform(detail::Hash(job_.seed, kStallStream, i, p,
                                                                     0)) < job_.stall_probability) {
        stall = job_.stall_s;
      }
      stall_of[p] = stall;
      const double offset = p * job_.pipeline_offset_s;
      const double end = Walk(t, factor.data(), offset + stall, start.data(), finish.data());
      result.finish_s[static_cast<std::size_t>(i) * d + p] = end;
      compute_end = std::max(compute_end, end);
      if (lower) {
        for (int s = 0; s < S; ++s) {
          const std::vector<int>& order = schedule_.stage_order[s];
          // The head wait counts from the step's beginning, a data-loader
          // stall included: lowered for what the plan planned at most.
          double l = LoweredS(t.planned_head_s[s], start[position_of_[order.front()]]);
          for (std::size_t k = 0; k + 1 < order.size(); ++k) {
            const int pos = position_of_[order[k]], next = position_of_[order[k + 1]];
            l += LoweredS(t.planned_lowered_s[pos], start[next] - finish[pos]);
          }
          const std::size_t at = static_cast<std::size_t>(p) * S + s;
          const int last = position_of_[order.back()];
          lowered_of[at] = l;
          last_end[at] = finish[last];
          last_planned[at] = t.planned_lowered_s[last];
        }
      }

      if (trace) {
        const int c = result.plan[static_cast<std::size_t>(i) * d + p];
        for (int s = 0; s < S; ++s) {
          double free = 0;
          int previous = -1;  // position of the stage's previous instruction
          if (offset > 0) {
            emit({EventKind::kOffset, i, p, s, -1, 0, clock, offset, pb * offset});
            free = offset;
          }
          if (stall > 0) {
            emit({EventKind::kStall, i, p, s, -1, 0, clock + free, stall, pb * stall});
            free += stall;
          }
          for (int node : schedule_.stage_order[s]) {
            const int pos = position_of_[node];
            if (start[pos] > free) {
              const double gap = start[pos] - free;
              // The head wait's saving (stall and fill lowered as one wait)
              // goes on the event before the stage's first instruction.
              const double saved = !lower ? 0
                                   : previous >= 0
                                       ? save_w * LoweredS(t.planned_lowered_s[previous], gap)
                                       : save_w * LoweredS(t.planned_head_s[s], start[pos]);
              emit({EventKind::kWait, i, p, s, -1, 0, clock + free, gap, pb * gap - saved});
            }
            previous = pos;
            const double dur = finish[pos] - start[pos];
            emit({EventKind::kInstruction, i, p, s, node, candidates_[c].mhz[node],
                  clock + start[pos], dur, t.energy[pos] + pb * (dur - t.time[pos])});
            free = finish[pos];
          }
          stage_end[static_cast<std::size_t>(p) * S + s] = free;
        }
      }
    }
    it.compute_s = compute_end;
    const double pause =
        job_.checkpoint_every > 0 && (i + 1) % job_.checkpoint_every == 0 ? job_.checkpoint_s : 0.0;
    it.time_s = compute_end + job_.allreduce_s + pause;
    if (measured) {
      // What the coordinator hears: each pipeline's compute time against its
      // plan's prediction; a changed verdict re-plans from the next iteration.
      for (int p = 0; p < d; ++p) predicted[p] = candidates_[current[p]].time_s;
      const double* finish = &result.finish_s[static_cast<std::size_t>(i) * d];
      measured_s.assign(finish, finish + d);
      // A pipeline's own time: its offset is the job's choice, not slowness.
      for (int p = 0; p < d; ++p) measured_s[p] -= p * job_.pipeline_offset_s;
      if (detector->Observe(measured_s, predicted)) {
        current = ChooseFor(detector->slowdowns(), &current_target, &cache);
      }
    }

    // The wait after each stage's last instruction, to the end of compute.
    if (lower) {
      for (std::size_t at = 0; at < lowered_of.size(); ++at)
        lowered_of[at] += LoweredS(last_planned[at], compute_end - last_end[at]);
    }

    // Energy: per GPU, sum e + P_block * (T - sum t) with the slowed time
    // split out (simulator.hpp), less what lowered waits save.
    double busy = 0, blocking = 0, lowered_s = 0;
    for (int p = 0; p < d; ++p) {
      const Tables& t = tables[table_of[result.plan[static_cast<std::size_t>(i) * d + p]]];
      const double slow = job_.straggler.SlowdownOf(p, i);
      for (int s = 0; s < S; ++s) {
        const double k = speed_[static_cast<std::size_t>(p) * S + s] * slow;
        // The GPU ran its instructions for k * stage_time seconds: busy
        // energy is their profiled energy plus the slowed part at P_block,
        // the rest of the iteration is blocking (model::IterationEnergyJ on
        // one GPU).
        const double gpu_busy = t.stage_energy[s] + pb * (k - 1) * t.stage_time[s];
        const double busy_s = k * t.stage_time[s];
        const double lowered = lower ? lowered_of[static_cast<std::size_t>(p) * S + s] : 0;
        const double saved = save_w * lowered;
        const double gpu_blocking = model::BlockingEnergyJ(busy_s, 1, it.time_s, pb) - saved;
        result.gpu_energy_j[(static_cast<std::size_t>(i) * d + p) * S + s] =
            model::IterationEnergyJ(gpu_busy, busy_s, 1, it.time_s, pb) - saved;
        busy += gpu_busy;
        blocking += gpu_blocking;
        lowered_s += lowered;
      }
    }
    it.busy_energy_j = g * busy;
    it.blocking_energy_j = g * blocking;
    it.lowered_wait_s = g * lowered_s;
    it.energy_j = it.busy_energy_j + it.blocking_energy_j;

    if (trace) {
      for (int p = 0; p < d; ++p) {
        for (int s = 0; s < S; ++s) {
          const double free = stage_end[static_cast<std::size_t>(p) * S + s];
          if (compute_end > free) {
            const double gap = compute_end - free;
            const double saved =
                lower ? save_w * LoweredS(last_planned[static_cast<std::size_t>(p) * S + s], gap)
                      : 0;
            emit({EventKind::kWait, i, p, s, -1, 0, clock + free, gap, pb * gap - saved});
          }
          if (job_.allreduce_s > 0) {
            emit({EventKind::kAllReduce, i, p, s, -1, 0, clock + compute_end, job_.allreduce_s,
                  pb * job_.allreduce_s});
          }
          if (pause > 0) {
            emit({EventKind::kCheckpoint, i, p, s, -1, 0, clock + compute_end + job_.allreduce_s,
                  pause, pb * pause});
          }
        }
      }
    }
    clock += it.time_s;
    if (wave && clock / options.waveform_dt_s > kMaxWaveformBins) {
      throw model::InputError(
          "RunOptions::waveform_dt_s",
          model::Format("the waveform of %d iterations (%.6g s and more) in bins of %g s "
                        "exceeds %.0f bins; use a coarser RunOptions::waveform_dt_s or fewer "
                        "iterations",
                        iterations, clock, options.waveform_dt_s, kMaxWaveformBins));
    }
  }
  return result;
}

}  // namespace joulepipe::sim
