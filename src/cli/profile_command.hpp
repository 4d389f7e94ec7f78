// `joulepipe profile`: a stage profile for `plan`. For now only simulated
// (--simulate): the transformer workload model (physics/workload.hpp) on a GPU
// of the catalog gives every stage's forward and backward time and energy at
// every SM clock. Measured in-situ profiling comes with the runtime.
//
// Every figure it writes or prints is simulated, per GPU (one of the tp GPUs
// of a stage), GPU energy only.
#pragma once

#include <memory>
#include <string>

#include "joulepipe/physics/gpu_model.hpp"
#include "joulepipe/physics/workload.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

struct ProfileRequest {
  physics::WorkloadSpec spec;             // spec.parallel.layer_split resolved (empty = even)
  std::string layer_split_text = "even";  // as given: even, balanced or a list
  const physics::GpuSpec* gpu = nullptr;  // from the catalog
  physics::ProfileOptions options;
  double dp_gbps = physics::kDefaultInterNodeGbps;  // per GPU, for the DP all-reduce estimate
  int microbatches = 0;                             // > 0: also estimate one 1F1B iteration
};

// The profile CSV (model::ProfileToCsv, docs/formats.md): metadata lines
// (gpu: `gpu`'s name, p_block_w: its catalog P_block, source: simulated,
// date, joulepipe_version), the header stage,instruction,frequency,time,energy,
// then per stage, per clock (highest first) a forward and a backward row;
// numbers with 17 significant digits. model::ParseProfileCsv reads it back
// exactly.
std::string SimulatedProfileCsv(const physics::SimulatedWorkload& workload,
                                const physics::GpuSpec& gpu);

// The summary for people: inputs, one line per stage (layers, forward and
// backward time at max clock, TFLOPs, compute share, least-energy clock),
// MFU, the DP all-reduce estimate, the GPU's P_block and the `plan` command
// to run next (`csv_name` names the profile in it).
std::string FormatProfileSummary(const physics::SimulatedWorkload& workload,
                                 const ProfileRequest& request, const std::string& csv_name);

// The subcommand: registers `profile`, its flags and help on `app`; Run()
// checks the flags (throwing model::InputError naming the flag), simulates,
// writes --out atomically (or the CSV to stdout) and prints the summary
// (to stdout with --out, else to stderr).
struct ProfileFlags;
class ProfileSubcommand : public Subcommand {
 public:
  explicit ProfileSubcommand(CLI::App* app);
  ~ProfileSubcommand() override;

  int Run() const override;  // the exit code

 private:
  std::unique_ptr<ProfileFlags> flags_;
};

}  // namespace joulepipe::cli
