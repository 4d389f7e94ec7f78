// Whole-file reading with a size limit checked before the file is read
// whole: every file joulepipe reads (plans, profiles, wait models, report
// inputs, the daemon's and the simulated NVML library's configurations).
#pragma once

#include <cstddef>
#include <string>

namespace joulepipe::model {

// The most bytes ReadWholeFile reads. A profile CSV of a thousand stages at a
// hundred clocks is about 10 MB and a plan JSON of a million instructions
// about 80 MB; anything longer is not a joulepipe input (a device such as
// /dev/zero, a log, a disk image) and would take minutes and gigabytes.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{256} << 20;  // 256 MiB
// Configuration files (joulepiped's, the simulated NVML library's) are a
// few kilobytes.
inline constexpr std::size_t kMaxConfigFileBytes = std::size_t{1} << 20;  // 1 MiB

// The bytes of the file at `path`: a regular file, or a pipe, FIFO or device
// read to its end (/dev/stdin). Throws InputError "cannot read <what>
// '<path>': <reason>" when it cannot be opened or read, e.g. `what` "plan",
// and "<what> '<path>' is 300 MiB, more than the 256 MiB ..." when it holds
// more than `max_bytes`: a regular file is refused before reading, anything
// else as soon as the limit is passed, so an endless source ends quickly.
std::string ReadWholeFile(const std::string& path, const std::string& what,
                          std::size_t max_bytes = kMaxInputFileBytes);

}  // namespace joulepipe::model
