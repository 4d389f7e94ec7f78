// joulepiped's audit log against a flood and failed writes (issue 61, 7): an
// allowed user's refused requests were logged without a limit (250 MB in
// 10 s), and after one failed write later changes went unaudited.
#include "joulepipe/daemon/audit_log.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace joulepipe::daemon {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

int Lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

Peer User(uid_t uid) {
  Peer p;
  p.pid = 4242;
  p.uid = uid;
  p.user = "user" + std::to_string(uid);
  return p;
}

TEST(AuditLog, RefusalsAreLimitedPerUserAndCountedChangesNever) {
  const fs::path path =
      fs::temp_directory_path() / ("joulepipe-audit-" + std::to_string(::getpid()) + ".log");
  fs::remove(path);
  {
    AuditLog log(path.string());
    const AuditEntry refused{"set_locked_clocks", "0", "900-900", "-", "not allowed: uid 1000"};
    for (int i = 0; i < 10'000; ++i) log.Write(User(1000), refused);
    // Another user is not silenced by the first one's flood.
    log.Write(User(1001), refused);
    // A change that was applied is always written, with the count dropped.
    const AuditEntry applied{"set_locked_clocks", "GPU-0", "900-900", "900-900", "ok"};
    for (int i = 0; i < 500; ++i) log.Write(User(1000), applied);
    EXPECT_GE(log.dropped(), 10'000u - 101u);
    EXPECT_EQ(log.lost(), 0u);
  }
  const std::string text = ReadAll(path);
  // At most the burst (and what a second refills) of 10,000 refusals, one
  // of the other user's, and all 500 changes.
  EXPECT_LE(Lines(text), 101 + 1 + 500 + 1) << text.substr(0, 500);
  EXPECT_GE(Lines(text), 100 + 1 + 500);
  EXPECT_NE(text.find("uid=1001"), std::string::npos);
  const std::size_t first_ok = text.find("result=ok");
  ASSERT_NE(first_ok, std::string::npos);
  const std::string ok_line = text.substr(first_ok, text.find('\n', first_ok) - first_ok);
  EXPECT_NE(ok_line.find(" dropped=99"), std::string::npos) << ok_line;  // 9,9xx dropped
  fs::remove(path);
}

TEST(AuditLog, AFailedWriteIsRetriedAtEachLineAndCounted) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  AuditLog log("/dev/full");  // every write: ENOSPC
  const AuditEntry applied{"set_locked_clocks", "GPU-0", "900-900", "900-900", "ok"};
  for (int i = 0; i < 5; ++i) log.Write(User(1000), applied);
  EXPECT_EQ(log.lost(), 5u);  // each one tried (the file reopened), none skipped
}

}  // namespace
}  // namespace joulepipe::daemon
