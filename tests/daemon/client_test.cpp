// gpu::MakeDaemonClockControl (clock_control.hpp) against the built daemon.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "daemon_test_support.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/error.hpp"

namespace joulepipe::daemon::testing {
namespace {

TEST(DaemonClockControl, SaysHowToStartTheDaemonWhenNoneListens) {
  const std::string path = "/tmp/joulepiped-test-none-" + std::to_string(::getpid()) + ".sock";
  try {
    gpu::MakeDaemonClockControl(path);
    FAIL() << "no error";
  } catch (const gpu::GpuError& e) {
    EXPECT_CONTAINS(e.what(), "no joulepiped at " + path + ": connect failed");
    EXPECT_CONTAINS(e.what(), "systemctl start joulepiped");
  }
}

TEST(DaemonClockControl, SetsResetsAndRestores) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  {
    auto control = gpu::MakeDaemonClockControl(daemon.socket());
    EXPECT_EQ(control->Describe(), "joulepiped (" + daemon.socket() + ")");
    const std::vector<int> clocks = control->SupportedSmClocks(0);
    ASSERT_GT(clocks.size(), 10u);
    control->SetLockedClocks(0, clocks[8], clocks[2]);
    control->ResetLockedClocks(0);
    EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);

    // The contract: no clamping; unsupported or inverted is an error.
    EXPECT_THROW(control->SetLockedClocks(0, clocks[2], clocks[8]), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetLockedClocks(0, clocks[2] + 1, clocks[2] + 1), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetPowerLimit(0, 1), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetLockedClocks(9, clocks[2], clocks[2]), gpu::GpuArgumentError);
    EXPECT_THROW(control->SetLockedClocks(2, clocks[2], clocks[2]), gpu::MigError);

    control->SetLockedClocks(1, clocks[3], clocks[3]);
    control->SetPowerLimit(0, 300);
    control->Restore();
    EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 1), 1);
    control->SetLockedClocks(0, clocks[3], clocks[3]);
  }  // the destructor restores too
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 2);

  // A lease conflict surfaces as the daemon's message.
  auto first = gpu::MakeDaemonClockControl(daemon.socket());
  auto second = gpu::MakeDaemonClockControl(daemon.socket());
  const std::vector<int> clocks = first->SupportedSmClocks(0);
  first->SetLockedClocks(0, clocks[0], clocks[0]);
  try {
    second->SetLockedClocks(0, clocks[0], clocks[0]);
    FAIL() << "no error";
  } catch (const gpu::GpuError& e) {
    EXPECT_CONTAINS(e.what(), "set_locked_clocks on GPU 0: GPU 0 (");
    EXPECT_CONTAINS(e.what(), "is leased to client pid");
  }
}

TEST(DaemonClockControl, ReportsADaemonThatWentAway) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  auto control = gpu::MakeDaemonClockControl(daemon.socket());
  const std::vector<int> clocks = control->SupportedSmClocks(0);
  daemon.Stop();
  try {
    control->SetLockedClocks(0, clocks[0], clocks[0]);
    FAIL() << "no error";
  } catch (const gpu::GpuError& e) {
    EXPECT_CONTAINS(e.what(), "closed the connection");
  }
  control->Restore();  // never throws
}

// The descriptors of this process that are sockets.
std::set<int> SocketFds() {
  std::set<int> fds;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.rfind("socket:", 0) == 0) fds.insert(std::stoi(entry.path().filename()));
  }
  return fds;
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// In a forked child: 0 if the child cannot use `control` (its socket `fd` is
// closed, requests throw naming the fork, Restore and the destructor send
// nothing); else a code saying what went wrong.
int UseInChild(std::unique_ptr<gpu::ClockControl> control, int fd, int clock, bool closed_at_fork) {
  if (closed_at_fork && ::fcntl(fd, F_GETFD) != -1) return 10;  // atfork left it open
  try {
    control->SetLockedClocks(1, clock, clock);
    return 11;
  } catch (const gpu::GpuError& e) {
    if (std::string(e.what()).find("forked child") == std::string::npos) return 12;
  }
  if (::fcntl(fd, F_GETFD) != -1) return 13;  // still open after the call
  if (control->SupportedSmClocks(0).empty()) return 14;  // read at construction: still there
  control->Restore();
  control.reset();
  return 0;
}

TEST(DaemonClockControl, AForkedChildCannotUseItsParentsConnection) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  const std::set<int> before = SocketFds();
  auto control = gpu::MakeDaemonClockControl(daemon.socket());
  std::set<int> mine;
  for (int fd : SocketFds()) {
    if (!before.count(fd)) mine.insert(fd);
  }
  ASSERT_EQ(mine.size(), 1u);
  const int fd = *mine.begin();
  EXPECT_NE(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0) << "an exec'd child would inherit it";
  const std::vector<int> clocks = control->SupportedSmClocks(0);
  control->SetLockedClocks(0, clocks[4], clocks[4]);
  const int audit_lines = CountLines(ReadText(daemon.audit_log()));

  // fork(): the atfork handler closes the socket in the child at once.
  pid_t child = ::fork();
  if (child == 0) ::_exit(UseInChild(std::move(control), fd, clocks[4], true));
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  // A raw clone() runs no atfork handler: the pid check on every call does.
  child = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (child == 0) ::_exit(UseInChild(std::move(control), fd, clocks[4], false));
  ASSERT_GT(child, 0);
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  // Neither child sent anything; the parent's connection and lease are intact.
  EXPECT_EQ(CountLines(ReadText(daemon.audit_log())), audit_lines) << ReadText(daemon.audit_log());
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 0);
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceSetGpuLockedClocks", 1), 0);
  control->SetLockedClocks(0, clocks[5], clocks[5]);
  control->Restore();
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);
}

TEST(DaemonClockControl, ReconnectsAfterTheDaemonClosedAnIdleLeaseFreeConnection) {
  DaemonFixture daemon(DaemonFixture::With({{"idle_timeout_s", 0.3}}));
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  auto control = gpu::MakeDaemonClockControl(daemon.socket());
  const std::vector<int> clocks = control->SupportedSmClocks(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // closed by now
  control->SetLockedClocks(0, clocks[3], clocks[3]);            // connects again
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceSetGpuLockedClocks", 0), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // holds a lease: kept
  control->SetLockedClocks(0, clocks[4], clocks[4]);
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 0);
  control->ResetLockedClocks(0);
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);
  EXPECT_EQ(ReadText(daemon.audit_log()).find("restore_"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));  // lease-free again: closed
  control->SetPowerLimit(1, 300);
  control.reset();
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceSetPowerManagementLimit", 1), 2);  // set, then reset
}

}  // namespace
}  // namespace joulepipe::daemon::testing
