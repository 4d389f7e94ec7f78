// joulepiped's audit log: one line per GPU change (set, reset, restore),
// written with a single write(2) to a file opened O_APPEND (or stderr), so
// lines are never interleaved or lost in a buffer if the daemon dies.
//
//   2026-11-30T08:15:00.123Z pid=4242 uid=1000 user=alice op=set_locked_clocks
//   device=GPU-... requested=900-1410 applied=900-1410 result=ok
//
// (one line). Values with spaces or quotes are written as JSON strings.
//
// Bounded against a flood (issue 61, 7): every change that was applied
// (result "ok...") is written; lines of refused or failed requests are
// limited per user to kRefusedBurst at once and kRefusedPerSecond a second
// after (a token bucket), and the next line written for that user says how
// many were dropped ("dropped=N"). A failed write is retried at the next
// line (the file reopened), said on stderr at most once a minute with the
// count of lines lost, and its recovery is said in the log itself.
#pragma once

#include <sys/types.h>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "joulepipe/daemon/peer.hpp"

namespace joulepipe::daemon {

struct AuditEntry {
  std::string op;         // set_locked_clocks, reset_power_limit, restore_locked_clocks, ...
  std::string device;     // the GPU's UUID (or the request's device if unknown)
  std::string requested;  // "900-1410" MHz, "250W", "-" for resets
  std::string applied;    // what was set, "-" if nothing
  std::string result;     // "ok" or the error message
};

class AuditLog {
 public:
  // `path` "" = stderr. Throws model::InputError (field "Config::audit_log")
  // if the file cannot be opened for appending, naming it and errno's text.
  explicit AuditLog(const std::string& path);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  static constexpr double kRefusedBurst = 100;
  static constexpr double kRefusedPerSecond = 10;

  // Never throws (see the top for what is limited and how failures go).
  void Write(const Peer& peer, const AuditEntry& entry) noexcept;
  const std::string& path() const { return path_; }
  // Lines of refused requests dropped by the limit, and lines lost to
  // failed writes, so far.
  std::uint64_t dropped() const { return dropped_total_; }
  std::uint64_t lost() const { return lost_total_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Bucket {
    double tokens = kRefusedBurst;
    Clock::time_point refilled = Clock::now();
    std::uint64_t dropped = 0;  // since the last line written for this user
  };
  bool WriteLine(const std::string& line) noexcept;
  void Reopen() noexcept;

  std::string path_;
  int fd_ = 2;
  std::map<uid_t, Bucket> buckets_;  // bounded: the daemon caps its clients per uid and in all
  std::uint64_t dropped_total_ = 0;
  std::uint64_t lost_total_ = 0;
  std::uint64_t lost_unsaid_ = 0;  // lines lost since the failure was last said
  bool failing_ = false;
  Clock::time_point said_failure_{};
};

// "2026-11-30T08:15:00.123Z" for the current time.
std::string IsoTimeNow();

}  // namespace joulepipe::daemon
