// Hostile joulepiped configuration files: "allow_users" nested 50,000 deep
// once overflowed the stack (the message helper dumped the whole value) and
// 10,000 deep gave a 20,000-character message. Both are now a short
// InputError, from the library and from the built joulepiped (exit 2).
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "joulepipe/daemon/config.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::daemon {
namespace {

using nlohmann::json;

std::string Nested(size_t depth) {
  return std::string(depth, '[') + "\"alice\"" + std::string(depth, ']');
}

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("joulepiped-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& text) {
    const std::string path = (dir_ / "joulepiped.json").string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  // The message LoadConfigFile throws for `text`.
  std::string Error(const std::string& text) {
    const std::string path = Write(text);
    Config config;
    try {
      LoadConfigFile(path, true, &config);
    } catch (const model::InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
    return "";
  }

  std::filesystem::path dir_;
};

TEST_F(ConfigFile, DeepNestingIsAShortErrorNamingTheLimitNotACrash) {
  for (size_t depth : {50000u, 10000u, 64u}) {
    const std::string message = Error("{\"allow_users\": " + Nested(depth) + "}");
    EXPECT_NE(message.find("joulepiped.json: JSON nested deeper than 64 levels at line 1, column "),
              std::string::npos)
        << message;
    EXPECT_LT(message.size(), 400u) << depth;
  }
  // 63 levels inside the object: within the limit, refused for its type.
  const std::string message = Error("{\"allow_users\": " + Nested(63) + "}");
  EXPECT_NE(
      message.find("\"allow_users\": each entry must be a name or a numeric id, got [[[...]]]"),
      std::string::npos)
      << message;
}

// Issue 41, item 2: every file has a size limit checked before it is read
// whole. Before, --config /dev/zero read until memory ran out.
TEST_F(ConfigFile, AFileOverOneMebibyteIsRefusedBeforeItIsRead) {
  const std::string message = Error(std::string(2u << 20, ' ') + "{}");
  EXPECT_NE(message.find("is 2 MiB, more than the 1 MiB a configuration file may be"),
            std::string::npos)
      << message;
  Config config;
  try {
    LoadConfigFile("/dev/zero", true, &config);
    ADD_FAILURE() << "/dev/zero accepted";
  } catch (const model::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is not a regular file and sent more than 1 MiB"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ConfigFile, InvalidJsonNamesLineAndColumnInPlainWords) {
  const std::string message = Error("{\n  \"socket\": \"/run/j.sock\",\n  \"max_clients\": 6 4\n}");
  EXPECT_NE(message.find("joulepiped.json: not valid JSON at line 3, column 20"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  EXPECT_NE(Error("").find("the text is empty"), std::string::npos);
}

TEST_F(ConfigFile, HugeValuesAndKeysAreQuotedShort) {
  const std::string huge(1 << 20, 'x');
  for (const std::string& text : {"{\"" + huge + "\": 1}", "{\"socket_mode\": \"" + huge + "\"}",
                                  "{\"allow_groups\": [" + std::string(100000, '1') + ".5]}",
                                  "{\"allow_users\": [{\"a\": \"" + huge + "\"}]}"}) {
    const std::string message = Error(text);
    EXPECT_LT(message.size(), 400u) << message.substr(0, 1000);
  }
}

// A document built in code need not respect the parser's limit:
// ApplyConfigJson still shows only an excerpt of a bad value.
TEST(ApplyConfigJson, ADeepValueBuiltInCodeIsShownAsAnExcerpt) {
  json users = "alice";
  for (int i = 0; i < 50000; ++i) users = json::array({std::move(users)});
  Config config;
  try {
    ApplyConfigJson(json{{"allow_users", json::array({std::move(users)})}}, "code", &config);
    ADD_FAILURE() << "accepted";
  } catch (const model::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "code: \"allow_users\": each entry must be a name or a numeric id, got [[[...]]]");
  }
}

// joulepiped itself: a configuration error is exit status 2 (docs/daemon.md)
// with one short line, never a signal.
TEST_F(ConfigFile, JoulepipedExitsTwoOnADeeplyNestedConfiguration) {
  const std::string config = Write("{\"allow_users\": " + Nested(50000) + "}");
  const std::string err = (dir_ / "stderr.txt").string();
  const int status =
      std::system((std::string(JOULEPIPE_DAEMON) + " --config " + config + " 2> " + err).c_str());
  std::stringstream text;
  text << std::ifstream(err).rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 2) << text.str();
  EXPECT_NE(text.str().find("joulepiped: error: " + config + ": JSON nested deeper than 64 levels"),
            std::string::npos)
      << text.str();
  EXPECT_LT(text.str().size(), 2000u);
}

}  // namespace
}  // namespace joulepipe::daemon
