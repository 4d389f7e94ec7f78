#include "joulepipe/solver/operating_point.hpp"

#include <vector>

namespace joulepipe::solver {

std::size_t ChooseOperatingPoint(const Frontier& frontier, const model::Objective& objective,
                                 double deadline_s, int gpus, double scale) {
  std::vector<model::Prediction> points;
  points.reserve(frontier.points.size());
  for (const FrontierPoint& p : frontier.points) points.push_back({p.time_s, p.energy_j});
  return model::ChooseOperatingPoint(points, objective, deadline_s, gpus, scale);
}

}  // namespace joulepipe::solver
