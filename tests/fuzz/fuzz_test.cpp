// Short runs of the input fuzzers (tests/fuzz/*_main.cpp; built with
// AddressSanitizer and UBSan unless JOULEPIPE_FUZZ_SANITIZE is off): 20,000
// inputs each, a few seconds. The long runs are the same binaries with more
// iterations (docs/limits.md). A fuzzer that finds a failure prints it and
// writes the input to the temporary directory.
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace {

void RunFuzzer(const char* binary) {
  const std::string command = std::string(binary) + " --iterations 20000 --seed 7";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "the fuzzer crashed: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the fuzzer found a failure (printed above)";
}

TEST(FuzzInputs, ProfileCsvTwentyThousandInputsNeitherCrashNorHangNorLeak) {
  RunFuzzer(JOULEPIPE_FUZZ_PROFILE_CSV);
}

TEST(FuzzInputs, PlanJsonTwentyThousandInputsNeitherCrashNorHangNorLeak) {
  RunFuzzer(JOULEPIPE_FUZZ_PLAN_JSON);
}

TEST(FuzzInputs, DaemonConfigTwentyThousandInputsNeitherCrashNorHangNorLeak) {
  RunFuzzer(JOULEPIPE_FUZZ_DAEMON_CONFIG);
}

TEST(FuzzInputs, ServeCodecTwentyThousandInputsNeitherCrashNorHangNorLeak) {
  RunFuzzer(JOULEPIPE_FUZZ_SERVE_CODEC);
}

}  // namespace
