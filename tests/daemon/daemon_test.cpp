// joulepiped end to end: the built daemon in a child process, on the
// simulated NVML library (3 GPUs, the last in MIG mode), driven over its
// socket.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>

#include <gtest/gtest.h>

#include "daemon_test_support.hpp"
#include "joulepipe/daemon/audit_log.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::daemon::testing {
namespace {

json SetClocks(int device, int min_mhz, int max_mhz) {
  return {
      {"op", "set_locked_clocks"}, {"device", device}, {"min_mhz", min_mhz}, {"max_mhz", max_mhz}};
}

TEST(Joulepiped, HelloComesFirstAndChecksTheVersion) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  ASSERT_TRUE(client.connected());
  json reply = client.Request(json{{"op", "list_devices"}});
  EXPECT_FALSE(reply["ok"]);
  EXPECT_CONTAINS(reply["error"].get<std::string>(), "send {\"op\":\"hello\",\"version\":1}");
  reply = client.Request(json{{"op", "hello"}, {"version", 99}});
  EXPECT_FALSE(reply["ok"]);
  EXPECT_CONTAINS(reply["error"].get<std::string>(), "protocol version 99 is not supported");
  reply = client.Hello();
  EXPECT_TRUE(reply["ok"]) << reply;
  EXPECT_EQ(reply["version"], 1);
  EXPECT_EQ(reply["devices"], 3);
  EXPECT_EQ(reply["peer"]["uid"], ::getuid());
}

TEST(Joulepiped, ListsDevicesWithClocksAndPowerRange) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  client.Hello();
  const json reply = client.Request(json{{"op", "list_devices"}});
  ASSERT_TRUE(reply["ok"]) << reply;
  ASSERT_EQ(reply["devices"].size(), 3u);
  const json& gpu0 = reply["devices"][0];
  EXPECT_EQ(gpu0["index"], 0);
  EXPECT_EQ(gpu0["uuid"].get<std::string>().rfind("GPU-", 0), 0u);
  EXPECT_FALSE(gpu0["mig"]);
  const auto clocks = gpu0["supported_sm_clocks_mhz"].get<std::vector<int>>();
  ASSERT_GT(clocks.size(), 2u);
  EXPECT_GT(clocks.front(), clocks.back());
  EXPECT_LT(gpu0["power_limit_w"]["min"].get<double>(), gpu0["power_limit_w"]["max"].get<double>());
  EXPECT_TRUE(gpu0["lease"].is_null());
  EXPECT_TRUE(reply["devices"][2]["mig"]);
}

TEST(Joulepiped, ClampsAndSnapsLockedClocks) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  client.Hello();
  const json list = client.Request(json{{"op", "list_devices"}});
  const auto clocks = list["devices"][0]["supported_sm_clocks_mhz"].get<std::vector<int>>();
  const std::string uuid = list["devices"][0]["uuid"];

  // Far outside: clamped to the supported range.
  json reply = client.Request(SetClocks(0, 1, 99999));
  ASSERT_TRUE(reply["ok"]) << reply;
  EXPECT_EQ(reply["applied"]["min_mhz"], clocks.back());
  EXPECT_EQ(reply["applied"]["max_mhz"], clocks.front());
  EXPECT_EQ(reply["requested"]["max_mhz"], 99999);
  EXPECT_TRUE(reply["clamped"]);

  // Between supported clocks: max snaps down, min up.
  const int a = clocks[clocks.size() / 2];
  const int b = clocks[clocks.size() / 2 - 3];  // higher
  reply = client.Request(SetClocks(0, a - 1, b + 1));
  ASSERT_TRUE(reply["ok"]) << reply;
  EXPECT_EQ(reply["applied"]["min_mhz"], a);
  EXPECT_EQ(reply["applied"]["max_mhz"], b);

  // Exact supported clocks pass unchanged; by UUID too.
  reply = client.Request(
      json{{"op", "set_locked_clocks"}, {"device", uuid}, {"min_mhz", a}, {"max_mhz", a}});
  ASSERT_TRUE(reply["ok"]) << reply;
  EXPECT_FALSE(reply["clamped"]);
  // The simulated GPU saw the applied values.
  const std::vector<json> calls = daemon.Calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back()["args"]["min_mhz"], a);
  EXPECT_EQ(calls.back()["args"]["max_mhz"], a);

  // Refusals: inverted, unknown device, unknown UUID, MIG.
  EXPECT_CONTAINS(client.Request(SetClocks(0, 1400, 900))["error"].get<std::string>(),
                  "need min_mhz <= max_mhz");
  EXPECT_CONTAINS(client.Request(SetClocks(7, 900, 900))["error"].get<std::string>(),
                  "no GPU with NVML index 7");
  EXPECT_CONTAINS(
      client.Request(json{{"op", "reset_locked_clocks"}, {"device", "GPU-nope"}})["error"]
          .get<std::string>(),
      "no GPU with UUID");
  EXPECT_CONTAINS(client.Request(SetClocks(2, 900, 900))["error"].get<std::string>(), "MIG mode");

  reply = client.Request(json{{"op", "reset_locked_clocks"}, {"device", 0}});
  EXPECT_TRUE(reply["ok"]) << reply;
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);
}

TEST(Joulepiped, ClampsThePowerLimit) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  client.Hello();
  const json limits = client.Request(json{{"op", "list_devices"}})["devices"][1]["power_limit_w"];
  json reply = client.Request(json{{"op", "set_power_limit"}, {"device", 1}, {"watts", 1}});
  ASSERT_TRUE(reply["ok"]) << reply;
  EXPECT_EQ(reply["applied_w"], limits["min"]);
  EXPECT_TRUE(reply["clamped"]);
  reply = client.Request(json{{"op", "set_power_limit"}, {"device", 1}, {"watts", 1e5}});
  EXPECT_EQ(reply["applied_w"], limits["max"]);
  const double middle = (limits["min"].get<double>() + limits["max"].get<double>()) / 2;
  reply = client.Request(json{{"op", "set_power_limit"}, {"device", 1}, {"watts", middle}});
  EXPECT_DOUBLE_EQ(reply["applied_w"].get<double>(), middle);
  EXPECT_FALSE(reply["clamped"]);
  const json list = client.Request(json{{"op", "list_devices"}});
  EXPECT_DOUBLE_EQ(list["devices"][1]["power_limit_w"]["current"].get<double>(), middle);
  EXPECT_TRUE(list["devices"][1]["lease"]["power_limit"]);
  reply = client.Request(json{{"op", "reset_power_limit"}, {"device", 1}});
  EXPECT_EQ(reply["applied_w"], limits["default"]);
  EXPECT_TRUE(client.Request(json{{"op", "list_devices"}})["devices"][1]["lease"].is_null());
}

// Runs `body` in a child that has become `user`; returns its exit status.
int RunAs(const passwd& user, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(user.pw_gid) != 0 || ::setuid(user.pw_uid) != 0) {
      ::_exit(3);
    }
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

// 0: served; 1: refused naming the uid and allow_users; 2: other.
int TryAsPeer(const std::string& socket) {
  RawClient client(socket);
  if (!client.connected()) return 2;
  const json reply = client.Hello();
  if (reply["ok"] == true) return 0;
  const std::string error = reply["error"];
  if (error.find("uid " + std::to_string(::getuid())) != std::string::npos &&
      error.find("allow_users") != std::string::npos && client.AtEof()) {
    return 1;
  }
  std::fprintf(stderr, "unexpected reply: %s\n", reply.dump().c_str());
  return 2;
}

TEST(Joulepiped, AuthorisesByPeerCredentials) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody";
  const passwd user = *nobody;
  const group* primary = ::getgrgid(user.pw_gid);
  {
    DaemonFixture daemon(DaemonFixture::With({{"socket_mode", "0666"}}));
    ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
    EXPECT_EQ(RunAs(user, [&] { return TryAsPeer(daemon.socket()); }), 1);
    EXPECT_EQ(TryAsPeer(daemon.socket()), 0);  // root always
  }
  {
    DaemonFixture daemon(
        DaemonFixture::With({{"socket_mode", "0666"}, {"allow_users", {"nobody"}}}));
    ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
    EXPECT_EQ(RunAs(user, [&] { return TryAsPeer(daemon.socket()); }), 0);
  }
  {
    DaemonFixture daemon(DaemonFixture::With({{"socket_mode", "0666"}},
                                             {"--allow-user", std::to_string(user.pw_uid)}));
    ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
    EXPECT_EQ(RunAs(user, [&] { return TryAsPeer(daemon.socket()); }), 0);
  }
  if (primary) {
    DaemonFixture daemon(DaemonFixture::With(
        {{"socket_mode", "0666"}, {"allow_groups", {std::string(primary->gr_name)}}}));
    ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
    EXPECT_EQ(RunAs(user, [&] { return TryAsPeer(daemon.socket()); }), 0);
  }
  {
    // Mode 0660 keeps other users out at the file system already.
    DaemonFixture daemon(DaemonFixture::With({{"allow_users", {"nobody"}}}));
    ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
    EXPECT_EQ(std::filesystem::status(daemon.socket()).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                  std::filesystem::perms::group_read | std::filesystem::perms::group_write);
    EXPECT_EQ(RunAs(user, [&] { return TryAsPeer(daemon.socket()); }), 2);
  }
}

TEST(Joulepiped, LeasesAGpuToTheConnectionThatChangedIt) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient a(daemon.socket());
  RawClient b(daemon.socket());
  a.Hello();
  b.Hello();
  ASSERT_TRUE(a.Request(SetClocks(0, 900, 1200))["ok"]);
  json reply = b.Request(SetClocks(0, 900, 900));
  EXPECT_FALSE(reply["ok"]);
  EXPECT_CONTAINS(reply["error"].get<std::string>(),
                  "is leased to client pid " + std::to_string(::getpid()) + " uid");
  EXPECT_FALSE(b.Request(json{{"op", "reset_locked_clocks"}, {"device", 0}})["ok"]);
  EXPECT_TRUE(b.Request(SetClocks(1, 900, 900))["ok"]);  // another GPU is free
  a.Close();
  EXPECT_TRUE(WaitFor([&] { return b.Request(SetClocks(0, 900, 900))["ok"] == true; }));
  EXPECT_GE(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);  // a's lease restored
}

TEST(Joulepiped, RestoresTheGpusOfAClientKilledMidRun) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    // A training process: locks clocks on 2 GPUs and sets a power limit
    // through the real client, then "trains" until killed.
    try {
      auto control = gpu::MakeDaemonClockControl(daemon.socket());
      const std::vector<int> clocks = control->SupportedSmClocks(0);
      control->SetLockedClocks(0, clocks[10], clocks[5]);
      control->SetLockedClocks(1, clocks[10], clocks[10]);
      control->SetPowerLimit(1, 300);
      (void)!::write(ready[1], "k", 1);
      for (;;) ::pause();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the client child failed";
  ::close(ready[0]);
  {
    RawClient observer(daemon.socket());
    observer.Hello();
    const json list = observer.Request(json{{"op", "list_devices"}});
    EXPECT_EQ(list["devices"][0]["lease"]["pid"], child);
    EXPECT_EQ(list["devices"][1]["lease"]["pid"], child);
    EXPECT_DOUBLE_EQ(list["devices"][1]["power_limit_w"]["current"].get<double>(), 300);
  }
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 0);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(WaitFor([&] {
    return daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0) == 1 &&
           daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 1) == 1;
  })) << daemon.stderr_text();
  RawClient observer(daemon.socket());
  observer.Hello();
  const json list = observer.Request(json{{"op", "list_devices"}});
  EXPECT_TRUE(list["devices"][0]["lease"].is_null());
  EXPECT_TRUE(list["devices"][1]["lease"].is_null());
  EXPECT_EQ(list["devices"][1]["power_limit_w"]["current"],
            list["devices"][1]["power_limit_w"]["default"]);
  const std::string audit = ReadText(daemon.audit_log());
  EXPECT_CONTAINS(audit, "pid=" + std::to_string(child));
  EXPECT_CONTAINS(audit, "op=restore_locked_clocks");
  EXPECT_CONTAINS(audit, "op=restore_power_limit");
  // The socket's EOF usually comes first; the process watch may win the race.
  EXPECT_TRUE(audit.find("result=\"ok (connection closed)\"") != std::string::npos ||
              audit.find("result=\"ok (client process exited)\"") != std::string::npos)
      << audit;
}

TEST(Joulepiped, OrderlyShutdownRestoresEverythingAndRemovesTheSocket) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  client.Hello();
  ASSERT_TRUE(client.Request(SetClocks(0, 900, 900))["ok"]);
  ASSERT_TRUE(client.Request(json{{"op", "set_power_limit"}, {"device", 1}, {"watts", 250}})["ok"]);
  const int status = daemon.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << daemon.stderr_text();
  EXPECT_EQ(daemon.CountCalls("nvmlDeviceResetGpuLockedClocks", 0), 1);
  const std::vector<json> calls = daemon.Calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back()["function"], "nvmlDeviceSetPowerManagementLimit");
  EXPECT_EQ(calls.back()["device"], 1);
  EXPECT_FALSE(std::filesystem::exists(daemon.socket()));
  EXPECT_CONTAINS(ReadText(daemon.audit_log()), "daemon shutdown");
}

TEST(Joulepiped, SurvivesMalformedInputAndKeepsServingOthers) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  client.Hello();
  const std::string binary("\x00\x01\xff\xfe\x80garbage", 12);
  EXPECT_CONTAINS(client.Request(binary)["error"].get<std::string>(), "not valid JSON");
  EXPECT_CONTAINS(client.Request(std::string("{\"op\":"))["error"].get<std::string>(),
                  "not valid JSON");
  EXPECT_CONTAINS(client.Request(std::string("{\"op\":\"reboot\"}"))["error"].get<std::string>(),
                  "unknown op");
  EXPECT_CONTAINS(
      client
          .Request(std::string(
              R"({"op":"set_locked_clocks","device":[0],"min_mhz":1,"max_mhz":2})"))["error"]
          .get<std::string>(),
      "\"device\" must be");
  // Refused by the bounded parser (model/json_input.hpp) before any recursion.
  EXPECT_CONTAINS(
      client.Request(std::string(20000, '[') + std::string(20000, ']'))["error"].get<std::string>(),
      "nested deeper than");
  EXPECT_TRUE(client.Request(json{{"op", "list_devices"}})["ok"]);  // still served

  // Several requests in one write, answered in order.
  ASSERT_TRUE(client.SendRaw("{\"op\":\"list_devices\"}\n{\"op\":\"nope\"}\n"));
  EXPECT_TRUE(json::parse(client.ReadLine())["ok"]);
  EXPECT_FALSE(json::parse(client.ReadLine())["ok"]);

  // A partial line, then close: nothing to answer, no harm.
  {
    RawClient partial(daemon.socket());
    partial.SendRaw("{\"op\":\"hel");
  }
  // A line over the limit: an error reply, then the connection is closed.
  {
    RawClient huge(daemon.socket());
    huge.SendRaw(std::string(100 * 1024, 'x'));
    const std::string reply = huge.ReadLine();
    ASSERT_FALSE(reply.empty());
    EXPECT_CONTAINS(json::parse(reply)["error"].get<std::string>(), "longer than 65536 bytes");
    EXPECT_TRUE(huge.AtEof());
  }
  RawClient other(daemon.socket());
  EXPECT_TRUE(other.Hello()["ok"]);
  EXPECT_TRUE(client.Request(json{{"op", "list_devices"}})["ok"]);
}

TEST(Joulepiped, HostileStreamsDoNotStopTheDaemon) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient holder(daemon.socket());
  holder.Hello();
  ASSERT_TRUE(holder.Request(SetClocks(0, 900, 900))["ok"]);
  std::mt19937 random(11);
  for (int i = 0; i < 200; ++i) {
    RawClient hostile(daemon.socket());
    ASSERT_TRUE(hostile.connected()) << "connection " << i;
    if (random() % 2) hostile.Hello();
    std::string bytes(random() % 8192, '\0');
    for (char& c : bytes) c = static_cast<char>(random() % 8 == 0 ? '\n' : random());
    for (std::size_t at = 0; at < bytes.size();) {
      const std::size_t n = 1 + random() % (bytes.size() - at);
      hostile.SendRaw(bytes.substr(at, n));
      at += n;
    }
    if (random() % 2) hostile.ReadLine();  // read one reply, or none, then vanish
  }
  EXPECT_EQ(::waitpid(daemon.pid(), nullptr, WNOHANG), 0) << "the daemon died";
  // The lease of the well-behaved client survived all of it.
  RawClient other(daemon.socket());
  other.Hello();
  EXPECT_EQ(other.Request(json{{"op", "list_devices"}})["devices"][0]["lease"]["pid"], ::getpid());
  EXPECT_TRUE(holder.Request(json{{"op", "list_devices"}})["ok"]);
}

TEST(Joulepiped, RefusesClientsBeyondMaxClients) {
  DaemonFixture daemon(DaemonFixture::With({{"max_clients", 2}}));
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient a(daemon.socket());
  RawClient b(daemon.socket());
  EXPECT_TRUE(a.Hello()["ok"]);
  EXPECT_TRUE(b.Hello()["ok"]);
  RawClient c(daemon.socket());
  EXPECT_CONTAINS(c.Hello()["error"].get<std::string>(), "at most 2 clients");
  a.Close();
  EXPECT_TRUE(WaitFor([&] { return RawClient(daemon.socket()).Hello()["ok"] == true; }));
}

TEST(Joulepiped, WritesOneAuditLineperChange) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  RawClient client(daemon.socket());
  client.Hello();
  const std::string uuid = client.Request(json{{"op", "list_devices"}})["devices"][0]["uuid"];
  client.Request(SetClocks(0, 1, 99999));
  client.Request(json{{"op", "reset_locked_clocks"}, {"device", 0}});
  client.Request(SetClocks(2, 900, 900));  // refused: MIG
  const std::string audit = ReadText(daemon.audit_log());
  std::vector<std::string> lines;
  std::stringstream stream(audit);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << audit;
  EXPECT_CONTAINS(lines[0], "op=set_locked_clocks device=" + uuid + " requested=1-99999MHz");
  EXPECT_CONTAINS(lines[0], "result=ok");
  EXPECT_CONTAINS(lines[0], "uid=" + std::to_string(::getuid()));
  EXPECT_CONTAINS(lines[0], "pid=" + std::to_string(::getpid()));
  EXPECT_EQ(lines[0].find("20"), 0u);  // ISO time first
  EXPECT_CONTAINS(lines[1], "op=reset_locked_clocks");
  EXPECT_CONTAINS(lines[2], "MIG mode");
}

TEST(Joulepiped, RefusesASecondDaemonAndReplacesAStaleSocket) {
  DaemonFixture daemon;
  ASSERT_TRUE(daemon.ready()) << daemon.stderr_text();
  // A second daemon on the same socket refuses to start.
  const std::string socket = daemon.socket();
  const pid_t second = ::fork();
  if (second == 0) {
    ::setenv("JOULEPIPE_NVML_LIBRARY", JOULEPIPE_SIM_NVML, 1);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(JOULEPIPE_DAEMON, JOULEPIPE_DAEMON, "--config",
            (daemon.dir() / "joulepiped.json").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(second, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_TRUE(RawClient(socket).Hello()["ok"]);
}

// A live listener whose accept queue is full (a busy or stuck daemon): the
// start-up probe must not block in connect() (it did, and a second
// joulepiped then hung there, deaf to SIGTERM); it refuses at once.
TEST(Joulepiped, AFullAcceptQueueIsRefusedAtOnceNotWaitedOn) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("joulepiped-full-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "busy.sock").string();
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  std::vector<int> clients;  // connect until the queue refuses more
  for (int i = 0; i < 64; ++i) {
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    clients.push_back(c);
    if (::connect(c, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) break;
  }
  const std::string config = (dir / "joulepiped.json").string();
  std::ofstream(config) << "{}";
  const auto started = std::chrono::steady_clock::now();
  const pid_t daemon = ::fork();
  if (daemon == 0) {
    ::setenv("JOULEPIPE_NVML_LIBRARY", JOULEPIPE_SIM_NVML, 1);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    ::execl(JOULEPIPE_DAEMON, JOULEPIPE_DAEMON, "--config", config.c_str(), "--socket",
            path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  const bool ended = WaitFor([&] { return ::waitpid(daemon, &status, WNOHANG) == daemon; }, 10);
  if (!ended) {
    ::kill(daemon, SIGKILL);
    ::waitpid(daemon, &status, 0);
  }
  EXPECT_TRUE(ended) << "joulepiped waited on a full accept queue";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 10);
  for (int c : clients) ::close(c);
  ::close(listener);
  fs::remove_all(dir);
}

TEST(Joulepiped, HelpTeachesAndBadConfigIsPrecise) {
  const std::string out =
      std::filesystem::temp_directory_path() / ("joulepiped-help-" + std::to_string(::getpid()));
  ASSERT_EQ(std::system((std::string(JOULEPIPE_DAEMON) + " --help > " + out).c_str()), 0);
  const std::string help = ReadText(out);
  EXPECT_CONTAINS(help, "--allow-group");
  EXPECT_CONTAINS(help, "restored");
  const std::string bad = out + ".json";
  std::ofstream(bad) << R"({"allow_user": ["x"]})";
  const int code =
      std::system((std::string(JOULEPIPE_DAEMON) + " --config " + bad + " 2> " + out).c_str());
  EXPECT_EQ(WEXITSTATUS(code), 2);
  EXPECT_CONTAINS(ReadText(out), "unknown field \"allow_user\"");
  std::filesystem::remove(out);
  std::filesystem::remove(bad);
}

// Startup errors name the configuration key to change; joulepiped adds the
// flag that overrides it. The daemon library itself names no flag.
TEST(Joulepiped, StartupErrorsNameTheSettingAndItsFlag) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("joulepiped-setting-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string config = dir / "joulepiped.json";
  std::ofstream(config) << "{}";
  const std::string plain_file = dir / "not-a-socket";
  std::ofstream(plain_file) << "x";
  const std::string err = dir / "stderr.txt";
  auto run = [&](const std::string& flags) {
    const std::string command = "JOULEPIPE_NVML_LIBRARY=" + std::string(JOULEPIPE_SIM_NVML) + " " +
                                JOULEPIPE_DAEMON + " --config " + config + " " + flags + " 2> " +
                                err;
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };

  EXPECT_EQ(run("--socket " + plain_file), 2);
  std::string text = ReadText(err);
  EXPECT_CONTAINS(text, "the \"socket\" path " + plain_file + " exists and is not a socket");
  EXPECT_CONTAINS(text, "(\"socket\" in the configuration file, or --socket)");

  const std::string missing_dir = (dir / "missing" / "audit.log").string();
  EXPECT_EQ(run("--socket " + (dir / "d.sock").string() + " --audit-log " + missing_dir), 2);
  text = ReadText(err);
  EXPECT_CONTAINS(text, "cannot open the audit log " + missing_dir);
  EXPECT_CONTAINS(text, "fix the \"audit_log\" path or its directory");
  EXPECT_CONTAINS(text, "(\"audit_log\" in the configuration file, or --audit-log)");

  // Names that must exist are checked at start (issue 41, item 2): a
  // misspelt one used to start a daemon that silently allowed nobody.
  EXPECT_EQ(run("--socket " + (dir / "u.sock").string() + " --allow-user no-such-user-jp41"), 2);
  text = ReadText(err);
  EXPECT_CONTAINS(text, "the user \"no-such-user-jp41\" in \"allow_users\"");
  EXPECT_CONTAINS(text, "does not exist on this machine");
  EXPECT_FALSE(fs::exists(dir / "u.sock"));
  EXPECT_EQ(run("--socket " + (dir / "g.sock").string() + " --allow-group no-such-group-jp41"), 2);
  EXPECT_CONTAINS(ReadText(err), "the group \"no-such-group-jp41\" in \"allow_groups\"");
  // One number form: decimal.
  EXPECT_EQ(run("--socket " + (dir / "n.sock").string() + " --max-clients 0x10"), 2);
  EXPECT_CONTAINS(ReadText(err), "'0x10' is hexadecimal; joulepipe reads numbers in decimal only");

  try {
    AuditLog audit(missing_dir);
    ADD_FAILURE() << "opened " << missing_dir;
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "Config::audit_log");
    EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace joulepipe::daemon::testing
