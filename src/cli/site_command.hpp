// `joulepipe site`: what a whole training run costs a site, baseline vs
// joulepipe: a simulated profile from the workload model (physics), then
// sim::ProjectSite (site.hpp), printed as a table or JSON.
#pragma once

#include <memory>
#include <string>

#include "joulepipe/sim/site.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// What `site` prints: the job, the run table (baseline, joulepipe, change)
// for each scenario, the budget's figures; units chosen for the magnitude.
std::string FormatSiteReport(const sim::SiteProjection& p, const std::string& job_text);
std::string SiteJson(const sim::SiteProjection& p, const std::string& job_text);

struct SiteFlags;
class SiteSubcommand : public Subcommand {
 public:
  explicit SiteSubcommand(CLI::App* app);
  ~SiteSubcommand() override;
  int Run() const override;

 private:
  std::unique_ptr<SiteFlags> flags_;
};

}  // namespace joulepipe::cli
