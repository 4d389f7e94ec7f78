// `joulepipe tune`: which configuration of a training job (PP, TP, DP,
// microbatch size, schedule), with which clocks, uses the least energy at
// today's speed: flags -> tune::Tune (tune/tune.hpp) -> the summary and an
// output directory (envelope, candidates, the chosen plan).
#pragma once

#include <memory>
#include <string>

#include "joulepipe/model/output_files.hpp"
#include "joulepipe/tune/tune.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace joulepipe::cli {

// What `tune` prints: the job, what was searched, the four headline points
// (current at full clocks, clocks only, the chosen configuration at full
// clocks and with its plan), the saving split and the chosen memory.
std::string FormatTuneReport(const tune::TuneResult& result, const std::string& job_text,
                             const std::string& out_dir);

// The files of --out: envelope.csv, envelope.svg, candidates.csv,
// chosen.json (the chosen configuration's plan) and summary.json.
void WriteTuneOutputs(const tune::TuneResult& result, const std::string& job_text,
                      model::StagedDirectory* staged, const std::atomic<bool>* cancel);
std::string TuneSummaryJson(const tune::TuneResult& result, const std::string& job_text);

struct TuneFlags;
class TuneSubcommand : public Subcommand {
 public:
  explicit TuneSubcommand(CLI::App* app);
  ~TuneSubcommand() override;
  int Run() const override;

 private:
  std::unique_ptr<TuneFlags> flags_;
};

}  // namespace joulepipe::cli
