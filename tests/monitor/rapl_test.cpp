// RAPL over a fake powercap tree: zone discovery (package and dram only,
// sockets from "package-K"), wrap-around at max_energy_range_uj, a missing
// tree and an unreadable energy_uj (the permission note).
#include "joulepipe/monitor/rapl.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "monitor_test_support.hpp"

namespace joulepipe::monitor {
namespace {

using testing::AddZone;
using testing::SetEnergy;
using testing::TempDir;

constexpr uint64_t kRange = 262143328850;  // a common Intel max_energy_range_uj

TEST(RaplDelta, ForwardBackwardAndEdges) {
  EXPECT_EQ(RaplDeltaUj(100, 250, kRange), 150u);
  EXPECT_EQ(RaplDeltaUj(7, 7, kRange), 0u);
  // One wrap: from kRange - 10 up to kRange (10), to 0 (1), up to 5 (5).
  EXPECT_EQ(RaplDeltaUj(kRange - 10, 5, kRange), 16u);
  EXPECT_EQ(RaplDeltaUj(kRange, 0, kRange), 1u);
  EXPECT_EQ(RaplDeltaUj(1000, 999, 1000), 1000u);  // almost a full lap
}

TEST(RaplCounters, FindsPackagesAndDramOnlyOrderedBySocket) {
  TempDir dir;
  const auto& root = dir.path();
  AddZone(root, "intel-rapl:1", "package-1", 10, kRange);
  AddZone(root, "intel-rapl:1:0", "dram", 20, kRange);
  AddZone(root, "intel-rapl:0", "package-0", 30, kRange);
  AddZone(root, "intel-rapl:0:0", "core", 40, kRange);    // part of the package
  AddZone(root, "intel-rapl:0:1", "uncore", 50, kRange);  // part of the package
  AddZone(root, "intel-rapl:0:2", "dram", 60, kRange);
  AddZone(root, "intel-rapl:2", "psys", 70, kRange);            // overlaps everything
  AddZone(root, "intel-rapl-mmio:0", "package-0", 80, kRange);  // duplicate of the package
  std::filesystem::create_directories(root / "intel-rapl");     // the control type

  RaplCounters rapl(root.string());
  ASSERT_TRUE(rapl.available()) << rapl.problem();
  EXPECT_TRUE(rapl.problem().empty());
  ASSERT_EQ(rapl.zones().size(), 4u);
  const auto& z = rapl.zones();
  EXPECT_EQ(z[0].name, "package-0");
  EXPECT_EQ(z[0].socket, 0);
  EXPECT_EQ(z[0].domain, RaplDomain::kPackage);
  EXPECT_EQ(z[1].name, "dram");
  EXPECT_EQ(z[1].socket, 0);
  EXPECT_EQ(z[1].domain, RaplDomain::kDram);
  EXPECT_EQ(z[2].name, "package-1");
  EXPECT_EQ(z[2].socket, 1);
  EXPECT_EQ(z[3].domain, RaplDomain::kDram);
  EXPECT_EQ(z[3].socket, 1);
  EXPECT_EQ(z[0].max_energy_range_uj, kRange);
  EXPECT_STREQ(RaplDomainName(z[1].domain), "dram");
}

TEST(RaplCounters, RunningTotalsSurviveWrapAround) {
  TempDir dir;
  const auto& root = dir.path();
  const uint64_t range = 1000000;  // 1 J range: wraps quickly
  AddZone(root, "intel-rapl:0", "package-0", range - 300000, range);
  AddZone(root, "intel-rapl:0:0", "dram", 5000, range);
  RaplCounters rapl(root.string());
  ASSERT_TRUE(rapl.available()) << rapl.problem();
  uint64_t totals[2] = {99, 99};
  ASSERT_TRUE(rapl.Sample(totals));
  EXPECT_EQ(totals[0], 0u);
  EXPECT_EQ(totals[1], 0u);

  SetEnergy(root, "intel-rapl:0", 200000);  // wrapped: 300000 to the top, 1 to 0, 200000 on
  SetEnergy(root, "intel-rapl:0:0", 6000);
  ASSERT_TRUE(rapl.Sample(totals));
  EXPECT_EQ(totals[0], 300000u + 1u + 200000u);
  EXPECT_EQ(totals[1], 1000u);

  // Several wraps over a long run, each seen by a sample: totals keep growing.
  uint64_t raw = 200000;
  uint64_t expected = totals[0];
  for (int i = 0; i < 5; ++i) {
    raw = (raw + 700000) % (range + 1);
    expected += 700000;
    SetEnergy(root, "intel-rapl:0", raw);
    ASSERT_TRUE(rapl.Sample(totals));
    EXPECT_EQ(totals[0], expected) << "after step " << i;
  }
}

TEST(RaplCounters, MissingTreeIsAProblemNotAFailure) {
  RaplCounters rapl("/nonexistent/powercap");
  EXPECT_FALSE(rapl.available());
  EXPECT_NE(rapl.problem().find("/nonexistent/powercap"), std::string::npos) << rapl.problem();

  TempDir dir;
  RaplCounters empty(dir.path().string());
  EXPECT_FALSE(empty.available());
  EXPECT_NE(empty.problem().find("no RAPL package or dram zone"), std::string::npos)
      << empty.problem();
}

TEST(RaplCounters, GarbageRangeIsReported) {
  TempDir dir;
  AddZone(dir.path(), "intel-rapl:0", "package-0", 1, 0);
  RaplCounters rapl(dir.path().string());
  EXPECT_FALSE(rapl.available());
  EXPECT_NE(rapl.problem().find("max_energy_range_uj"), std::string::npos) << rapl.problem();
}

// energy_uj readable by root only (Linux >= 5.10): the problem names the
// file, the error and the fix. As root (permissions do not apply) the check
// runs in a child that drops to an unprivileged user.
TEST(RaplCounters, UnreadableEnergyExplainsHowToGrantAccess) {
  TempDir dir;
  const auto& root = dir.path();
  AddZone(root, "intel-rapl:0", "package-0", 1, kRange);
  ::chmod((root / "intel-rapl:0" / "energy_uj").c_str(), 0400);
  // The unprivileged user must reach the tree.
  ::chmod(root.c_str(), 0755);
  ::chmod((root / "intel-rapl:0").c_str(), 0755);

  auto check = [&] {
    RaplCounters rapl(root.string());
    bool ok = !rapl.available() &&
              rapl.problem().find("energy_uj: Permission denied") != std::string::npos &&
              rapl.problem().find("chmod") != std::string::npos &&
              rapl.problem().find("CVE-2020-8694") != std::string::npos;
    if (!ok) std::fprintf(stderr, "problem: %s\n", rapl.problem().c_str());
    return ok;
  };
  if (::geteuid() != 0) {
    ::chmod((root / "intel-rapl:0" / "energy_uj").c_str(), 0000);
    EXPECT_TRUE(check());
    return;
  }
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "running as root and there is no user 'nobody' to drop to";
  std::fflush(stderr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(nobody->pw_gid) != 0 || ::setuid(nobody->pw_uid) != 0) ::_exit(3);
    ::_exit(check() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3 = could not drop privileges";
}

}  // namespace
}  // namespace joulepipe::monitor
