// What joulepipe records about itself in the files it writes: its version
// and when the file was made (ProfileMetadata::joulepipe_version and ::date).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace joulepipe::model {

// The joulepipe version, the CMake project version (e.g. "0.1.0").
std::string_view Version();

// `when` as ISO 8601 UTC to the second, e.g. "2025-03-01T14:05:09Z".
std::string IsoUtc(std::chrono::system_clock::time_point when);

// IsoUtc of the current time.
std::string IsoUtcNow();

}  // namespace joulepipe::model
