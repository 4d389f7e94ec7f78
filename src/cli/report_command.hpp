// `joulepipe report`: one self-contained HTML file from a `plan` output
// directory (and optionally a `simulate --json` run and a `measure --json`
// window): the frontier with its operating points, the pipeline timeline
// coloured by clock, energy per stage busy and blocked, the savings and a
// methodology box. Reading and checking the inputs is here; drawing is the
// report part's (include/joulepipe/report/).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

struct ReportInputs {
  std::string frontier_dir;
  nlohmann::json summary;  // DIR/summary.json
  struct Row {
    double time_s = 0;
    double energy_j = 0;
  };
  std::vector<Row> frontier;  // DIR/frontier.csv, ascending time
  std::string plan_name;
  model::Plan plan;  // --plan, or DIR/chosen.json
  std::string profile_name;
  model::Profile profile;
  std::optional<nlohmann::json> sim;      // --sim
  std::optional<nlohmann::json> measure;  // --measure
  std::string sim_name, measure_name;
  // W per GPU counted with the GPUs' energy for the node-energy point: the
  // flag, else the measured CPU + DRAM power per GPU, else the plan's
  // --host-power, else none (0).
  double host_power_w = 0;
  std::string host_power_source;  // for the methodology box
  double max_slowdown = 1.05;     // the slowdown-budget point
};

// The report as an HTML document. Throws model::InputError when the inputs
// do not belong together (another schedule, profile or P_block).
std::string RenderReport(const ReportInputs& inputs);

struct ReportFlags;
class ReportSubcommand : public Subcommand {
 public:
  explicit ReportSubcommand(CLI::App* app);
  ~ReportSubcommand() override;
  int Run() const override;

 private:
  std::unique_ptr<ReportFlags> flags_;
};

}  // namespace joulepipe::cli
