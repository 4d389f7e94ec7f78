// A short run of the protocol fuzzer (tests/daemon/fuzz/main.cpp; built
// with AddressSanitizer and UBSan unless JOULEPIPE_FUZZ_SANITIZE is off).
// The long run is the same binary with more iterations (docs/daemon.md).
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace {

TEST(FuzzDaemonProtocol, TwentyThousandInputsNeitherCrashNorHangNorLeak) {
  const std::string command = std::string("JOULEPIPE_NVML_LIBRARY=") + JOULEPIPE_SIM_NVML + " " +
                              JOULEPIPE_FUZZ + " --iterations 20000 --seed 7";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "the fuzzer crashed: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the fuzzer found a failure (printed above)";
}

}  // namespace
