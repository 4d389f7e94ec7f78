// Hostile plan files: nesting 70,000 levels deep (which once overflowed the
// stack in the reader's message helper) and huge values are refused with a
// short InputError, both by the library and by the built `joulepipe`.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"

namespace joulepipe::model {
namespace {

std::string Nested(size_t depth, const std::string& open, const std::string& close) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += open;
  for (size_t i = 0; i < depth; ++i) text += close;
  return text;
}

const std::string kHead =
    "{\"version\": 1, \"schedule\": \"1f1b\", \"num_stages\": 1, \"num_microbatches\": 1, ";

std::string PlanError(const std::string& text) {
  try {
    PlanFromJson(text, "deep.json");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted a hostile plan";
  return "";
}

TEST(PlanHostileInputTest, SeventyThousandLevelsAreAnInputErrorNamingTheLimit) {
  for (const std::string& text :
       {Nested(70000, "[", "]"), kHead + "\"stages\": " + Nested(70000, "[", "]") + "}",
        "{\"stages\":" + Nested(70000, "[", "]") + "}",
        kHead + "\"stages\": [[{\"instruction\": " + Nested(70000, "{\"a\":", "}") + "}]]}"}) {
    const std::string message = PlanError(text);
    EXPECT_EQ(message.rfind("deep.json: JSON nested deeper than 64 levels at line 1, column ", 0),
              0u)
        << message;
    EXPECT_LT(message.size(), 400u) << message;
  }
}

TEST(PlanHostileInputTest, HugeValuesAreShownAsShortExcerpts) {
  // The wrong type at every level the reader checks, each 30 levels deep
  // (within the limit) and 100,000 elements wide.
  std::string wide = "[1";
  for (int i = 0; i < 100000; ++i) wide += ",1";
  wide += "]";
  const std::string deep = Nested(30, "[", "]");
  for (const std::string& text :
       {deep, kHead + "\"stages\": " + deep + "}", kHead + "\"stages\": [" + deep + "]}",
        kHead + "\"stages\": [[" + deep + "]]}", kHead + "\"stages\": [[" + wide + "]]}",
        kHead + "\"stages\": [[{\"instruction\": \"" + std::string(1 << 20, 'f') + "\"}]]}",
        "{\"version\": " + std::string(3000, '9') + "}"}) {
    const std::string message = PlanError(text);
    EXPECT_LT(message.size(), 400u) << message.substr(0, 1000);
    EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  }
}

// The same file through the built command: exit status 2 and one short line
// on stderr, never a crash (this was SIGSEGV before the depth limit).
// Issue 41, item 2: every field is range-checked, also those a command does
// not use. Before, a clock of 999,999 MHz and a predicted time of -1 s were
// read as given.
TEST(PlanHostileInputTest, EveryFieldIsRangeChecked) {
  const std::string one =
      kHead + "\"stages\": [[{\"instruction\": \"forward\", \"microbatch\": 0, ";
  const auto plan = [&](const std::string& entry, const std::string& tail = "") {
    return one + entry +
           "}, {\"instruction\": \"backward\", \"microbatch\": 0, \"frequency\": 1410}]]" + tail +
           "}";
  };
  EXPECT_NO_THROW(PlanFromJson(plan("\"frequency\": 1410"), "p.json"));
  EXPECT_NE(PlanError(plan("\"frequency\": 999999"))
                .find("stages[0][0].frequency must be an integer 1..10000, got number 999999"),
            std::string::npos);
  EXPECT_NE(
      PlanError(plan("\"frequency\": 1410, \"wait_frequency\": 20000, \"wait_restore_s\": 0.1"))
          .find("wait_frequency must be an integer 1..10000"),
      std::string::npos);
  EXPECT_NE(
      PlanError(plan("\"frequency\": 1410", ", \"predicted\": {\"time_s\": -1, \"energy_j\": 5}"))
          .find("predicted.time_s must be seconds > 0 and at most a year, got number -1"),
      std::string::npos);
  EXPECT_NE(PlanError(plan("\"frequency\": 1410",
                           ", \"predicted\": {\"time_s\": 1, \"energy_j\": 1e300}"))
                .find("predicted.energy_j must be joules 0..1e18"),
            std::string::npos);
}

TEST(PlanHostileInputTest, TheCommandRefusesADeepPlanWithExitStatusTwo) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("joulepipe-deep-plan-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path plan = dir / "deep.json";
  const std::filesystem::path err = dir / "stderr.txt";
  std::ofstream(plan) << "{\"stages\":" << Nested(70000, "[", "]") << "}";
  const std::string command = std::string(JOULEPIPE_CLI) + " evaluate --profile " +
                              JOULEPIPE_SOURCE_DIR + "/data/profiles/gpt3-175b+a40_bf16.csv" +
                              " --p-block 70 --plan " + plan.string() + " >/dev/null 2>" +
                              err.string();
  const int status = std::system(command.c_str());
  std::stringstream text;
  text << std::ifstream(err).rdbuf();
  const std::string message = text.str();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 2) << message;
  EXPECT_NE(message.find("nested deeper than 64 levels"), std::string::npos) << message;
  EXPECT_LT(message.size(), 2000u) << message.substr(0, 2000);
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
}

// A short plan that declares a huge schedule: "num_chunks": 3000000 made
// `evaluate` build 48 million instructions (49 s, 6.5 GB) before finding
// that the lists hold 2. It is refused at once, naming the fields.
TEST(PlanHostileInputTest, TheCommandRefusesAHugeDeclaredScheduleAtOnce) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("joulepipe-huge-plan-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::filesystem::path plan = dir / "huge.json";
  const std::filesystem::path err = dir / "stderr.txt";
  const std::string instruction =
      "[{\"instruction\": \"forward\", \"microbatch\": 3, \"chunk\": 0, \"frequency\": 1410}]";
  std::ofstream(plan) << "{\"version\": 1, \"schedule\": \"interleaved\", \"num_stages\": 2, "
                         "\"num_microbatches\": 4, \"num_chunks\": 3000000, \"stages\": ["
                      << instruction << ", " << instruction << "]}";
  const auto start = std::chrono::steady_clock::now();
  const int status =
      std::system((std::string(JOULEPIPE_CLI) + " evaluate --profile " + JOULEPIPE_SOURCE_DIR +
                   "/data/profiles/gpt3-175b+a40_bf16.csv" + " --p-block 70 --plan " +
                   plan.string() + " >/dev/null 2>" + err.string())
                      .c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::stringstream text;
  text << std::ifstream(err).rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 2) << text.str();
  EXPECT_NE(text.str().find("declare a schedule of 48000000 instructions but the stage lists "
                            "hold only 2"),
            std::string::npos)
      << text.str();
  EXPECT_LT(seconds, 5.0) << text.str();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace joulepipe::model
