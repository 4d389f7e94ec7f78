// The plan report task: one self-contained HTML page (inline SVG and CSS,
// no scripts, nothing fetched) about a planned pipeline: the frontier with
// its operating points, the plan's and the baseline's timelines, energy per
// stage, and, when given, a simulation of the job and a measurement.
// `joulepipe report` and `joulepipe demo` call it; they only read the files.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"

namespace joulepipe::report {

struct PlanReportInputs {
  std::string frontier_dir;
  nlohmann::json summary;  // DIR/summary.json
  struct Row {
    double time_s = 0;
    double energy_j = 0;
  };
  std::vector<Row> frontier;  // DIR/frontier.csv, ascending time
  std::string plan_name;
  model::Plan plan;  // the plan to show (DIR/chosen.json by default)
  std::string profile_name;
  model::Profile profile;
  std::optional<nlohmann::json> sim;      // a `joulepipe simulate --json` run
  std::optional<nlohmann::json> measure;  // a `joulepipe measure --json` window
  std::string sim_name, measure_name;
  // W per GPU counted with the GPUs' energy for the node-energy point (0:
  // none), and where it came from, for the methodology box.
  double host_power_w = 0;
  std::string host_power_source;
  double max_slowdown = 1.05;  // the slowdown-budget point
};

// The report as an HTML document. Throws model::InputError when the inputs
// do not belong together (another schedule, profile or P_block).
std::string RenderPlanReport(const PlanReportInputs& inputs);

// Reading joulepipe's own JSON outputs: the number at `keys` (InputError
// naming `where` and the path when it is missing or not a number), and the
// string at doc[a][b] (`fallback` when absent).
double OutputNumber(const nlohmann::json& doc, std::initializer_list<const char*> keys,
                    const std::string& where);
std::string OutputText(const nlohmann::json& doc, const char* a, const char* b,
                       const std::string& fallback);

}  // namespace joulepipe::report
