// StagedDirectory and WriteFileAtomically: outputs appear whole or not at all,
// and only joulepipe's own outputs (or empty directories) are ever replaced.
#include "cli/output_dir.hpp"

#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "cli_test_support.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using model::InputError;
using testing::EntriesOf;
using testing::ScratchDirTest;
using testing::Slurp;
using testing::Spit;

// Each test gets a fresh scratch directory; Entries() lists what is directly
// inside it, which shows leftover staging dirs.
class OutputDirTest : public ScratchDirTest {
 protected:
  OutputDirTest() : ScratchDirTest("output") {}
};

TEST_F(OutputDirTest, CommitCreatesDirectory) {
  const fs::path out = root_ / "out";
  {
    StagedDirectory staged(out);
    EXPECT_EQ(staged.staging_path().parent_path(), out.parent_path());
    EXPECT_EQ(staged.staging_path().filename().string().rfind("out.tmp-", 0), 0u);
    EXPECT_FALSE(fs::exists(out));
    staged.WriteFile("plan.json", "{}\n");
    staged.WriteFile("figures/deep/timeline.svg", "<svg/>");
    EXPECT_FALSE(fs::exists(out));  // nothing visible before Commit
    staged.Commit();
    EXPECT_TRUE(staged.committed());
  }
  EXPECT_EQ(Slurp(out / "plan.json"), "{}\n");
  EXPECT_EQ(Slurp(out / "figures/deep/timeline.svg"), "<svg/>");
  EXPECT_TRUE(fs::is_regular_file(out / kOutputMarker));
  EXPECT_EQ(Entries(), std::set<std::string>{"out"});  // no staging leftovers
}

TEST_F(OutputDirTest, NoCommitLeavesNothing) {
  {
    StagedDirectory staged(root_ / "out");
    staged.WriteFile("plan.json", "{}");
    EXPECT_TRUE(fs::exists(staged.staging_path()));
  }
  EXPECT_TRUE(Entries().empty());
}

TEST_F(OutputDirTest, FailureMidwayLeavesPreviousOutputIntact) {
  const fs::path out = root_ / "out";
  {
    StagedDirectory first(out);
    first.WriteFile("plan.json", "old");
    first.Commit();
  }
  EXPECT_THROW(
      {
        StagedDirectory second(out);
        second.WriteFile("plan.json", "new");
        throw std::runtime_error("solver failed");
      },
      std::runtime_error);
  EXPECT_EQ(Slurp(out / "plan.json"), "old");
  EXPECT_EQ(Entries(), std::set<std::string>{"out"});
}

TEST_F(OutputDirTest, RecommitReplacesOwnPreviousOutput) {
  const fs::path out = root_ / "out";
  {
    StagedDirectory first(out);
    first.WriteFile("a.txt", "first");
    first.Commit();
  }
  {
    StagedDirectory second(out);
    second.WriteFile("b.txt", "second");
    second.Commit();
  }
  EXPECT_FALSE(fs::exists(out / "a.txt"));  // replaced as a whole, not merged
  EXPECT_EQ(Slurp(out / "b.txt"), "second");
  EXPECT_TRUE(fs::exists(out / kOutputMarker));
  EXPECT_EQ(Entries(), std::set<std::string>{"out"});
}

TEST_F(OutputDirTest, ReplacesEmptyDirectory) {
  const fs::path out = root_ / "out";
  fs::create_directory(out);
  {
    StagedDirectory staged(out);
    staged.WriteFile("plan.json", "{}");
    staged.Commit();
  }
  EXPECT_EQ(Slurp(out / "plan.json"), "{}");
  EXPECT_EQ(Entries(), std::set<std::string>{"out"});
}

TEST_F(OutputDirTest, RefusesForeignNonEmptyDirectory) {
  const fs::path out = root_ / "thesis";
  fs::create_directory(out);
  Spit(out / "chapter1.tex", "precious");
  try {
    StagedDirectory staged(out);
    staged.WriteFile("plan.json", "{}");
    staged.Commit();
    ADD_FAILURE() << "replaced a foreign directory";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "refusing to overwrite the output directory '" + out.string() +
                  "': it exists and was not written by joulepipe; choose another output "
                  "directory or remove it");
    EXPECT_EQ(e.field(), "OutputDirectory");
  }
  EXPECT_EQ(Slurp(out / "chapter1.tex"), "precious");
  EXPECT_EQ(Entries(), std::set<std::string>{"thesis"});
}

TEST_F(OutputDirTest, CommitRechecksForeignDirectoryCreatedMeanwhile) {
  const fs::path out = root_ / "out";
  {
    StagedDirectory staged(out);
    staged.WriteFile("plan.json", "{}");
    fs::create_directory(out);
    Spit(out / "notes.txt", "mine");
    EXPECT_THROW(staged.Commit(), InputError);
    EXPECT_FALSE(staged.committed());
  }
  EXPECT_EQ(EntriesOf(out), std::set<std::string>{"notes.txt"});
  EXPECT_EQ(Entries(), std::set<std::string>{"out"});
}

TEST_F(OutputDirTest, RefusesRegularFileAndSymlink) {
  Spit(root_ / "file", "x");
  try {
    StagedDirectory staged(root_ / "file");
    ADD_FAILURE() << "accepted a regular file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("refusing to overwrite"), std::string::npos) << e.what();
  }
  fs::create_directory(root_ / "target");
  fs::create_directory_symlink(root_ / "target", root_ / "link");
  EXPECT_THROW(StagedDirectory(root_ / "link"), InputError);
  EXPECT_EQ(Slurp(root_ / "file"), "x");
  EXPECT_EQ(Entries(), (std::set<std::string>{"file", "link", "target"}));
}

TEST_F(OutputDirTest, TrailingSlashAndMissingParents) {
  const fs::path out = root_ / "runs" / "gpt3" / "out";
  {
    StagedDirectory staged(out.string() + "/");
    staged.WriteFile("plan.json", "{}");
    staged.Commit();
  }
  EXPECT_EQ(Slurp(out / "plan.json"), "{}");
  EXPECT_EQ(EntriesOf(out.parent_path()), std::set<std::string>{"out"});
}

TEST_F(OutputDirTest, WriteFileRejectsPathsOutsideTheDirectory) {
  StagedDirectory staged(root_ / "out");
  EXPECT_THROW(staged.WriteFile("../escape.txt", "x"), std::invalid_argument);
  EXPECT_THROW(staged.WriteFile("a/../../escape.txt", "x"), std::invalid_argument);
  EXPECT_THROW(staged.WriteFile(root_ / "abs.txt", "x"), std::invalid_argument);
  EXPECT_THROW(staged.WriteFile("", "x"), std::invalid_argument);
  EXPECT_FALSE(fs::exists(root_ / "escape.txt"));
}

TEST_F(OutputDirTest, WriteFileAtomicallyCreatesAndReplaces) {
  const fs::path path = root_ / "sub" / "plan.json";
  WriteFileAtomically(path, "one");
  EXPECT_EQ(Slurp(path), "one");
  WriteFileAtomically(path, "two");
  EXPECT_EQ(Slurp(path), "two");
  WriteFileAtomically(path, "");
  EXPECT_EQ(Slurp(path), "");
  EXPECT_EQ(EntriesOf(root_ / "sub"), std::set<std::string>{"plan.json"});
}

TEST_F(OutputDirTest, WriteFileAtomicallyFailureLeavesNoTemporary) {
  fs::create_directories(root_ / "dir" / "inner");
  try {
    WriteFileAtomically(root_ / "dir", "x");  // a directory is in the way
    ADD_FAILURE() << "replaced a directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '" + (root_ / "dir").string() + "'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(Entries(), std::set<std::string>{"dir"});
}

}  // namespace
}  // namespace joulepipe::cli
