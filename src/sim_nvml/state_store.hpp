// Device settings shared by every process that uses the same configuration.
//
// With a state file (config "state_file") the histories live in that JSON
// file: readers take a consistent snapshot without locking (writers replace
// the file atomically with rename), writers serialise on flock of
// "<state_file>.lock" and re-read the file under the lock before changing it.
// Without one, the histories live in this process only.
//
// The setter call log (config "call_log") is a file of JSON lines, appended
// under flock so that lines from several processes never interleave.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "device_model.hpp"

namespace joulepipe::sim_nvml {

// Histories by device UUID (a device with no entry has the default settings).
using DeviceHistories = std::map<std::string, DeviceHistory>;

class StateStore {
 public:
  explicit StateStore(std::string path = "") : path_(std::move(path)) {}

  // The current histories. Throws std::runtime_error on an unreadable or
  // corrupt state file (a missing file is an empty state).
  const DeviceHistories& Read();

  // Applies `change` to the current histories and persists the result.
  void Modify(const std::function<void(DeviceHistories&)>& change);

  const std::string& path() const { return path_; }

 private:
  bool Reload();  // re-parses the file if it changed since the last parse

  std::string path_;
  DeviceHistories histories_;
  // Identity of the parsed file version (0 = none parsed / missing).
  unsigned long long inode_ = 0, size_ = 0;
  long long mtime_ns_ = -1;
};

// Appends one line to the call log (no-op when path is empty). Errors are
// ignored: the log must never change what an NVML call returns.
void AppendCallLog(const std::string& path, const std::string& json_line);

}  // namespace joulepipe::sim_nvml
