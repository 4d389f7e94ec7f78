// Running NVML tests against the simulated library (src/sim_nvml), each in a
// child process of its own.
//
// Why children: the NVML library is process-wide (nvml.hpp: loaded and
// initialised once, kept until exit), and the simulated library reads its
// configuration when NVML is initialised. So every test that needs its own
// configuration or environment forks; the child sets the environment, runs
// the test body (gtest assertions work there: failures are printed by the
// child) and exits 1 if anything failed. The parent process never loads
// NVML, so `test_gpu` run directly and ctest (one process per test) behave
// the same.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace joulepipe::gpu::testing {

// EXPECT that `text` contains `needle`, showing both if not.
#define EXPECT_CONTAINS(text, needle)                          \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (needle) << "\" not in: " << (text)

// Environment changes for the child: a value sets, nullopt unsets.
using Env = std::map<std::string, std::optional<std::string>>;

// A file that is removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() /
            ("joulepipe-gpu-test-" + std::to_string(::getpid()) + "-" + std::to_string(device()) +
             ".json");
    std::ofstream(path_) << contents;
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// The child's exit status when its body called GTEST_SKIP.
inline constexpr int kSkipped = 77;

// Runs `body` in a forked child with `env` applied; EXPECTs that it passed
// (a GTEST_SKIP in the child skips the test).
inline void RunInChild(const Env& env, const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    for (const auto& [name, value] : env) {
      if (value.has_value()) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    try {
      body();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "uncaught exception in the child: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "uncaught non-standard exception in the child";
    }
    const int code = ::testing::Test::HasFailure()  ? 1
                     : ::testing::Test::IsSkipped() ? kSkipped
                                                    : 0;
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);  // no static destructors or atexit handlers of the parent
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSkipped) {
    GTEST_SKIP() << "skipped in the child process (the reason is printed above)";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child process failed (its failures are printed above); status " << status;
}

// The environment for the simulated library with configuration `config_path`
// (or the built-in default when empty): CUDA_VISIBLE_DEVICES and the simple
// overrides unset unless `extra` sets them.
inline Env SimEnv(const std::string& config_path, const Env& extra = {}) {
  Env env = {{"JOULEPIPE_NVML_LIBRARY", std::string(JOULEPIPE_SIM_NVML)},
             {"JOULEPIPE_SIM_NVML_CONFIG", std::nullopt},
             {"JOULEPIPE_SIM_NVML_GPU", std::nullopt},
             {"JOULEPIPE_SIM_NVML_COUNT", std::nullopt},
             {"CUDA_VISIBLE_DEVICES", std::nullopt}};
  if (!config_path.empty()) env["JOULEPIPE_SIM_NVML_CONFIG"] = config_path;
  for (const auto& [name, value] : extra) env[name] = value;
  return env;
}

}  // namespace joulepipe::gpu::testing
