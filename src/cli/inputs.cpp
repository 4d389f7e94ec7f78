// Flag reading and the checks on user input that only the command line has.
#include "inputs.hpp"

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/physics/workload.hpp"

namespace joulepipe::cli {

std::optional<double> IfGiven(const CLI::Option* option, double value) {
  if (option->count() == 0) return std::nullopt;
  return value;
}

schedule::Spec ScheduleFromFlags(const std::string& name, int stages, int microbatches, int chunks,
                                 bool chunks_given) {
  schedule::Spec spec;
  if (!schedule::ParseKind(name, &spec.kind)) {
    throw model::InputError("--schedule '" + name + "' is not one of gpipe, 1f1b, interleaved");
  }
  const bool interleaved = spec.kind == schedule::Kind::kInterleaved;
  if (!interleaved && chunks_given) {
    throw model::InputError("--chunks applies only to --schedule interleaved (got --schedule " +
                            name + "); drop --chunks or use --schedule interleaved");
  }
  if (interleaved && chunks < 2) {
    throw model::InputError("--chunks must be at least 2 for --schedule interleaved (got " +
                            std::to_string(chunks) +
                            "); use --schedule 1f1b for one chunk per stage");
  }
  spec.stages = stages;
  spec.microbatches = microbatches;
  spec.chunks = interleaved ? chunks : 1;
  return spec;
}

void AddJobFlags(CLI::App* c, std::string* model, std::string* gpu, long long* gpus,
                 const std::string& gpus_help) {
  c->add_option("--model", *model, "Transformer model id (`profile --help` lists them)")
      ->required()
      ->type_name("ID");
  c->add_option("--gpu", *gpu, "GPU type id (`profile --help` lists them)")
      ->required()
      ->type_name("ID");
  c->add_option("--gpus", *gpus, gpus_help)->required()->type_name("N");
}

int DataParallelFromFlags(long long gpus, int tp, int pp) {
  if (tp < 1 || pp < 1) {
    throw model::InputError(Printf("--tp and --pp must be >= 1 (got %d and %d)", tp, pp));
  }
  const long long pipeline_gpus = static_cast<long long>(tp) * pp;
  if (gpus < pipeline_gpus || gpus % pipeline_gpus != 0) {
    throw model::InputError(
        Printf("--gpus must be a multiple of --tp x --pp = %lld (got %lld): each "
               "data-parallel pipeline has TP x PP GPUs",
               pipeline_gpus, gpus));
  }
  const long long dp = gpus / pipeline_gpus;
  if (dp > physics::kMaxDp) {
    throw model::InputError(Printf("--gpus %lld makes %lld data-parallel pipelines; at most %d",
                                   gpus, dp, physics::kMaxDp));
  }
  return static_cast<int>(dp);
}

model::RowRuleResult ReadPlannableProfile(const std::string& path) {
  return model::PlannableRows(model::ReadProfileCsv(path), path);
}

}  // namespace joulepipe::cli
