// Checks on user input that only the command line has. Everything else
// (profiles that do not fit, P_block, grid size, ...) is checked by the
// library's task calls, whose errors app.cpp shows with flag names.
#pragma once

#include <string>

#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::cli {

// The schedule flags (--schedule, --stages, --microbatches, --chunks) as a
// Spec. --chunks is only for interleaved (then >= 2); `chunks_given` says
// whether the user passed it. Throws InputError naming the flag.
schedule::Spec ScheduleFromFlags(const std::string& schedule, int stages, int microbatches,
                                 int chunks, bool chunks_given);

}  // namespace joulepipe::cli
