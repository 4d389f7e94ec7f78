// The frontier as a chart (report::LineChart): frontier plans, the
// relaxation's lower bound, the all-max-clock baseline and labelled plans.
// Energies are shown in kJ (MJ from 10 MJ up), times in s.
#pragma once

#include <string>
#include <vector>

#include "joulepipe/report/line_chart.hpp"
#include "joulepipe/solver/frontier.hpp"

namespace joulepipe::cli {

struct LabelledPoint {
  std::string label;
  double time_s = 0;
  double energy_j = 0;
};

// `energy_scale` multiplies every energy (e.g. GPUs per stage x pipelines to
// show a whole job); `title` and `subtitle` head the chart.
report::LineChart FrontierChart(const solver::Frontier& frontier,
                                const solver::Evaluation& baseline,
                                const std::vector<LabelledPoint>& labelled, double energy_scale,
                                const std::string& title, const std::string& subtitle);

}  // namespace joulepipe::cli
