#include "joulepipe/solver/frontier.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <set>
#include <thread>

#include "activity_graph.hpp"
#include "grid_rounding.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/clock_plans.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "least_energy.hpp"
#include "relaxation.hpp"
#include "step_feed.hpp"

namespace joulepipe::solver {

namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

void StopIfCancelled(const Options& o) {
  if (o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed)) {
    throw model::Cancelled("the frontier solve was cancelled");
  }
}

void CheckOptions(const Options& o) {
  model::CheckPBlock(o.p_block_w, "Options::p_block_w");
  if (!std::isfinite(o.resolution_s) || o.resolution_s <= 0) {
    throw model::InputError("the frontier resolution must be > 0 seconds (got " +
                            std::to_string(o.resolution_s) + ")");
  }
  if (!std::isfinite(o.max_deadline_s) || o.max_deadline_s < 0) {
    throw model::InputError("Options::max_deadline_s must be >= 0 seconds, 0 = no limit (got " +
                            std::to_string(o.max_deadline_s) + ")");
  }
}

// The requested deadlines clamped into the relaxation's range [lo, hi]:
// below lo nothing is feasible, above hi the slowest useful plan is the answer.
std::set<double> RequestedDeadlines(double lo, double hi, const Options& o) {
  std::set<double> out;
  for (double t : o.extra_deadlines_s) {
    if (t >= lo) out.insert(std::min(t, hi));
  }
  return out;
}

// Deadlines to plan for, descending: a grid of `resolution` from the fastest
// makespan lo up to the slowest useful one hi, plus the requested ones.
std::vector<double> Deadlines(double lo, double hi_useful, const Options& o,
                              const std::set<double>& requested) {
  const double hi =
      o.max_deadline_s > 0 ? std::max(lo, std::min(o.max_deadline_s, hi_useful)) : hi_useful;
  std::vector<double> out;
  const double span = std::max(0.0, hi - lo);
  const long count = static_cast<long>(std::floor(span / o.resolution_s));
  out.reserve(count + 2 + requested.size());
  for (long j = 0; j <= count; ++j) out.push_back(lo + j * o.resolution_s);
  out.push_back(hi);
  out.insert(out.end(), requested.begin(), requested.end());
  std::sort(out.begin(), out.end(), std::greater<>());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// Grid deadlines to refine, spread evenly over the list (see Options).
std::set<double> SampledDeadlines(const std::vector<double>& deadlines, const Options& o,
                                  int instructions) {
  std::set<double> out;
  const size_t n = deadlines.size();
  const long wanted =
      std::max<long>(o.refined_samples, o.refine_budget / std::max(1, instructions));
  const size_t samples = std::min<size_t>(n, static_cast<size_t>(std::max(0L, wanted)));
  for (size_t k = 0; k < samples; ++k)
    out.insert(deadlines[samples > 1 ? k * (n - 1) / (samples - 1) : 0]);
  return out;
}

// Keeps points of strictly decreasing energy as time increases.
std::vector<FrontierPoint> ParetoFilter(std::vector<FrontierPoint> points) {
  std::sort(points.begin(), points.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    return a.energy_j < b.energy_j;
  });
  std::vector<FrontierPoint> kept;
  for (FrontierPoint& p : points) {
    if (kept.empty() || p.energy_j < kept.back().energy_j) kept.push_back(std::move(p));
  }
  return kept;
}

// Threads for the solve: Options::threads, or the hardware's (at most
// kMaxRoundingThreads) when 0; fewer for small solves, where starting a
// thread costs more than the rounding it would take over. The rounding's
// work is about instructions x (deadlines + kRefineCost x refined
// deadlines): a refinement (greedy filling from all-fastest, polishing)
// costs tens of roundings. A few coarse deadlines of a big pipeline (tune's
// 60 per candidate) are still worth a worker, since it runs alongside the
// relaxation.
constexpr int kMaxRoundingThreads = 8;
constexpr double kRefineCost = 64;
constexpr double kWorkPerThread = 5e5;
int RoundingThreads(const Options& o, size_t deadlines, size_t refined, int instructions) {
  int threads = o.threads;
  if (threads <= 0) {
    threads =
        std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, kMaxRoundingThreads);
  }
  const double work = static_cast<double>(instructions) *
                      (static_cast<double>(deadlines) + kRefineCost * static_cast<double>(refined));
  const double useful = std::max(1.0, std::floor(work / kWorkPerThread));
  return static_cast<int>(std::min<double>(threads, useful));
}

}  // namespace

double Frontier::BoundAt(double time_s) const {
  // The relaxation's fastest makespan can differ from an exactly evaluated
  // plan's by round-off; treat times within 1e-9 relative as equal.
  const double slack = 1e-9 * (1 + std::abs(time_s));
  if (bound.empty() || time_s < bound.front().time_s - slack) {
    return std::numeric_limits<double>::infinity();
  }
  // The relaxed curve is convex in T; the bound for "time <= t" is its
  // minimum over [T_min, t]. Breakpoints ascend in time.
  double best = bound.front().energy_j;
  for (size_t k = 0; k < bound.size(); ++k) {
    if (bound[k].time_s > time_s) {
      const BoundPoint& a = bound[k - (k > 0 ? 1 : 0)];
      const BoundPoint& b = bound[k];
      if (b.time_s > a.time_s) {
        const double w = std::max(0.0, (time_s - a.time_s) / (b.time_s - a.time_s));
        best = std::min(best, a.energy_j + w * (b.energy_j - a.energy_j));
      }
      break;
    }
    best = std::min(best, bound[k].energy_j);
  }
  return best;
}

const FrontierPoint* Frontier::BestWithin(double time_s) const {
  const FrontierPoint* best = nullptr;
  for (const FrontierPoint& p : points) {
    if (p.time_s <= time_s && (best == nullptr || p.energy_j < best->energy_j)) best = &p;
  }
  return best;
}

Evaluation EvaluateClocks(const schedule::Schedule& schedule, const model::Profile& profile,
                          double p_block_w, const std::vector<std::uint16_t>& mhz,
                          const std::vector<std::uint16_t>& knob) {
  const int profile_stages = profile.num_stages();
  std::vector<double> finish(schedule.num_nodes(), 0.0);
  double makespan = 0, energy = 0, busy = 0;
  for (int node : schedule.topological_order) {
    const model::Instruction& ins = schedule.nodes[node];
    const int stage = schedule::ProfileStage(schedule.spec, profile_stages, ins);
    const int setting = knob.empty() ? 0 : knob[node];
    const model::ClockPoint* point = profile.Find(stage, ins.kind, mhz[node], setting);
    if (point == nullptr) {
      throw model::InputError(
          "no profiled " + std::string(model::KindName(ins.kind)) + " at " +
          std::to_string(mhz[node]) + " MHz" +
          (setting == 0 ? std::string() : " with knobs " + (*profile.knob_settings())[setting]) +
          " for stage " + std::to_string(stage));
    }
    double start = 0;
    for (int q : schedule.predecessors[node]) start = std::max(start, finish[q]);
    finish[node] = start + point->time_s;
    makespan = std::max(makespan, finish[node]);
    energy += point->energy_j;
    busy += point->time_s;
  }
  return {makespan,
          model::IterationEnergyJ(energy, busy, schedule.spec.stages, makespan, p_block_w)};
}

Frontier SolveFrontier(const schedule::Schedule& schedule, const model::Profile& profile,
                       const Options& options) {
  CheckOptions(options);
  const ActivityGraph g = BuildActivityGraph(schedule, profile, options.p_block_w);
  Frontier frontier;

  // Baseline: every instruction at its highest clock.
  frontier.max_clock.mhz = schedule::UniformClocks(schedule, profile, /*highest=*/true);
  const Evaluation base =
      EvaluateClocks(schedule, profile, options.p_block_w, frontier.max_clock.mhz);
  frontier.max_clock.time_s = base.time_s;
  frontier.max_clock.energy_j = base.energy_j;

  // The deadline grid spans the relaxation's makespan range: from the
  // fastest makespan (every activity at its fastest vertex, where the
  // crashing ends) to the slowest useful one (every activity at its
  // cheapest vertex, where it starts). Both are known before the crashing,
  // so the rounding can follow it down the range while it runs.
  const std::vector<double> initial = CheapestDurations(g);
  std::vector<double> scratch;
  const double t_fastest = EarliestFinish(g, FastestDurations(g), scratch);
  const double t_slowest = EarliestFinish(g, initial, scratch);
  // The max-clock time is always a deadline: zero slowdown is the main use.
  Options effective = options;
  effective.extra_deadlines_s.push_back(frontier.max_clock.time_s);
  const std::set<double> requested = RequestedDeadlines(t_fastest, t_slowest, effective);
  const std::vector<double> deadlines = Deadlines(t_fastest, t_slowest, effective, requested);
  // Sampled from the grid alone, so what the grid finds (its least-energy
  // point above all) does not depend on the deadlines a command requested.
  const std::set<double> sampled =
      SampledDeadlines(Deadlines(t_fastest, t_slowest, effective, {}), effective, g.n);
  // Points name knobs only when the profile has some (else they stay empty).
  const model::Profile::KnobTable knobs = profile.has_knobs() ? profile.knob_settings() : nullptr;

  // This thread crashes the relaxation while threads - 1 workers round the
  // deadlines it has passed; then it joins them (grid_rounding.hpp). Each
  // deadline is rounded on its own and the points are joined in the list's
  // order, so the frontier does not depend on the thread count.
  StepFeed feed;
  GridRounder rounder(g, initial, feed, deadlines, requested, sampled, options, knobs);
  const int threads = RoundingThreads(options, deadlines.size(), rounder.refinements(), g.n);
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  for (int c = 1; c < threads; ++c) {
    workers.emplace_back([&, c] {
      try {
        rounder.Work(/*report=*/false);
      } catch (...) {
        errors[c] = std::current_exception();
      }
    });
  }
  auto started = std::chrono::steady_clock::now();
  try {
    StopIfCancelled(options);
    std::function<void(double)> relaxation_progress;
    if (options.progress || options.cancel != nullptr) {
      relaxation_progress = [&options](double f) {
        StopIfCancelled(options);
        if (options.progress) options.progress("relaxation", f);
      };
    }
    const Relaxation relaxation =
        SolveRelaxation(g, options.p_block_w, nullptr, relaxation_progress,
                        [&feed](const RelaxationStep& step) { feed.Push(step); });
    feed.Finish();
    frontier.stats.relaxation_seconds = Seconds(started);
    frontier.stats.relaxation_steps = static_cast<int>(relaxation.steps.size());
    frontier.bound.assign(relaxation.curve.rbegin(), relaxation.curve.rend());
    started = std::chrono::steady_clock::now();
    rounder.Work(/*report=*/true);
  } catch (...) {
    errors[0] = std::current_exception();
    rounder.Stop();
    feed.Finish();
  }
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  StopIfCancelled(options);  // raised after the last check: still no frontier
  GridRounding rounded = rounder.Result();
  frontier.stats.deadlines = rounded.rounded;
  frontier.stats.refined = rounded.refined;
  std::vector<FrontierPoint> points = std::move(rounded.points);
  points.push_back(frontier.max_clock);
  // The least-energy end gets the same search whatever was requested
  // (least_energy.hpp), up to the slowest useful makespan or where the grid
  // stops.
  if (rounded.grid_least >= 0) {
    const double search_to =
        options.max_deadline_s > 0 ? std::min(t_slowest, options.max_deadline_s) : t_slowest;
    for (RoundedPlan& plan :
         SearchLeastEnergy(g, options.p_block_w, feed, initial, points[rounded.grid_least],
                           search_to, StopCheck{options.cancel, nullptr})) {
      points.push_back(PointOf(g, plan, knobs));
    }
  }
  frontier.points = ParetoFilter(std::move(points));
  frontier.stats.rounding_seconds = Seconds(started);
  return frontier;
}

model::Plan ToPlan(const schedule::Schedule& schedule, const FrontierPoint& point) {
  model::Plan plan = schedule::PlanOfClocks(schedule, point.mhz);
  if (!point.knob.empty() && point.knob_names) {
    for (std::size_t s = 0; s < schedule.stage_order.size(); ++s) {
      for (std::size_t k = 0; k < schedule.stage_order[s].size(); ++k) {
        const int node = schedule.stage_order[s][k];
        if (point.knob[node] != 0) plan.stages[s][k].knobs = (*point.knob_names)[point.knob[node]];
      }
    }
  }
  plan.predicted = model::Prediction{point.time_s, point.energy_j};
  return plan;
}

}  // namespace joulepipe::solver
