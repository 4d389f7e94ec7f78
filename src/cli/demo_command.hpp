// `joulepipe demo`: a realistic large job, simulated on the measured profile
// built into the binary, with no input and no GPU.
//
// The job: GPT-3 175B on 1,024 A100-SXM GPUs, 16 data-parallel pipelines x 8
// stages x tensor-parallel 8, 1F1B with 96 microbatches per iteration, the
// Perseus SOSP'24 stage profile (embedded.hpp), P_block 83.64 W. 20 simulated
// iterations: 10 healthy, then pipeline 0 runs 1.2x slower for the rest.
// One frontier solve serves both phases.
#pragma once

#include <memory>
#include <string>

#include "joulepipe/sim/simulate_job.hpp"
#include "output_dir.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// Where the demo writes its files unless --out says otherwise.
inline constexpr char kDemoOutDir[] = "joulepipe-demo";

// The job as a sim::SimulateJob request.
sim::SimulateRequest DemoRequest();

// Tokens per iteration (global batch 1,536 sequences x 2,048 tokens) and the
// length of a full GPT-3 run (300B tokens, Brown et al. 2020), for the
// projection in MWh.
inline constexpr double kDemoTokensPerIteration = 1536.0 * 2048.0;
inline constexpr double kDemoRunTokens = 300e9;

// The report: what was simulated, the table (iteration time, energy per
// iteration, saving; healthy and straggler phases), the projection for a
// full run, and how to go on. `out_dir` names the written files ("" = none).
std::string FormatDemoReport(const sim::SimulateOutcome& outcome, const std::string& out_dir);

// report.html, frontier.svg, simulation.json, intrinsic_plan.json,
// straggler_plan.json; commits `staged`. `profile` is the one simulated.
void WriteDemoOutputs(const sim::SimulateOutcome& outcome, const model::Profile& profile,
                      StagedDirectory* staged);

// The subcommand: registers `demo`, its flags and help on `app`. Run() calls
// sim::SimulateJob with DemoRequest() on the embedded profile, writes --out
// (unless --no-files) and prints the report.
struct DemoFlags;
class DemoSubcommand : public Subcommand {
 public:
  explicit DemoSubcommand(CLI::App* app);
  ~DemoSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<DemoFlags> flags_;
};

}  // namespace joulepipe::cli
