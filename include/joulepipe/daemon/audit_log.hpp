// joulepiped's audit log: one line per GPU change (set, reset, restore),
// written with a single write(2) to a file opened O_APPEND (or stderr), so
// lines are never interleaved or lost in a buffer if the daemon dies.
//
//   2026-11-30T08:15:00.123Z pid=4242 uid=1000 user=alice op=set_locked_clocks
//   device=GPU-... requested=900-1410 applied=900-1410 result=ok
//
// (one line). Values with spaces or quotes are written as JSON strings.
#pragma once

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

  // Never throws; a failed write is reported once on stderr.
  void Write(const Peer& peer, const AuditEntry& entry) noexcept;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = 2;
  bool write_failed_ = false;
};

// "2026-11-30T08:15:00.123Z" for the current time.
std::string IsoTimeNow();

}  // namespace joulepipe::daemon
