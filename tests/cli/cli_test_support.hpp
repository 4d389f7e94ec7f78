// Helpers shared by the CLI tests: whole-file reads and writes, shell quoting,
// a scratch directory per test, and running the joulepipe binary as a separate
// process with its exit code, stdout and stderr captured.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace joulepipe::cli::testing {

namespace fs = std::filesystem;

inline std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void Spit(const fs::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

// Single-quotes `text` for /bin/sh.
inline std::string Quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Names directly inside `dir`: shows leftover outputs and staging dirs.
inline std::set<std::string> EntriesOf(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename());
  return names;
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

// Each test gets a fresh scratch directory under the system temp dir, named
// "joulepipe-<name>-test-<pid>-<random>", removed again after the test.
class ScratchDirTest : public ::testing::Test {
 protected:
  explicit ScratchDirTest(std::string name) : name_(std::move(name)) {}

  void SetUp() override {
    std::random_device device;
    root_ =
        fs::temp_directory_path() / ("joulepipe-" + name_ + "-test-" + std::to_string(::getpid()) +
                                     "-" + std::to_string(device()));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Names directly inside the scratch dir.
  std::set<std::string> Entries() const { return EntriesOf(root_); }

  // Runs the joulepipe binary with `args` (already shell-quoted), stdin from
  // /dev/null. Its stdout and stderr pass through files in the scratch dir,
  // which are removed again so they never show in Entries().
  Result Run(const std::string& args) const {
    const fs::path out = root_ / ".stdout", err = root_ / ".stderr";
    const std::string command =
        Quote(JOULEPIPE_CLI) + " " + args + " >" + Quote(out) + " 2>" + Quote(err) + " </dev/null";
    const int status = std::system(command.c_str());
    Result result;
    result.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = Slurp(out);
    result.err = Slurp(err);
    fs::remove(out);
    fs::remove(err);
    return result;
  }

  fs::path root_;

 private:
  std::string name_;
};

}  // namespace joulepipe::cli::testing
