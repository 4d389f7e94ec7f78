// The interruption side of model/output_files.hpp: the table of live
// temporaries a signal handler empties (RemoveLiveTemporaries), commits that
// honour a cancel flag, AtomicFile failing before the work, and the removal
// of staging directories that killed runs left behind (only a dead process's,
// only ours). StagedDirectory's ordinary behaviour is tested in
// tests/cli/output_dir_test.cpp.
#include "joulepipe/model/output_files.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void Spit(const fs::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device device;
    root_ =
        fs::temp_directory_path() / ("joulepipe-output-files-test-" + std::to_string(::getpid()) +
                                     "-" + std::to_string(device()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::set<std::string> Entries() const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(root_)) names.insert(entry.path().filename());
    return names;
  }

  // Names in the scratch dir that start with "<name>.tmp-".
  std::set<std::string> StagingOf(const std::string& name) const {
    std::set<std::string> out;
    for (const std::string& entry : Entries()) {
      if (entry.rfind(name + ".tmp-", 0) == 0) out.insert(entry);
    }
    return out;
  }

  // A child process creates a staging directory for `out` (with a file in
  // it) and exits without its destructor, as a run killed by SIGKILL would.
  // Returns the staging directory's name; the child is reaped, so its pid
  // is dead.
  std::string StagingOfADeadRun(const fs::path& out) const {
    const std::set<std::string> before = StagingOf(out.filename());
    const pid_t pid = ::fork();
    if (pid == 0) {
      auto* staged = new StagedDirectory(out);  // never destroyed
      staged->WriteFile("plans/plan_00000.json", "{}\n");
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::set<std::string> after = StagingOf(out.filename());
    for (const std::string& name : before) after.erase(name);
    EXPECT_EQ(after.size(), 1u);
    return after.empty() ? "" : *after.begin();
  }

  fs::path root_;
};

TEST_F(OutputFilesTest, RemoveLiveTemporariesEmptiesStagingDirsAndTempFiles) {
  const fs::path outside = root_ / "outside";
  fs::create_directories(outside);
  Spit(outside / "keep.txt", "keep");
  {
    StagedDirectory staged(root_ / "out");
    staged.WriteFile("plans/deep/plan.json", "{}");
    staged.WriteFile("chosen.json", "{}");
    fs::create_directory_symlink(outside, staged.staging_path() / "link");
    AtomicFile file(root_ / "energy.csv");
    EXPECT_TRUE(fs::exists(file.temp_path()));
    EXPECT_EQ(Entries().size(), 3u);  // outside, the staging dir, the temp file

    EXPECT_EQ(RemoveLiveTemporaries(), 2);
    EXPECT_EQ(Entries(), std::set<std::string>{"outside"});
    EXPECT_EQ(Slurp(outside / "keep.txt"), "keep") << "a symbolic link was followed";
    EXPECT_EQ(RemoveLiveTemporaries(), 0) << "removed paths leave the table";
  }  // the destructors find nothing to remove, and must not fail
  EXPECT_EQ(Entries(), std::set<std::string>{"outside"});
}

TEST_F(OutputFilesTest, CommittedOutputsAreNotLiveAndAreCounted) {
  const int before = CommittedOutputs();
  {
    StagedDirectory staged(root_ / "out");
    staged.WriteFile("a.json", "{}");
    staged.Commit();
    WriteFileAtomically(root_ / "f.csv", "x\n");
    EXPECT_EQ(RemoveLiveTemporaries(), 0);
  }
  EXPECT_EQ(CommittedOutputs(), before + 2);
  EXPECT_EQ(Entries(), (std::set<std::string>{"f.csv", "out"}));
  EXPECT_EQ(Slurp(root_ / "out" / "a.json"), "{}");
  EXPECT_FALSE(fs::exists(root_ / "out" / kStagingMarker)) << "the staging marker is not output";
  EXPECT_TRUE(fs::exists(root_ / "out" / kOutputMarker));
}

TEST_F(OutputFilesTest, RaisedCancelFlagCommitsNothing) {
  const fs::path out = root_ / "out";
  {
    StagedDirectory first(out);
    first.WriteFile("a.json", "old");
    first.Commit();
  }
  WriteFileAtomically(root_ / "f.csv", "old\n");
  const std::atomic<bool> cancel{true};
  {
    StagedDirectory staged(out);
    staged.WriteFile("a.json", "new");
    EXPECT_THROW(staged.Commit(&cancel), Cancelled);
    EXPECT_FALSE(staged.committed());
  }
  EXPECT_THROW(WriteFileAtomically(root_ / "f.csv", "new\n", &cancel), Cancelled);
  EXPECT_EQ(Slurp(out / "a.json"), "old");
  EXPECT_EQ(Slurp(root_ / "f.csv"), "old\n");
  EXPECT_EQ(Entries(), (std::set<std::string>{"f.csv", "out"}));

  const std::atomic<bool> go{false};
  WriteFileAtomically(root_ / "f.csv", "new\n", &go);
  EXPECT_EQ(Slurp(root_ / "f.csv"), "new\n");
}

TEST_F(OutputFilesTest, AtomicFileFailsBeforeTheWork) {
  Spit(root_ / "file", "a file, not a directory");
  auto prepare = [](const fs::path& path) { AtomicFile file(path); };
  EXPECT_THROW(prepare(root_ / "file" / "x.csv"), InputError);
  EXPECT_THROW(prepare("/proc/joulepipe-no-such-dir/x.csv"), InputError);
  try {
    prepare(root_);
    ADD_FAILURE() << "a directory was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Entries(), std::set<std::string>{"file"});

  // Prepared early, written late: the temporary exists in between.
  AtomicFile file(root_ / "new" / "x.csv");
  EXPECT_TRUE(fs::is_regular_file(file.temp_path()));
  EXPECT_FALSE(fs::exists(root_ / "new" / "x.csv"));
  file.Commit("rows\n");
  EXPECT_EQ(Slurp(root_ / "new" / "x.csv"), "rows\n");
  EXPECT_FALSE(fs::exists(file.temp_path()));
}

TEST_F(OutputFilesTest, StagingOfADeadRunIsRemovedByTheNext) {
  const fs::path out = root_ / "out";
  const std::string dead = StagingOfADeadRun(out);
  ASSERT_FALSE(dead.empty());
  EXPECT_TRUE(fs::exists(root_ / dead / kStagingMarker));
  EXPECT_TRUE(fs::exists(root_ / dead / "plans" / "plan_00000.json"));
  {
    StagedDirectory next(out);
    EXPECT_FALSE(fs::exists(root_ / dead)) << dead << " was not removed";
  }
  EXPECT_TRUE(StagingOf("out").empty());
}

TEST_F(OutputFilesTest, KeepsWhatIsNotADeadRunsStaging) {
  const fs::path out = root_ / "out";
  // A live process's staging directory: ours (this test process is alive).
  auto live = std::make_unique<StagedDirectory>(out);
  const std::string live_name = live->staging_path().filename();
  // One of a live process other than us: pid 1 always runs.
  const fs::path init = root_ / "out.tmp-1-0123456789abcdef";
  fs::create_directories(init);
  Spit(init / kStagingMarker, Slurp(live->staging_path() / kStagingMarker));
  // Dead pid, but no marker: not recognisably ours.
  const fs::path unmarked = root_ / "out.tmp-999999-abcd";
  fs::create_directories(unmarked);
  Spit(unmarked / "notes.txt", "mine");
  // Dead pid and a marker, but of another kernel (another host over NFS).
  const std::string dead = StagingOfADeadRun(out);
  std::string marker = Slurp(root_ / dead / kStagingMarker);
  const std::size_t boot = marker.find("boot_id ");
  ASSERT_NE(boot, std::string::npos) << marker;
  marker.replace(boot, marker.find('\n', boot) - boot, "boot_id another-kernel");
  Spit(root_ / dead / kStagingMarker, marker);
  // Not of this output: another name's staging.
  const std::string other = StagingOfADeadRun(root_ / "other");
  // A file with a staging name.
  Spit(root_ / "out.tmp-999998-abcdef", "a file");

  {
    StagedDirectory next(out);
  }

  EXPECT_TRUE(fs::exists(live->staging_path()));
  EXPECT_TRUE(fs::exists(init));
  EXPECT_EQ(Slurp(unmarked / "notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(root_ / dead));
  EXPECT_TRUE(fs::exists(root_ / other));
  EXPECT_TRUE(fs::exists(root_ / "out.tmp-999998-abcdef"));
  live.reset();
  EXPECT_FALSE(fs::exists(root_ / live_name));
}

// Issue 41, item 2: what joulepipe creates is private to its user; an output
// that replaces another keeps the mode its owner gave it. Before, files were
// 0666 less the umask (0644: readable by every user of a shared machine).
unsigned ModeOf(const fs::path& path) {
  struct stat info{};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 07777;
}

TEST_F(OutputFilesTest, WhatIsCreatedIsPrivateAndAReplacementKeepsTheOwnersMode) {
  const mode_t old_umask = ::umask(022);
  const fs::path out = root_ / "out";
  {
    StagedDirectory staged(out, "plan");
    staged.WriteFile("plans/stage0.json", "{}");
    staged.Commit();
  }
  EXPECT_EQ(ModeOf(out), kPrivateDirectoryMode);
  EXPECT_EQ(ModeOf(out / "plans" / "stage0.json"), kPrivateFileMode);
  EXPECT_EQ(ModeOf(out / kOutputMarker), kPrivateFileMode);
  const fs::path file = root_ / "profile.csv";
  WriteFileAtomically(file, "a");
  EXPECT_EQ(ModeOf(file), kPrivateFileMode);
  // Shared on purpose: the next run keeps it so.
  ASSERT_EQ(::chmod(out.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  {
    StagedDirectory staged(out, "plan");
    staged.WriteFile("a.txt", "x");
    staged.Commit();
  }
  WriteFileAtomically(file, "b");
  EXPECT_EQ(ModeOf(out), 0755u);
  EXPECT_EQ(ModeOf(out / "a.txt"), 0644u);  // the shared directory's files are readable too
  EXPECT_EQ(ModeOf(file), 0644u);
  // Read-only to everyone: the replacement keeps the owner's rwx, so the
  // owner can still write it next time.
  ASSERT_EQ(::chmod(out.c_str(), 0555), 0);
  {
    StagedDirectory staged(out, "plan");
    staged.WriteFile("a.txt", "y");
    staged.Commit();
  }
  EXPECT_EQ(ModeOf(out), 0755u);
  EXPECT_EQ(ModeOf(out / "a.txt"), 0644u);
  ::umask(old_umask);
}

// Issue 41, item 2: no command replaces a directory another command wrote
// unless asked (--force); the same command replaces its own, as before.
TEST_F(OutputFilesTest, AnotherCommandsOutputIsReplacedOnlyWithForce) {
  const fs::path out = root_ / "out";
  {
    StagedDirectory staged(out, "demo");
    staged.WriteFile("simulation.json", "{}");
    staged.Commit();
  }
  EXPECT_NE(Slurp(out / kOutputMarker).find("command: joulepipe demo\n"), std::string::npos);
  try {
    StagedDirectory refused(out, "plan");
    ADD_FAILURE() << "replaced demo's output without --force";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("refusing to replace the output directory '" + out.string() +
                                   "': it holds the output of `joulepipe demo`; pass "
                                   "OutputDirectory::force to replace it"),  // --force in the CLI
        std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::exists(out / "simulation.json"));  // untouched
  {
    StagedDirectory again(out, "demo");
  }  // its own: fine
  {
    StagedDirectory forced(out, "plan", /*force=*/true);
    forced.WriteFile("summary.json", "{}");
    forced.Commit();
  }
  EXPECT_FALSE(fs::exists(out / "simulation.json"));
  EXPECT_NE(Slurp(out / kOutputMarker).find("command: joulepipe plan\n"), std::string::npos);
  // A marker that names no command (older outputs) counts as anyone's.
  Spit(out / kOutputMarker, "This directory was written by joulepipe.\n");
  EXPECT_NO_THROW(StagedDirectory(out, "tune"));
}

}  // namespace
}  // namespace joulepipe::model
