// joulepiped's zeusd face (issue 59): Zeus's daemon routes over HTTP on a
// second socket, a session per caller process, and claims: the newest live
// process's setting is in force, and a process's exit withdraws its own
// only (the next newest, or the default, comes back). The built daemon on
// the simulated NVML library (daemon_test_support.hpp: 3 GPUs, the last in
// MIG mode); the test and its forked children are the Zeus processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../src/daemon/http_framing.hpp"
#include "daemon_test_support.hpp"

namespace joulepipe::daemon::testing {
namespace {

struct HttpReply {
  int status = 0;  // 0: no answer
  json body;
};

// One request on `client`'s connection; the answer's status and JSON body.
HttpReply Exchange(RawClient& client, const std::string& method, const std::string& target,
                   bool close) {
  client.SendRaw(method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n" +
                 (close ? "Connection: close\r\n" : "") + "\r\n");
  HttpReply reply;
  const std::string status = client.ReadLine();
  if (status.rfind("HTTP/1.1 ", 0) != 0) return reply;
  reply.status = std::stoi(status.substr(9, 3));
  std::size_t length = 0;
  for (std::string line = client.ReadLine(); line != "\r" && !line.empty();
       line = client.ReadLine()) {
    if (line.rfind("Content-Length: ", 0) == 0) length = std::stoul(line.substr(16));
  }
  reply.body = json::parse(client.ReadBytes(length), nullptr, false);
  return reply;
}

// One request on a fresh connection.
HttpReply Call(const std::string& socket, const std::string& method, const std::string& target) {
  RawClient client(socket);
  if (!client.connected()) return {};
  return Exchange(client, method, target, true);
}

DaemonFixture::Options ZeusdOptions() {
  DaemonFixture::Options options;
  options.zeusd = true;
  return options;
}

class ZeusdTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(daemon_.ready()) << daemon_.stderr_text(); }
  std::string zeusd() const { return daemon_.zeusd_socket(); }
  // The newest successful setter call of `function` on `device`; null if none.
  json LastCall(const std::string& function, int device) const {
    json last;
    for (const json& call : daemon_.Calls()) {
      if (call["function"] == function && call["device"] == device && call["result"] == 0) {
        last = call;
      }
    }
    return last;
  }
  // A process that POSTs `target` and then waits to be killed: its pid, once
  // its answer came (the answer's status in *status).
  pid_t Forked(const std::string& target, int* status) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      const HttpReply r = Call(zeusd(), "POST", target);
      const char code = static_cast<char>(r.status / 100);
      if (::write(ready[1], &code, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char code = 0;
    EXPECT_EQ(::read(ready[0], &code, 1), 1);
    ::close(ready[0]);
    *status = code * 100;
    return pid;
  }
  static double Kill(pid_t pid) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  DaemonFixture daemon_{ZeusdOptions()};
};

TEST_F(ZeusdTest, DiscoveryAndReadsAnswerAsZeusdDoes) {
  const HttpReply discover = Call(zeusd(), "GET", "/discover");
  ASSERT_EQ(discover.status, 200) << discover.body;
  EXPECT_EQ(discover.body["gpus"].size(), 3u);
  EXPECT_EQ(discover.body["gpus"][0]["id"], 0);
  EXPECT_TRUE(discover.body["gpus"][0]["name"].is_string());
  EXPECT_EQ(discover.body["cpus"], json::array());
  EXPECT_EQ(discover.body["enabled_api_groups"], json({"gpu-read", "gpu-control"}));
  EXPECT_EQ(discover.body["auth_required"], false);

  const HttpReply limits = Call(zeusd(), "GET", "/gpu/get_power_limit_constraints?gpu_ids=0,1");
  ASSERT_EQ(limits.status, 200) << limits.body;
  EXPECT_GT(limits.body["1"]["max_power_limit_mw"].get<long long>(),
            limits.body["1"]["min_power_limit_mw"].get<long long>());
  const HttpReply power = Call(zeusd(), "GET", "/gpu/get_power");
  ASSERT_EQ(power.status, 200) << power.body;
  EXPECT_EQ(power.body["power_mw"].size(), 3u);
  EXPECT_GT(power.body["timestamp_ms"].get<long long>(), 0);
  const HttpReply energy = Call(zeusd(), "GET", "/gpu/get_cumulative_energy?gpu_ids=0");
  ASSERT_EQ(energy.status, 200) << energy.body;
  EXPECT_GE(energy.body["0"]["energy_mj"].get<long long>(), 0);
  EXPECT_EQ(Call(zeusd(), "GET", "/time").status, 200);

  // One connection, several requests (Zeus's client keeps it alive).
  RawClient kept(zeusd());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Exchange(kept, "GET", "/gpu/get_power_limit?gpu_ids=0", false).status, 200);
  }
}

TEST_F(ZeusdTest, BadRequestsGetZeusdsStatusAndAReason) {
  const auto expect = [&](const char* method, const std::string& target, int status,
                          const std::string& needle) {
    const HttpReply r = Call(zeusd(), method, target);
    EXPECT_EQ(r.status, status) << target << " " << r.body;
    EXPECT_CONTAINS(r.body.value("error", ""), needle);
  };
  expect("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=7&min_clock_mhz=900&max_clock_mhz=900", 400,
         "GPU 7 does not exist");
  expect("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900", 400,
         "missing query parameter max_clock_mhz");
  expect("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=x&max_clock_mhz=9", 400,
         "min_clock_mhz must be an integer");
  expect("POST", "/gpu/set_power_limit?gpu_ids=0,a&power_limit_mw=300000", 400, "gpu_ids");
  expect("POST", "/gpu/set_gpu_locked_clocks?gpu_ids=2&min_clock_mhz=900&max_clock_mhz=900", 403,
         "MIG");
  expect("GET", "/cpu/get_cumulative_energy", 404, "GPUs only");
  expect("GET", "/auth/whoami", 404, "peer credentials");
  expect("GET", "/nothing", 404, "no route /nothing");
  expect("GET", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=300000", 405, "other method");

  // A request the stream cannot frame: refused, the connection closed.
  RawClient raw(zeusd());
  raw.SendRaw("GET /discover HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_CONTAINS(raw.ReadLine(), "411");
  // The daemon lives on.
  EXPECT_EQ(Call(zeusd(), "GET", "/discover").status, 200);
}

// A setting outlives the connection that made it and ends with the process;
// two processes on one GPU: the newer is in force, a death restores the
// other's setting, never the default while a setter lives.
TEST_F(ZeusdTest, ClaimsBelongToTheProcessAndTheNewestLiveOneIsInForce) {
  int status = 0;
  const pid_t a =
      Forked("/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=1200&max_clock_mhz=1200", &status);
  ASSERT_EQ(status, 200);
  const json first = LastCall("nvmlDeviceSetGpuLockedClocks", 0);
  ASSERT_FALSE(first.is_null());
  const int a_mhz = first["args"]["max_mhz"];
  // A's connection is closed; its setting stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(LastCall("nvmlDeviceResetGpuLockedClocks", 0).is_null());

  const pid_t b =
      Forked("/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900&max_clock_mhz=900", &status);
  ASSERT_EQ(status, 200);
  const int b_mhz = LastCall("nvmlDeviceSetGpuLockedClocks", 0)["args"]["max_mhz"];
  EXPECT_LT(b_mhz, a_mhz);

  // B dies: A's setting comes back, not the default.
  const double b_died = Kill(b);
  ASSERT_TRUE(WaitFor(
      [&] {
        const json last = LastCall("nvmlDeviceSetGpuLockedClocks", 0);
        return last["args"]["max_mhz"] == a_mhz && last["t"].get<double>() >= b_died - 0.01;
      },
      5));
  EXPECT_TRUE(LastCall("nvmlDeviceResetGpuLockedClocks", 0).is_null());

  // A dies: the default, within a second.
  const double a_died = Kill(a);
  ASSERT_TRUE(WaitFor([&] { return !LastCall("nvmlDeviceResetGpuLockedClocks", 0).is_null(); }, 5));
  EXPECT_LT(LastCall("nvmlDeviceResetGpuLockedClocks", 0)["t"].get<double>() - a_died, 1.0);
  const std::string audit = ReadText(daemon_.audit_log());
  EXPECT_CONTAINS(audit, "op=restore_gpu_locked_clocks");
  EXPECT_CONTAINS(audit, "pid=" + std::to_string(a));
}

// An older claimant's death changes nothing while a newer one lives; a
// reset withdraws only the caller's claim.
TEST_F(ZeusdTest, ARestoreNeverUndoesAnotherLiveProcesssSetting) {
  int status = 0;
  const pid_t a = Forked("/gpu/set_power_limit?gpu_ids=1&power_limit_mw=300000", &status);
  ASSERT_EQ(status, 200);
  const pid_t b = Forked("/gpu/set_power_limit?gpu_ids=1&power_limit_mw=250000", &status);
  ASSERT_EQ(status, 200);
  const std::size_t calls = daemon_.Calls().size();
  Kill(a);  // not in force: nothing to restore
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(daemon_.Calls().size(), calls);

  // This process claims, then resets: B's limit comes back.
  ASSERT_EQ(Call(zeusd(), "POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=280000").status,
            200);
  const HttpReply reset = Call(zeusd(), "POST", "/gpu/reset_gpu_locked_clocks?gpu_ids=1");
  EXPECT_EQ(reset.status, 200);  // no clock claim on GPU 1: the default, as asked
  const HttpReply limits = Call(zeusd(), "GET", "/gpu/get_power_limit?gpu_ids=1");
  EXPECT_EQ(limits.body["1"]["power_limit_mw"], 280000);
  Kill(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Call(zeusd(), "GET", "/gpu/get_power_limit?gpu_ids=1").body["1"]["power_limit_mw"],
            280000);  // ours, the newest, stays
}

// The native protocol's exclusive leases and Zeus's claims keep off each
// other's GPUs, naming the holder.
TEST_F(ZeusdTest, ANativeLeaseAndAClaimExcludeEachOther) {
  RawClient native(daemon_.socket());
  ASSERT_TRUE(native.Hello()["ok"]);
  ASSERT_TRUE(native.Request(json{
      {"op", "set_locked_clocks"}, {"device", 0}, {"min_mhz", 1000}, {"max_mhz", 1000}})["ok"]);
  const HttpReply refused = Call(
      zeusd(), "POST", "/gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900&max_clock_mhz=900");
  EXPECT_EQ(refused.status, 403);
  EXPECT_CONTAINS(refused.body.value("error", ""), "leased to joulepipe client pid");

  ASSERT_EQ(Call(zeusd(), "POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=250000").status,
            200);
  const json reply = native.Request(json{{"op", "set_power_limit"}, {"device", 1}, {"watts", 300}});
  EXPECT_FALSE(reply["ok"]);
  EXPECT_CONTAINS(reply["error"].get<std::string>(), "Zeus client pid");
  const json list = native.Request(json{{"op", "list_devices"}});
  EXPECT_EQ(list["devices"][1]["claims"][0]["setting"], "power_limit");
  EXPECT_EQ(list["devices"][1]["claims"][0]["pid"], ::getpid());
}

// The power stream: an event per GPU every 0.1 s, as zeusd's.
TEST_F(ZeusdTest, ThePowerStreamSendsAnEventPerGpu) {
  RawClient stream(zeusd());
  stream.SendRaw("GET /gpu/stream_power?gpu_ids=0,1 HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_CONTAINS(stream.ReadLine(), "200");
  int events = 0;
  std::set<int> gpus;
  while (events < 6) {
    const std::string line = stream.ReadLine();
    if (line.rfind("data: ", 0) != 0) continue;
    const json event = json::parse(line.substr(6));
    gpus.insert(event["gpu_id"].get<int>());
    EXPECT_GT(event["power_mw"].get<long long>(), 0);
    EXPECT_GT(event["timestamp_ms"].get<long long>(), 0);
    ++events;
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1}));
}

// Framing: a request whole or in pieces, pipelined ones one at a time, and
// every refusal with its status; never more than the bounds are held.
TEST(ZeusdFraming, RequestsAreCutWholeAndRefusalsNameTheirStatus) {
  std::string stream =
      "GET /gpu/get_power?gpu_ids=0%2C1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      "POST /gpu/reset_gpu_locked_clocks?gpu_ids=1 HTTP/1.1\r\nConnection: close\r\n\r\n";
  std::string buffer;
  std::vector<HttpRequest> got;
  for (char c : stream) {  // byte by byte
    buffer += c;
    const HttpCut cut = CutRequest(&buffer);
    ASSERT_FALSE(cut.refusal) << cut.refusal->message;
    if (cut.request) got.push_back(*cut.request);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].method, "GET");
  EXPECT_EQ(got[0].path, "/gpu/get_power");
  EXPECT_EQ(QueryValue(got[0].query, "gpu_ids"), "0,1");
  EXPECT_TRUE(got[0].keep_alive);
  EXPECT_EQ(got[1].path, "/gpu/reset_gpu_locked_clocks");
  EXPECT_FALSE(got[1].keep_alive);
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(QueryValue("a=1&b=2", "c"), std::nullopt);

  const auto refusal = [](std::string bytes) {
    const HttpCut cut = CutRequest(&bytes);
    return cut.refusal ? cut.refusal->status : 0;
  };
  EXPECT_EQ(refusal("GET /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
  EXPECT_EQ(refusal("GET /x HTTP/1.1\r\nContent-Length: 70000\r\n\r\n"), 413);
  EXPECT_EQ(refusal("GET /x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), 400);
  EXPECT_EQ(refusal("GET /x HTTP/2\r\n\r\n"), 400);
  EXPECT_EQ(refusal("GET x HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refusal("GARBAGE\r\n\r\n"), 400);
  EXPECT_EQ(refusal("GET /x HTTP/1.1\r\nno colon\r\n\r\n"), 400);
  EXPECT_EQ(refusal(std::string(kMaxHeadBytes + 1, 'a')), 431);  // no end of head in sight
}

// Hostile bytes on the zeusd socket (random, in random chunks, from many
// connections at once) cost a claim nothing and the daemon its service.
TEST_F(ZeusdTest, HostileBytesLeaveTheDaemonAndTheClaimsAlone) {
  ASSERT_EQ(Call(zeusd(), "POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=250000").status,
            200);
  std::mt19937 rng(59);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int c = 0; c < 40; ++c) {
    clients.push_back(std::make_unique<RawClient>(zeusd()));
    std::string bytes;
    const int n = 1 + static_cast<int>(rng() % 4000);
    for (int i = 0; i < n; ++i) bytes += static_cast<char>(rng() % 256);
    if (c % 3 == 0) bytes = "GET /discover HTTP/1.1\r\n" + bytes;  // a start, then garbage
    std::size_t at = 0;
    while (at < bytes.size()) {
      const std::size_t chunk = std::min<std::size_t>(bytes.size() - at, 1 + rng() % 512);
      clients.back()->SendRaw(bytes.substr(at, chunk));
      at += chunk;
    }
  }
  clients.clear();
  EXPECT_EQ(Call(zeusd(), "GET", "/discover").status, 200);
  EXPECT_EQ(Call(zeusd(), "GET", "/gpu/get_power_limit?gpu_ids=0").body["0"]["power_limit_mw"],
            250000);
  EXPECT_TRUE(LastCall("nvmlDeviceSetPowerManagementLimit", 0)["args"]["limit_mw"] == 250000);
}

}  // namespace
}  // namespace joulepipe::daemon::testing
