#include "frontier_chart.hpp"

namespace joulepipe::cli {

report::LineChart FrontierChart(const solver::Frontier& frontier,
                                const solver::Evaluation& baseline,
                                const std::vector<LabelledPoint>& labelled, double energy_scale,
                                const std::string& title, const std::string& subtitle) {
  // kJ, or MJ once the baseline reaches 10 MJ (whole jobs).
  const bool mega = baseline.energy_j * energy_scale >= 1e7;
  const double kj = energy_scale / (mega ? 1e6 : 1e3);
  report::LineChart chart;
  chart.title = title;
  chart.subtitle = subtitle;
  chart.x_label = "iteration time (s)";
  chart.y_label = mega ? "energy per iteration (MJ)" : "energy per iteration (kJ)";

  report::Series plans{"frontier plans (real clocks)", {}, "#1f77b4", false, false, {}};
  for (const solver::FrontierPoint& p : frontier.points) {
    plans.points.push_back({p.time_s, p.energy_j * kj});
  }
  // The bound is drawn only over the plans' time range: beyond it the
  // relaxation keeps going where no real clock can follow.
  report::Series bound{"lower bound (relaxation)", {}, "#7f7f7f", true, false, {}};
  if (!frontier.points.empty()) {
    const double t_end = frontier.points.back().time_s;
    for (const solver::BoundPoint& b : frontier.bound) {
      if (b.time_s > t_end) break;
      bound.points.push_back({b.time_s, b.energy_j * kj});
    }
  }
  chart.series.push_back(std::move(plans));
  if (!bound.points.empty()) chart.series.push_back(std::move(bound));

  chart.markers.push_back(
      {"all max clock", {baseline.time_s, baseline.energy_j * kj}, "#d62728", {}});
  for (const LabelledPoint& p : labelled) {
    chart.markers.push_back({p.label, {p.time_s, p.energy_j * kj}, "#2ca02c", {}});
  }
  return chart;
}

}  // namespace joulepipe::cli
