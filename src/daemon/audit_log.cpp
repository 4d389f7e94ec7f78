#include "joulepipe/daemon/audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"

namespace joulepipe::daemon {
namespace {

// A value as one token: as is when plain, else a JSON string.
std::string Token(std::string_view value) {
  if (value.empty()) return "\"\"";
  for (unsigned char c : value) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) {
      return nlohmann::json(std::string(value))
          .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    }
  }
  return std::string(value);
}

}  // namespace

std::string IsoTimeNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const long millis = static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
  return text;
}

AuditLog::AuditLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) {
    throw model::InputError("Config::audit_log",
                            "cannot open the audit log " + path +
                                " for appending: " + std::strerror(errno) +
                                "; fix the \"audit_log\" path or its directory");
  }
}

AuditLog::~AuditLog() {
  if (fd_ > 2) ::close(fd_);
}

void AuditLog::Write(const Peer& peer, const AuditEntry& entry) noexcept {
  try {
    // A change that was applied is always written; a refusal or a failure
    // spends one of the user's tokens.
    const bool applied = entry.result.rfind("ok", 0) == 0;
    Bucket& bucket = buckets_[peer.uid];
    const Clock::time_point now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - bucket.refilled).count();
    bucket.tokens = std::min(kRefusedBurst, bucket.tokens + elapsed * kRefusedPerSecond);
    bucket.refilled = now;
    if (!applied) {
      if (bucket.tokens < 1) {
        ++bucket.dropped;
        ++dropped_total_;
        return;
      }
      bucket.tokens -= 1;
    }
    std::string line = IsoTimeNow() + " pid=" + std::to_string(peer.pid) +
                       " uid=" + std::to_string(peer.uid) + " user=" + Token(peer.user) +
                       " op=" + Token(entry.op) + " device=" + Token(entry.device) +
                       " requested=" + Token(entry.requested) + " applied=" + Token(entry.applied) +
                       " result=" + Token(entry.result);
    if (bucket.dropped > 0) line += " dropped=" + std::to_string(bucket.dropped);
    line += "\n";
    if (failing_) Reopen();
    if (WriteLine(line)) {
      bucket.dropped = 0;
      if (failing_) {
        failing_ = false;
        WriteLine(IsoTimeNow() + " joulepiped: the audit log is written again; " +
                  std::to_string(lost_unsaid_) + " lines were lost while it failed\n");
        std::fprintf(stderr, "joulepiped: the audit log %s is written again (%llu lines lost)\n",
                     path_.empty() ? "(stderr)" : path_.c_str(),
                     static_cast<unsigned long long>(lost_unsaid_));
        lost_unsaid_ = 0;
      }
      return;
    }
    ++lost_total_;
    ++lost_unsaid_;
    const bool say = !failing_ || now - said_failure_ >= std::chrono::minutes(1);
    failing_ = true;
    if (say) {
      said_failure_ = now;
      std::fprintf(stderr,
                   "joulepiped: cannot write the audit log %s: %s (%llu lines lost so far; "
                   "retried at each change)\n",
                   path_.empty() ? "(stderr)" : path_.c_str(), std::strerror(errno),
                   static_cast<unsigned long long>(lost_total_));
    }
  } catch (...) {
    ++lost_total_;  // out of memory formatting the line
  }
}

bool AuditLog::WriteLine(const std::string& line) noexcept {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

void AuditLog::Reopen() noexcept {
  if (path_.empty()) return;  // stderr
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return;
  if (fd_ > 2) ::close(fd_);
  fd_ = fd;
}

}  // namespace joulepipe::daemon
