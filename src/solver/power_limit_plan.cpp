#include "joulepipe/solver/power_limit_plan.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/profile_fit.hpp"
#include "joulepipe/schedule/replay.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::solver {
namespace {

double Power(const model::ClockPoint& p) {
  return p.energy_j / p.time_s;
}

// The state of a search: one option index per stage.
using State = std::vector<int>;

// Per stage, option and row: the row's time and energy under the option.
struct Tables {
  std::vector<std::vector<std::vector<double>>> time, energy;  // [stage][option][row]
  std::vector<int> node_stage, node_row;                       // per node id
};

class Evaluator {
 public:
  Evaluator(const schedule::Schedule& schedule, const Tables& tables, double p_block_w,
            const std::atomic<bool>* cancel)
      : schedule_(schedule),
        tables_(tables),
        p_block_w_(p_block_w),
        cancel_(cancel),
        finish_(schedule.num_nodes(), 0.0) {}

  // (time, energy) of a state.
  std::pair<double, double> operator()(const State& state) {
    if ((++evaluations_ & 255) == 0 && cancel_ != nullptr &&
        cancel_->load(std::memory_order_relaxed)) {
      throw model::Cancelled("power-limit planning cancelled");
    }
    double makespan = 0, energy = 0, busy = 0;
    for (int node : schedule_.topological_order) {
      const int s = tables_.node_stage[node], r = tables_.node_row[node];
      const double t = tables_.time[s][state[s]][r];
      double start = 0;
      for (int q : schedule_.predecessors[node]) start = std::max(start, finish_[q]);
      finish_[node] = start + t;
      makespan = std::max(makespan, finish_[node]);
      energy += tables_.energy[s][state[s]][r];
      busy += t;
    }
    return {makespan,
            model::IterationEnergyJ(energy, busy, schedule_.spec.stages, makespan, p_block_w_)};
  }

  long evaluations() const { return evaluations_; }

 private:
  const schedule::Schedule& schedule_;
  const Tables& tables_;
  const double p_block_w_;
  const std::atomic<bool>* cancel_;
  std::vector<double> finish_;
  long evaluations_ = 0;
};

struct Visited {
  double time_s, energy_j;
  State state;
};

// The moves from `state`: one stage from option j to j+1, j+2, j+4, ...
template <typename Visit>
void ForEachMove(const State& state, const std::vector<int>& option_counts, Visit visit) {
  State next = state;
  for (std::size_t s = 0; s < state.size(); ++s) {
    for (int step = 1; state[s] + step < option_counts[s]; step *= 2) {
      next[s] = state[s] + step;
      visit(next);
    }
    next[s] = state[s];
  }
}

// Relative tolerance on energy: a move must save more than this to count.
constexpr double kSaving = 1e-12;

// From every stage at option 0, the best-ratio move until none saves.
void RatioPath(Evaluator& eval, const std::vector<int>& counts, std::vector<Visited>* visited) {
  State state(counts.size(), 0);
  auto [t, e] = eval(state);
  visited->push_back({t, e, state});
  for (;;) {
    bool found = false, found_free = false;
    double best_key = 0, bt = 0, be = 0;
    State best;
    ForEachMove(state, counts, [&](const State& next) {
      const auto [nt, ne] = eval(next);
      if (ne >= e * (1 - kSaving)) return;
      const double saved = e - ne, added = nt - t;
      const bool free = added <= 0;
      const double key = free ? saved : saved / added;
      if (!found || (free && !found_free) || (free == found_free && key > best_key)) {
        found = true, found_free = free, best_key = key, best = next, bt = nt, be = ne;
      }
    });
    if (!found) return;
    state = best, t = bt, e = be;
    visited->push_back({t, e, state});
  }
}

// Pair moves: one stage to a higher limit (1, 2, 4, ... options up), another
// to a lower one (1, 2, 4, ... down): the first-improvement local search
// that follows the greedy at requested deadlines, where a single move is
// stuck because the time it needs is held by another stage.
void PairSearch(Evaluator& eval, const std::vector<int>& counts, double deadline_s, State* state,
                double* t, double* e) {
  const int stages = static_cast<int>(counts.size());
  for (int round = 0; round < 64; ++round) {
    bool improved = false;
    for (int up = 0; up < stages && !improved; ++up) {
      for (int a = 1; (*state)[up] - a >= 0 && !improved; a *= 2) {
        for (int down = 0; down < stages && !improved; ++down) {
          if (down == up) continue;
          for (int b = 1; (*state)[down] + b < counts[down]; b *= 2) {
            State next = *state;
            next[up] -= a;
            next[down] += b;
            const auto [nt, ne] = eval(next);
            if (nt <= deadline_s && ne < *e * (1 - kSaving)) {
              *state = next, *t = nt, *e = ne;
              improved = true;
              break;
            }
          }
        }
      }
    }
    if (!improved) return;
  }
}

// From every stage at option 0, the move that saves the most within the
// deadline, until none does; then, when `polish`, pair moves.
void WithinDeadline(Evaluator& eval, const std::vector<int>& counts, double deadline_s, bool polish,
                    std::vector<Visited>* visited) {
  State state(counts.size(), 0);
  auto [t, e] = eval(state);
  if (t > deadline_s) return;
  for (;;) {
    bool found = false;
    double bt = 0, be = 0;
    State best;
    ForEachMove(state, counts, [&](const State& next) {
      const auto [nt, ne] = eval(next);
      if (nt > deadline_s || ne >= e * (1 - kSaving)) return;
      if (!found || ne < be) found = true, best = next, bt = nt, be = ne;
    });
    if (!found) break;
    state = best, t = bt, e = be;
  }
  if (polish) PairSearch(eval, counts, deadline_s, &state, &t, &e);
  visited->push_back({t, e, state});
}

void CheckOptions(const LimitPlanOptions& options) {
  auto bad = [](const std::string& field, const std::string& why) {
    throw model::InputError("LimitPlanOptions::" + field + " " + why);
  };
  if (!std::isfinite(options.p_block_w) || options.p_block_w < 0)
    bad("p_block_w", "must be a finite power >= 0 W");
  if (!std::isfinite(options.min_limit_w) || options.min_limit_w < 0)
    bad("min_limit_w", "must be a finite power >= 0 W (0 = no floor)");
  if (!std::isfinite(options.max_limit_w) || options.max_limit_w < 0)
    bad("max_limit_w", "must be a finite power >= 0 W (0 = no ceiling)");
  if (options.max_limit_w > 0 && options.max_limit_w < options.min_limit_w)
    bad("max_limit_w", "must be >= min_limit_w");
  if (options.grid_deadlines < 0 || options.grid_deadlines > 10'000)
    bad("grid_deadlines", "must be 0..10000");
  for (double d : options.deadlines_s) {
    if (!std::isfinite(d) || d <= 0) bad("deadlines_s", "must hold finite times > 0 s");
  }
}

}  // namespace

int ClockUnderLimit(const std::vector<model::ClockPoint>& points, double watts) {
  for (const model::ClockPoint& p : points) {  // highest clock first
    if (Power(p) <= watts) return p.mhz;
  }
  return 0;
}

const LimitPoint* LimitFrontier::BestWithin(double time_s) const {
  const LimitPoint* best = nullptr;
  for (const LimitPoint& p : points) {
    if (p.time_s <= time_s) best = &p;  // ascending time, descending energy
  }
  return best;
}

LimitFrontier SolveLimitFrontier(const schedule::Schedule& schedule, const model::Profile& profile,
                                 const LimitPlanOptions& options) {
  CheckOptions(options);
  const schedule::Spec& spec = schedule.spec;
  schedule::CheckProfileFits(profile, spec, "the profile");
  const int profile_stages = profile.num_stages();
  const int stages = spec.stages;

  LimitFrontier out;
  Tables tables;
  out.rows.resize(stages);
  out.options.resize(stages);
  tables.node_stage.resize(schedule.num_nodes());
  tables.node_row.resize(schedule.num_nodes());
  // Rows per GPU, in order of first use.
  std::vector<std::map<std::pair<int, model::Kind>, int>> row_index(stages);
  for (int node = 0; node < schedule.num_nodes(); ++node) {
    const model::Instruction& ins = schedule.nodes[node];
    const int p = schedule::ProfileStage(spec, profile_stages, ins);
    auto [it, added] = row_index[ins.stage].emplace(std::make_pair(p, ins.kind),
                                                    static_cast<int>(out.rows[ins.stage].size()));
    if (added) out.rows[ins.stage].push_back({p, ins.kind});
    tables.node_stage[node] = ins.stage;
    tables.node_row[node] = it->second;
  }

  tables.time.resize(stages);
  tables.energy.resize(stages);
  for (int s = 0; s < stages; ++s) {
    const std::vector<LimitRow>& rows = out.rows[s];
    // Limits where some row's clock changes: its rows' powers. Below the
    // highest of the rows' lowest-clock powers some row has no clock.
    double floor_w = options.min_limit_w, top_w = 0;
    std::set<double> thresholds;
    for (const LimitRow& r : rows) {
      const auto& points = profile.Points(r.profile_stage, r.kind);
      double row_min = std::numeric_limits<double>::infinity(), row_max = 0;
      for (const model::ClockPoint& p : points) {
        thresholds.insert(Power(p));
        row_min = std::min(row_min, Power(p));
        row_max = std::max(row_max, Power(p));
      }
      floor_w = std::max(floor_w, row_min);
      top_w = std::max(top_w, row_max);
    }
    // Option 0: the default limit.
    LimitOption defaults;
    for (const LimitRow& r : rows)
      defaults.mhz.push_back(profile.MaxClock(r.profile_stage, r.kind).mhz);
    out.options[s].push_back(defaults);
    // Walk the thresholds from the top down: each range [tau, next) of
    // limits gives one tuple of clocks.
    std::vector<double> taus(thresholds.begin(), thresholds.end());
    for (int i = static_cast<int>(taus.size()) - 1; i >= 0; --i) {
      const double lo = taus[i];
      const double hi = i + 1 < static_cast<int>(taus.size()) ? taus[i + 1] : top_w;
      if (lo >= top_w) continue;  // at or above every row's top power: the default
      // The part of [lo, hi) at or above the floor.
      const double from = std::max(lo, floor_w);
      if (from >= hi) continue;
      LimitOption option;
      option.watts = std::round((from + hi) / 2 * 10) / 10;
      if (option.watts < from || option.watts >= hi) option.watts = (from + hi) / 2;
      for (const LimitRow& r : rows)
        option.mhz.push_back(
            ClockUnderLimit(profile.Points(r.profile_stage, r.kind), option.watts));
      if (options.max_limit_w > 0 && option.watts > options.max_limit_w) {
        // Above what the GPU accepts; the top of the range may still fall
        // in this interval.
        if (options.max_limit_w < from) continue;
        option.watts = options.max_limit_w;
        for (std::size_t r = 0; r < rows.size(); ++r)
          option.mhz[r] =
              ClockUnderLimit(profile.Points(rows[r].profile_stage, rows[r].kind), option.watts);
      }
      if (option.mhz != out.options[s].back().mhz) out.options[s].push_back(option);
    }
    for (const LimitOption& option : out.options[s]) {
      std::vector<double> t, e;
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const model::ClockPoint* p =
            profile.Find(rows[r].profile_stage, rows[r].kind, option.mhz[r]);
        t.push_back(p->time_s);
        e.push_back(p->energy_j);
      }
      tables.time[s].push_back(std::move(t));
      tables.energy[s].push_back(std::move(e));
    }
  }

  std::vector<int> counts;
  for (const auto& o : out.options) counts.push_back(static_cast<int>(o.size()));
  Evaluator eval(schedule, tables, options.p_block_w, options.cancel);
  std::vector<Visited> visited;
  RatioPath(eval, counts, &visited);
  double slowest = 0;
  for (const Visited& v : visited) slowest = std::max(slowest, v.time_s);
  const double fastest = visited.front().time_s;
  for (double d : options.deadlines_s) WithinDeadline(eval, counts, d, true, &visited);
  WithinDeadline(eval, counts, fastest, true, &visited);
  for (int i = 0; i < options.grid_deadlines; ++i) {
    const double d = fastest + (slowest - fastest) * (i + 1) / options.grid_deadlines;
    WithinDeadline(eval, counts, d, false, &visited);
  }

  auto to_point = [&](const Visited& v) {
    LimitPoint p;
    p.time_s = v.time_s;
    p.energy_j = v.energy_j;
    for (int s = 0; s < stages; ++s) p.watts.push_back(out.options[s][v.state[s]].watts);
    p.mhz.resize(schedule.num_nodes());
    for (int node = 0; node < schedule.num_nodes(); ++node) {
      const int s = tables.node_stage[node];
      p.mhz[node] =
          static_cast<std::uint16_t>(out.options[s][v.state[s]].mhz[tables.node_row[node]]);
    }
    return p;
  };
  out.defaults = to_point(visited.front());
  std::sort(visited.begin(), visited.end(), [](const Visited& a, const Visited& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.energy_j < b.energy_j;
  });
  for (const Visited& v : visited) {
    if (out.points.empty() || v.energy_j < out.points.back().energy_j) {
      out.points.push_back(to_point(v));
    }
  }
  out.evaluations = eval.evaluations();
  return out;
}

model::Plan ToPlan(const schedule::Schedule& schedule, const LimitPoint& point) {
  FrontierPoint clocks;
  clocks.time_s = point.time_s;
  clocks.energy_j = point.energy_j;
  clocks.mhz = point.mhz;
  model::Plan plan = ToPlan(schedule, clocks);
  plan.power_limits_w = point.watts;
  return plan;
}

}  // namespace joulepipe::solver
