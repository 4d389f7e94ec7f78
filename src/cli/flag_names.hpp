// The one place that knows how the library's field names read on the command
// line. Library errors name fields ("Spec::chunks must be ..."); the CLI shows
// them as flags ("--chunks must be ...").
#pragma once

#include <string>

namespace joulepipe::cli {

// `message` with every known "Struct::member" token replaced by its flag.
// Unknown tokens are left as they are.
std::string WithFlagNames(const std::string& message);

}  // namespace joulepipe::cli
