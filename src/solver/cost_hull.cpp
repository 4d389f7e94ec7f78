#include "joulepipe/solver/cost_hull.hpp"

#include <algorithm>

namespace joulepipe::solver {

double CostHull::CostAt(double t) const {
  if (t <= vertices.front().time_s) return vertices.front().cost_j;
  for (size_t k = 0; k + 1 < vertices.size(); ++k) {
    const Option& a = vertices[k];
    const Option& b = vertices[k + 1];
    if (t <= b.time_s)
      return a.cost_j + (t - a.time_s) * (b.cost_j - a.cost_j) / (b.time_s - a.time_s);
  }
  return vertices.back().cost_j;
}

int SlowestWithin(const std::vector<Option>& options, double room) {
  auto it = std::upper_bound(options.begin(), options.end(), room,
                             [](double r, const Option& o) { return r < o.time_s; });
  return static_cast<int>(it - options.begin()) - 1;
}

namespace {

// Cross product sign of (b - a) x (c - a) in the (time, cost) plane; <= 0
// means b is on or above the segment a-c, so b is not a lower-hull vertex.
double Cross(const Option& a, const Option& b, const Option& c) {
  return (b.time_s - a.time_s) * (c.cost_j - a.cost_j) -
         (b.cost_j - a.cost_j) * (c.time_s - a.time_s);
}

}  // namespace

CostHull BuildCostHull(const std::vector<model::ClockPoint>& points, double p_block_w) {
  std::vector<Option> options;
  options.reserve(points.size());
  for (const model::ClockPoint& p : points) {
    options.push_back({p.mhz, p.knob, p.time_s, p.energy_j, p.energy_j - p_block_w * p.time_s});
  }
  // Ascending time; among equal times the cheapest first, then the higher
  // clock, then the lower knob index (deterministic).
  std::sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    if (a.cost_j != b.cost_j) return a.cost_j < b.cost_j;
    if (a.mhz != b.mhz) return a.mhz > b.mhz;
    return a.knob < b.knob;
  });

  CostHull hull;
  for (const Option& o : options) {
    // Keep o only if it is strictly cheaper than every faster point.
    if (hull.pareto.empty() || o.cost_j < hull.pareto.back().cost_j) {
      if (!hull.pareto.empty() && o.time_s == hull.pareto.back().time_s) continue;
      hull.pareto.push_back(o);
    }
  }
  for (int i = 0; i < static_cast<int>(hull.pareto.size()); ++i) {
    const Option& o = hull.pareto[i];
    while (hull.vertices.size() >= 2 &&
           Cross(hull.vertices[hull.vertices.size() - 2], hull.vertices.back(), o) <= 0) {
      hull.vertices.pop_back();
      hull.vertex_in_pareto.pop_back();
    }
    hull.vertices.push_back(o);
    hull.vertex_in_pareto.push_back(i);
  }
  return hull;
}

}  // namespace joulepipe::solver
