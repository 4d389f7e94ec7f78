// `joulepipe report`: one self-contained HTML file from a `plan` output
// directory (and optionally a `simulate --json` run and a `measure --json`
// window): the frontier with its operating points, the pipeline timeline
// coloured by clock, energy per stage busy and blocked, the savings and a
// methodology box. Reading the files is here; the report is the report
// part's task (report/plan_report.hpp).
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
