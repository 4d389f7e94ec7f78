// What the `simulate` command adds to sim::SimulateJob (simulate_job.hpp):
// its flags, the summary for people, the JSON and the timeline file.
//
// All figures are GPU energy simulated from the profile (not measured).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "joulepipe/sim/simulate_job.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// Said next to every figure `simulate` prints.
inline constexpr char kSimulatedFigures[] =
    "GPU energy, simulated from the profile (not measured); CPU and DRAM not included";

// The comparison for people: inputs, the two policies' iteration time,
// energy per iteration and saving, GPU count, and the methodology line.
std::string FormatSimulationSummary(const sim::SimulateOutcome& outcome);

// One JSON object and a newline:
//   {"baseline":{"time_s":..,"energy_j":..},"joulepipe":{...},"saving_pct":..,
//    ...inputs, gpus, per-pipeline and per-iteration figures}
// time_s and energy_j are means per iteration over the whole job.
std::string SimulationJson(const sim::SimulateOutcome& outcome);
// The same object, for a caller that adds to it before writing it.
nlohmann::ordered_json SimulationJsonObject(const sim::SimulateOutcome& outcome);

// Chrome trace-event JSON of the recorded iterations: joulepipe pipelines
// as pid p, baseline pipelines as pid D + p, stages as tid.
std::string SimulationTimeline(const sim::SimulateOutcome& outcome);

// The subcommand itself: registers `simulate`, its flags and help on `app`
// (app.cpp); Run() checks the flags, reads the profile, calls sim::SimulateJob
// and prints (and writes --timeline). Run() throws model::InputError on bad
// input.
struct SimulateFlags;
class SimulateSubcommand : public Subcommand {
 public:
  explicit SimulateSubcommand(CLI::App* app);
  ~SimulateSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<SimulateFlags> flags_;
};

}  // namespace joulepipe::cli
