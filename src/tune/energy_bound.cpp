#include "energy_bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::tune {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Vertex {
  double t = 0;
  double d = 0;  // e - P_block t
};

// The lower convex hull of the points from the quickest to the least d:
// slower than that only costs more.
std::vector<Vertex> Hull(const std::vector<model::ClockPoint>& points, double p_block_w) {
  std::vector<Vertex> v;
  for (const model::ClockPoint& p : points)
    v.push_back({p.time_s, p.energy_j - p_block_w * p.time_s});
  std::sort(v.begin(), v.end(),
            [](const Vertex& a, const Vertex& b) { return a.t != b.t ? a.t < b.t : a.d < b.d; });
  std::vector<Vertex> hull;
  for (const Vertex& p : v) {
    if (!hull.empty() && hull.back().t == p.t) continue;  // same time: the lower d came first
    while (hull.size() >= 2) {
      const Vertex& a = hull[hull.size() - 2];
      const Vertex& b = hull.back();
      // Drop b if it is on or above the line a -> p.
      if ((b.d - a.d) * (p.t - a.t) >= (p.d - a.d) * (b.t - a.t)) {
        hull.pop_back();
      } else {
        break;
      }
    }
    hull.push_back(p);
  }
  // Keep the decreasing part.
  std::size_t end = 1;
  while (end < hull.size() && hull[end].d < hull[end - 1].d) ++end;
  hull.resize(end);
  return hull;
}

}  // namespace

PipelineBound::PipelineBound(const schedule::Schedule& schedule, const model::Profile& profile,
                             double p_block_w) {
  const int n = schedule.num_nodes();
  const int profile_stages = profile.num_stages();
  // Per (profile row, kind): the hull, computed once.
  std::map<std::pair<int, model::Kind>, std::vector<Vertex>> hulls;
  std::vector<const std::vector<Vertex>*> hull_of(n);
  std::vector<double> quickest(n);
  for (int i = 0; i < n; ++i) {
    const model::Instruction& in = schedule.nodes[i];
    const int row = schedule::ProfileStage(schedule.spec, profile_stages, in);
    auto [it, added] = hulls.try_emplace({row, in.kind});
    if (added) it->second = Hull(profile.Points(row, in.kind), p_block_w);
    hull_of[i] = &it->second;
    quickest[i] = it->second.front().t;
  }
  // Longest paths at quickest times: into each node (start) and out of it.
  std::vector<double> start(n, 0.0), tail(n, 0.0);
  for (int u : schedule.topological_order) {
    for (int v : schedule.successors[u]) start[v] = std::max(start[v], start[u] + quickest[u]);
  }
  for (auto it = schedule.topological_order.rbegin(); it != schedule.topological_order.rend();
       ++it) {
    const int u = *it;
    for (int v : schedule.successors[u]) tail[u] = std::max(tail[u], quickest[v] + tail[v]);
  }
  for (int i = 0; i < n; ++i) fastest_s_ = std::max(fastest_s_, start[i] + quickest[i] + tail[i]);

  block_rate_ = schedule.spec.stages * p_block_w;
  for (const std::vector<int>& order : schedule.stage_order) {
    Stage s;
    if (!order.empty()) s.capacity_offset = start[order.front()] + tail[order.back()];
    // Segments (ratio, extra time) of every instruction on the stage; equal
    // instructions share a hull, so count them.
    std::map<const std::vector<Vertex>*, int> count;
    for (int i : order) ++count[hull_of[i]];
    std::vector<std::pair<double, double>> segments;
    for (const auto& [hull, k] : count) {
      s.quickest_busy += k * hull->front().t;
      s.quickest_value += k * hull->front().d;
      for (std::size_t j = 1; j < hull->size(); ++j) {
        const double dt = (*hull)[j].t - (*hull)[j - 1].t;
        const double dd = (*hull)[j - 1].d - (*hull)[j].d;  // > 0
        segments.emplace_back(dd / dt, k * dt);
      }
    }
    std::sort(segments.begin(), segments.end(), std::greater<>());
    double time = 0, saving = 0;
    s.time_prefix.push_back(0);
    s.saving_prefix.push_back(0);
    for (const auto& [ratio, dt] : segments) {
      time += dt;
      saving += ratio * dt;
      s.ratio.push_back(ratio);
      s.time_prefix.push_back(time);
      s.saving_prefix.push_back(saving);
    }
    stages_.push_back(std::move(s));
  }
  // B is convex: its slope block_rate - sum of the marginal ratios grows
  // with tau. Bisect for where it turns non-negative.
  double lo = fastest_s_, hi = fastest_s_;
  for (const Stage& s : stages_) {
    hi = std::max(hi, s.capacity_offset + s.quickest_busy + s.time_prefix.back());
  }
  auto slope = [this](double tau) {
    double r = block_rate_;
    for (const Stage& s : stages_) r -= Ratio(s, tau);
    return r;
  };
  if (slope(lo) >= 0) {
    minimiser_ = lo;
  } else {
    for (int k = 0; k < 100 && hi - lo > 1e-12 * hi; ++k) {
      const double mid = 0.5 * (lo + hi);
      (slope(mid) < 0 ? lo : hi) = mid;
    }
    minimiser_ = hi;
  }
}

double PipelineBound::Value(const Stage& s, double tau) const {
  const double slack = tau - s.capacity_offset - s.quickest_busy;
  if (slack < 0) return kInfinity;
  // Segments fully taken, then part of the next.
  const auto it = std::upper_bound(s.time_prefix.begin(), s.time_prefix.end(), slack);
  const std::size_t full = static_cast<std::size_t>(it - s.time_prefix.begin()) - 1;
  double saving = s.saving_prefix[full];
  if (full < s.ratio.size()) saving += s.ratio[full] * (slack - s.time_prefix[full]);
  return s.quickest_value - saving;
}

double PipelineBound::Ratio(const Stage& s, double tau) const {
  const double slack = tau - s.capacity_offset - s.quickest_busy;
  if (slack < 0) return kInfinity;
  const auto it = std::upper_bound(s.time_prefix.begin(), s.time_prefix.end(), slack);
  const std::size_t full = static_cast<std::size_t>(it - s.time_prefix.begin()) - 1;
  return full < s.ratio.size() ? s.ratio[full] : 0.0;
}

double PipelineBound::At(double tau) const {
  // The critical path can be a little below a stage's own chain in floating
  // point; a stage's capacity decides feasibility.
  if (tau < fastest_s_ * (1 - 1e-12)) return kInfinity;
  double sum = block_rate_ * tau;
  for (const Stage& s : stages_) {
    const double v = Value(s, std::max(tau, s.capacity_offset + s.quickest_busy));
    sum += v;
  }
  return sum;
}

double PipelineBound::AtMost(double t) const {
  if (t < fastest_s_ * (1 - 1e-12)) return kInfinity;
  return At(std::min(t, std::max(minimiser_, fastest_s_)));
}

}  // namespace joulepipe::tune
