// Whole-file reading shared by the plan and profile readers.
#pragma once

#include <string>

namespace joulepipe::model {

// The bytes of the file at `path`. Throws InputError "cannot read <what>
// '<path>': <reason>" when it cannot be opened or read, e.g. `what` "plan".
std::string ReadWholeFile(const std::string& path, const std::string& what);

}  // namespace joulepipe::model
