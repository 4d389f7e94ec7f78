// The wire protocol (gpu/daemon_protocol.hpp) and the configuration parser,
// without a daemon.
#include <gtest/gtest.h>

#include "joulepipe/daemon/config.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::gpu {
namespace {

#define EXPECT_CONTAINS(text, needle)                          \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (needle) << "\" not in: " << (text)

TEST(DaemonProtocol, RequestsRoundTrip) {
  DaemonRequest set;
  set.op = DaemonOp::kSetLockedClocks;
  set.device = 3u;
  set.min_mhz = 900;
  set.max_mhz = 1410;
  const std::string line = EncodeRequest(set);
  ASSERT_EQ(line.back(), '\n');
  const DecodedRequest decoded = DecodeRequest(line.substr(0, line.size() - 1));
  ASSERT_TRUE(decoded.request) << decoded.error;
  EXPECT_EQ(decoded.request->op, DaemonOp::kSetLockedClocks);
  EXPECT_EQ(std::get<unsigned>(decoded.request->device), 3u);
  EXPECT_EQ(decoded.request->min_mhz, 900);
  EXPECT_EQ(decoded.request->max_mhz, 1410);

  DaemonRequest power;
  power.op = DaemonOp::kSetPowerLimit;
  power.device = std::string("GPU-1234");
  power.watts = 250.5;
  const DecodedRequest p = DecodeRequest(EncodeRequest(power));
  ASSERT_TRUE(p.request) << p.error;
  EXPECT_EQ(std::get<std::string>(p.request->device), "GPU-1234");
  EXPECT_DOUBLE_EQ(p.request->watts, 250.5);
}

TEST(DaemonProtocol, PreciseErrors) {
  EXPECT_CONTAINS(DecodeRequest("{garbage").error, "not valid JSON");
  EXPECT_CONTAINS(DecodeRequest("[1]").error, "must be a JSON object");
  EXPECT_CONTAINS(DecodeRequest("{}").error, "no string \"op\"");
  EXPECT_CONTAINS(DecodeRequest(R"({"op":"format_disk"})").error, "unknown op \"format_disk\"");
  EXPECT_CONTAINS(
      DecodeRequest(R"({"op":"set_locked_clocks","device":0,"min_mhz":"900","max_mhz":1})").error,
      "\"min_mhz\" must be an integer");
  EXPECT_CONTAINS(
      DecodeRequest(R"({"op":"set_locked_clocks","device":0,"min_mhz":1400,"max_mhz":900})").error,
      "min_mhz 1400 > max_mhz 900");
  EXPECT_CONTAINS(
      DecodeRequest(R"({"op":"set_locked_clocks","device":-1,"min_mhz":1,"max_mhz":2})").error,
      "\"device\" must be an NVML index");
  EXPECT_CONTAINS(DecodeRequest(R"({"op":"set_power_limit","device":0,"watts":1e999})").error,
                  "not valid JSON");  // nlohmann refuses numbers out of double range
  EXPECT_CONTAINS(DecodeRequest(R"({"op":"set_power_limit","device":0,"watts":-5})").error,
                  "\"watts\" must be a number in (0, 1e6]");
  EXPECT_CONTAINS(DecodeRequest(R"({"op":"reset_locked_clocks","device":0,"max_mzh":1})").error,
                  "unknown field \"max_mzh\"");
  EXPECT_CONTAINS(DecodeRequest(R"({"op":"hello"})").error, "\"version\" is missing");
  // Invalid UTF-8 in an echoed value is repaired, not thrown.
  EXPECT_CONTAINS(DecodeRequest("{\"op\":\"\xff\xfe\"}").error, "not valid JSON");
  EXPECT_CONTAINS(DecodeRequest(std::string(kMaxLineBytes + 1, ' ')).error, "longer than");
}

TEST(DaemonProtocol, RepliesEncodeAnyString) {
  const std::string line = EncodeErrorReply("bad \xff byte");
  const DecodedReply reply = DecodeReply(line);
  ASSERT_TRUE(reply.reply) << reply.error;
  EXPECT_FALSE((*reply.reply)["ok"].get<bool>());
  EXPECT_FALSE(DecodeReply("{\"ok\":false}").reply);
  EXPECT_FALSE(DecodeReply("[]").reply);
  EXPECT_TRUE(DecodeReply("{\"ok\":true}").reply);
}

TEST(LineBuffer, SplitsAndBoundsLines) {
  LineBuffer buffer(8);
  buffer.Append("ab\ncd");
  EXPECT_EQ(buffer.Next().value(), "ab");
  EXPECT_FALSE(buffer.Next());
  buffer.Append("e\n\n");
  EXPECT_EQ(buffer.Next().value(), "cde");
  EXPECT_EQ(buffer.Next().value(), "");
  EXPECT_FALSE(buffer.Next());
  buffer.Append("123456789");
  EXPECT_FALSE(buffer.Next());
  EXPECT_TRUE(buffer.overflowed());
  buffer.Append("\n");
  EXPECT_FALSE(buffer.Next());  // stays overflowed

  LineBuffer exact(4);
  exact.Append("1234\n12345\n");
  EXPECT_EQ(exact.Next().value(), "1234");
  EXPECT_FALSE(exact.Next());
  EXPECT_TRUE(exact.overflowed());
}

TEST(DaemonConfig, ParsesAndRefuses) {
  daemon::Config config;
  daemon::ApplyConfigJson(nlohmann::json::parse(R"({"socket":"/tmp/x.sock","socket_mode":"0666",
      "allow_users":["alice",1001],"allow_groups":["joulepipe"],"max_clients":3})"),
                          "test.json", &config);
  EXPECT_EQ(config.socket, "/tmp/x.sock");
  EXPECT_EQ(config.socket_mode, 0666u);
  EXPECT_EQ(config.allow_users, (std::vector<std::string>{"alice", "1001"}));
  EXPECT_EQ(config.max_clients, 3);
  try {
    daemon::ApplyConfigJson(nlohmann::json::parse(R"({"allow_user":["x"]})"), "test.json", &config);
    FAIL() << "no error";
  } catch (const model::InputError& e) {
    EXPECT_CONTAINS(e.what(), "test.json: unknown field \"allow_user\"");
  }
  EXPECT_THROW(daemon::ParseSocketMode("0999"), model::InputError);
  EXPECT_THROW(daemon::ApplyConfigJson(nlohmann::json::parse(R"({"max_clients":0})"), "t", &config),
               model::InputError);
}

}  // namespace
}  // namespace joulepipe::gpu
