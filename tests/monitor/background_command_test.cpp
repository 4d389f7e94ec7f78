// BackgroundCommand: runs until its owner is done, says how it ended on its
// own, and stops its whole process group on every way out, SIGKILL for a
// command that ignores SIGTERM.
#include "joulepipe/monitor/background_command.hpp"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include <gtest/gtest.h>

namespace joulepipe::monitor {
namespace {

using Clock = std::chrono::steady_clock;

// Whether process `pid` still runs: it exists and is not a zombie (an
// orphan waits for init to reap it, which a container may never do).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

std::optional<BackgroundCommand::Exit> WaitEnded(BackgroundCommand& c, double seconds) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < deadline) {
    if (auto e = c.Ended()) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

TEST(BackgroundCommand, RunsUntilStoppedAndStopsItsGroup) {
  const std::string file = ::testing::TempDir() + "/background_child.pid";
  std::remove(file.c_str());
  pid_t pid = -1, child = -1;
  {
    // A shell that starts a child of its own: both are in the group.
    BackgroundCommand c({"sh", "-c", "sleep 30 & echo $! > '" + file + "'; wait"});
    pid = c.pid();
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (child <= 0 && Clock::now() < deadline) {
      std::ifstream in(file);
      if (!(in >> child)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(child, 0);
    EXPECT_FALSE(c.Ended().has_value());
    EXPECT_TRUE(Alive(pid));
    EXPECT_TRUE(Alive(child));
  }
  EXPECT_FALSE(Alive(pid));
  // The child it started got the group's SIGTERM too.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Alive(child) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(Alive(child));
}

TEST(BackgroundCommand, SaysHowItEndedOnItsOwn) {
  BackgroundCommand exited({"sh", "-c", "exit 3"});
  const auto e = WaitEnded(exited, 10);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->signaled);
  EXPECT_EQ(e->code, 3);
  EXPECT_EQ(exited.Ended()->code, 3);  // asked again, the same answer

  BackgroundCommand killed({"sh", "-c", "kill -KILL $$"});
  const auto k = WaitEnded(killed, 10);
  ASSERT_TRUE(k.has_value());
  EXPECT_TRUE(k->signaled);
  EXPECT_EQ(k->signal, SIGKILL);
}

TEST(BackgroundCommand, ACommandIgnoringSigtermIsKilled) {
  pid_t pid = -1;
  const auto began = Clock::now();
  {
    BackgroundCommand c({"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"});
    c.stop_timeout_s = 0.3;
    pid = c.pid();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(Alive(pid));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - began).count(), 10);
}

TEST(BackgroundCommand, ACommandThatCannotStartIsAnError) {
  try {
    BackgroundCommand c({"/nonexistent/joulepipe-load"});
    ADD_FAILURE() << "started";
  } catch (const std::system_error& e) {
    EXPECT_NE(e.code().value(), 0);
  }
  EXPECT_THROW(BackgroundCommand({}), std::invalid_argument);
}

}  // namespace
}  // namespace joulepipe::monitor
