// CostHull: the clock choices of one (profiled stage, instruction kind) seen
// as a time -> effective-energy tradeoff.
//
// Effective energy of a point is e - P_block * t: what running the instruction
// costs beyond what the GPU would burn anyway while blocked (model/energy.hpp). With
// it, iteration energy = sum of effective energies + S * P_block * T.
//
//   pareto    every measured clock that no other clock beats on both time and
//             effective energy, ascending time (so strictly descending cost).
//   vertices  the lower convex hull of `pareto` from the fastest point to the
//             cheapest one: ascending time, descending cost, convex (slopes
//             increase towards zero). Every vertex is a real clock.
// Slowing beyond the cheapest point only costs energy and time, so neither
// list goes past it.
#pragma once

#include <vector>

#include "joulepipe/model/profile.hpp"

namespace joulepipe::solver {

struct Option {
  int mhz = 0;
  int knob = 0;  // the point's knob setting (model::Profile::knob_settings() index)
  double time_s = 0;
  double energy_j = 0;  // measured energy
  double cost_j = 0;    // effective energy: energy_j - P_block * time_s
};

struct CostHull {
  std::vector<Option> pareto;
  std::vector<Option> vertices;
  std::vector<int> vertex_in_pareto;  // vertices[k] == pareto[vertex_in_pareto[k]]

  // Slope magnitude (J/s) of hull segment k (between vertices k and k+1).
  double SegmentSlope(int k) const {
    return (vertices[k].cost_j - vertices[k + 1].cost_j) /
           (vertices[k + 1].time_s - vertices[k].time_s);
  }
  // Convex interpolation of the hull at time t in [vertices.front, vertices.back].
  double CostAt(double t) const;
};

// Index of the slowest option whose time is <= room in a list ascending in
// time (a CostHull's pareto list), or -1 if even the fastest does not fit.
int SlowestWithin(const std::vector<Option>& options, double room);

// Requires at least one point. P_block >= 0.
CostHull BuildCostHull(const std::vector<model::ClockPoint>& points, double p_block_w);

}  // namespace joulepipe::solver
