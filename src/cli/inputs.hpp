// Flag reading shared by the subcommands, and the checks on user input that
// only the command line has. Everything else (profiles that do not fit,
// P_block, grid size, ...) is checked by the library's task calls, whose
// errors app.cpp shows with flag names.
#pragma once

#include <optional>
#include <string>

#include "joulepipe/model/profile_rows.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace joulepipe::cli {

// `value` if the user gave `option` (CLI11 leaves the default otherwise),
// else nullopt: how a request's optional field (p_block_w) is filled.
std::optional<double> IfGiven(const CLI::Option* option, double value);

// The schedule flags (--schedule, --stages, --microbatches, --chunks) as a
// Spec. --chunks is only for interleaved (then >= 2); `chunks_given` says
// whether the user passed it. Throws InputError naming the flag.
schedule::Spec ScheduleFromFlags(const std::string& schedule, int stages, int microbatches,
                                 int chunks, bool chunks_given);

// --model, --gpu and --gpus, required, as the commands that size a job from
// the catalogues take them (site, tune); `gpus_help` says what --gpus is.
void AddJobFlags(CLI::App* command, std::string* model, std::string* gpu, long long* gpus,
                 const std::string& gpus_help);

// The data-parallel degree of --gpus in pipelines of --tp x --pp. Throws
// InputError naming the flags: TP or PP below 1, GPUs not a multiple of
// TP x PP, more than physics::kMaxDp pipelines.
int DataParallelFromFlags(long long gpus, int tp, int pp);

// The profile CSV at `path` as every command plans or replays it: read, then
// the one rule for its rows (model::PlannableRows: a measured profile's
// implausible rows left out and rows faster than the highest clock planned
// at its time; any other profile's implausible row an error naming its
// line). The notes say each row left out or adjusted: every command shows
// them.
model::RowRuleResult ReadPlannableProfile(const std::string& path);

}  // namespace joulepipe::cli
