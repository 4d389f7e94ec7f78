#include "joulepipe/daemon/audit_log.hpp"

#include <fcntl.h>
#include <unistd.h>

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
                            "cannot open the audit log " + path + " for appending: " +
                                std::strerror(errno) +
                                "; fix the \"audit_log\" path or its directory");
  }
}

AuditLog::~AuditLog() {
  if (fd_ > 2) ::close(fd_);
}

void AuditLog::Write(const Peer& peer, const AuditEntry& entry) noexcept {
  try {
    std::string line = IsoTimeNow() + " pid=" + std::to_string(peer.pid) +
                       " uid=" + std::to_string(peer.uid) + " user=" + Token(peer.user) +
                       " op=" + Token(entry.op) + " device=" + Token(entry.device) +
                       " requested=" + Token(entry.requested) + " applied=" + Token(entry.applied) +
                       " result=" + Token(entry.result) + "\n";
    std::size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error(std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
  } catch (const std::exception& e) {
    if (!write_failed_) {
      write_failed_ = true;
      std::fprintf(stderr, "joulepiped: cannot write the audit log %s: %s\n",
                   path_.empty() ? "(stderr)" : path_.c_str(), e.what());
    }
  }
}

}  // namespace joulepipe::daemon
