// LogBuffer: where log lines from C++ threads wait for Python to read them.
//
// The runtime's log callbacks run on its own threads (the clock controller,
// the coordinator client's sender), which must never take the GIL: a
// training thread holding it while it joins such a thread would deadlock.
// So the callbacks only append here, under a mutex, and Python drains the
// buffer (take_log()) at step boundaries. The buffer keeps the newest
// kCapacity lines; older ones are dropped and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace joulepipe::python {

class LogBuffer {
 public:
  static constexpr std::size_t kCapacity = 1000;

  // Never throws (a line that cannot be stored is counted as dropped).
  void Push(const std::string& line) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      if (lines_.size() == kCapacity) {
        lines_.pop_front();
        ++dropped_;
      }
      lines_.push_back(line);
    } catch (...) {
      ++dropped_;
    }
  }

  // Every line held, oldest first; the buffer is left empty.
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out(std::make_move_iterator(lines_.begin()),
                                 std::make_move_iterator(lines_.end()));
    lines_.clear();
    return out;
  }

  // Lines dropped so far because the buffer was full.
  std::uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return dropped_;
  }

  // A callback for AgentOptions::log and friends that appends to `buffer`.
  static std::function<void(const std::string&)> Sink(std::shared_ptr<LogBuffer> buffer) {
    return [buffer](const std::string& line) { buffer->Push(line); };
  }

 private:
  mutable std::mutex mutex_;
  std::deque<std::string> lines_;
  std::uint64_t dropped_ = 0;
};

}  // namespace joulepipe::python
