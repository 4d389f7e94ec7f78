// CoordinatorClient and CoordinatedPlan against a fake coordinator: a tiny
// HTTP server on 127.0.0.1 (raw sockets, one thread) whose answers each
// test scripts, down to malformed and oversized ones. Retries never really
// wait: the client's sleep is injected and records the delays.
#include "joulepipe/runtime/coord_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/runtime/agent.hpp"
#include "joulepipe/runtime/coordinated_plan.hpp"
#include "runtime_test_support.hpp"

namespace joulepipe::runtime {
namespace {

using nlohmann::json;
using testing::FakeControl;
using testing::FakeMeter;
using testing::RunStep;
using testing::SimplePlan;
using SteadyClock = std::chrono::steady_clock;

#define EXPECT_CONTAINS(text, needle)                          \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (needle) << "\" not in: " << (text)

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// ---- The fake coordinator ----------------------------------------------------

struct Received {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased
  std::string body;

  std::string Header(const std::string& name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return "";
  }
};

// Special answers of a handler.
const std::string kHang = "<hang>";    // never answer; wait until the client gives up
const std::string kClose = "<close>";  // close the connection without answering

std::string Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
  }
  return "Whatever";
}

// A whole HTTP response with a Content-Length body.
std::string Reply(int status, const std::string& body, const std::string& extra_headers = "") {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) + "\r\n";
  if (status == 204) return out + extra_headers + "\r\n";
  return out + "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

std::string ErrorReply(int status, const std::string& message, const std::string& field) {
  json body = {{"error", message}, {"field", field.empty() ? json(nullptr) : json(field)}};
  return Reply(status, body.dump());
}

class FakeServer {
 public:
  using Handler = std::function<std::string(const Received&)>;

  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 16) != 0) {
      ADD_FAILURE() << "fake server: cannot listen";
    }
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }

  ~FakeServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::vector<Received> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

  // Until `n` requests have arrived (false after `timeout_s`).
  bool WaitRequests(std::size_t n, double timeout_s = 2) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return arrived_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                             [&] { return requests_.size() >= n; });
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd entry{fd_, POLLIN, 0};
      if (::poll(&entry, 1, 10) <= 0) continue;
      const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0) continue;
      Handle(connection);
      ::close(connection);
    }
  }

  // recv with a 2 s limit; false at the end or on timeout.
  bool ReadMore(int connection, std::string* buffer) {
    pollfd entry{connection, POLLIN, 0};
    if (::poll(&entry, 1, 2000) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::recv(connection, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer->append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  void Handle(int connection) {
    std::string buffer;
    std::size_t end;
    while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (!ReadMore(connection, &buffer)) return;
    }
    Received request;
    std::size_t line_end = buffer.find("\r\n");
    const std::string first = buffer.substr(0, line_end);
    const std::size_t space1 = first.find(' ');
    const std::size_t space2 = first.find(' ', space1 + 1);
    request.method = first.substr(0, space1);
    request.target = first.substr(space1 + 1, space2 - space1 - 1);
    std::size_t length = 0;
    for (std::size_t pos = line_end + 2; pos < end;) {
      const std::size_t next = buffer.find("\r\n", pos);
      const std::string line = buffer.substr(pos, next - pos);
      const std::size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), ::tolower);
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (name == "content-length") length = std::stoul(value);
      request.headers.emplace_back(name, value);
      pos = next + 2;
    }
    while (buffer.size() < end + 4 + length) {
      if (!ReadMore(connection, &buffer)) return;
    }
    request.body = buffer.substr(end + 4, length);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(request);
    }
    arrived_.notify_all();
    const std::string reply = handler_(request);
    if (reply == kClose) return;
    if (reply == kHang) {
      // Until the client closes its end (or the server stops).
      while (!stop_) {
        pollfd entry{connection, POLLIN, 0};
        if (::poll(&entry, 1, 10) > 0) {
          char byte;
          if (::recv(connection, &byte, 1, 0) <= 0) return;
        }
      }
      return;
    }
    std::size_t sent = 0;
    while (sent < reply.size()) {
      const ssize_t n = ::send(connection, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  mutable std::condition_variable arrived_;
  std::vector<Received> requests_;
  std::thread thread_;
};

// Answers a list of replies in order, then repeats the last one.
FakeServer::Handler Script(std::vector<std::string> replies) {
  auto index = std::make_shared<std::size_t>(0);
  return [replies = std::move(replies), index](const Received&) {
    const std::string& reply = replies[std::min(*index, replies.size() - 1)];
    ++*index;
    return reply;
  };
}

// A port nobody listens on: bound, then closed.
int ClosedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// ---- Client options for tests -----------------------------------------------

// Short timeouts; sleeps recorded (never slept); u = 0.5 for the jitter.
struct Recorded {
  std::shared_ptr<std::vector<double>> sleeps = std::make_shared<std::vector<double>>();
};

CoordinatorOptions TestOptions(const std::string& url, const Recorded& recorded) {
  CoordinatorOptions o;
  o.url = url;
  o.connect_timeout_s = 1;
  o.request_timeout_s = 1;
  o.retry.max_attempts = 3;
  o.retry.initial_backoff_s = 0.1;
  o.retry.max_backoff_s = 1;
  o.retry.multiplier = 2;
  o.retry.jitter = 0.5;
  o.random = [] { return 0.5; };
  o.sleep = [sleeps = recorded.sleeps](double s) { sleeps->push_back(s); };
  return o;
}

// A rank's plan as the server sends it: SimplePlan(2, forward, backward)'s
// instructions, for rank 3 (pipeline 1, stage 2).
json PlanJson(int version, int forward_mhz, int backward_mhz, const std::string& reason) {
  json frequencies = json::array();
  json instructions = json::array();
  for (const model::PlannedInstruction& p : SimplePlan(2, forward_mhz, backward_mhz)) {
    const std::string kind(model::KindName(p.instruction.kind));
    frequencies.push_back(json::array({kind, p.mhz}));
    instructions.push_back({{"instruction", kind},
                            {"microbatch", p.instruction.microbatch},
                            {"chunk", p.instruction.chunk},
                            {"frequency", p.mhz}});
  }
  return {{"rank", 3},
          {"pipeline", 1},
          {"stage", 2},
          {"version", version},
          {"reason", reason},
          {"predicted", {{"time_s", 1.5}, {"energy_j", 2500.25}}},
          {"frequencies", frequencies},
          {"instructions", instructions}};
}

// The waits the client slept, compared to the last few bits.
void ExpectDelays(const std::vector<double>& actual, const std::vector<double>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) EXPECT_NEAR(actual[i], expected[i], 1e-12) << i;
}

template <typename F>
CoordinatorError CatchCoordinatorError(F&& f) {
  try {
    f();
  } catch (const CoordinatorError& e) {
    return e;
  }
  ADD_FAILURE() << "no CoordinatorError";
  return CoordinatorError(CoordinatorError::Kind::kCancelled, "none");
}

// ---- Options and URLs --------------------------------------------------------

TEST(CoordinatorClientTest, RefusesBadUrlsAndOptionsNamingTheField) {
  auto field_of = [](CoordinatorOptions o) {
    try {
      CoordinatorClient client(std::move(o));
    } catch (const model::InputError& e) {
      return e.field() + " | " + e.what();
    }
    return std::string("accepted");
  };
  auto with_url = [&](const std::string& url) {
    CoordinatorOptions o;
    o.url = url;
    return field_of(o);
  };
  EXPECT_EQ(with_url("https://coord:8470"), "accepted");  // TLS, through libcurl
  EXPECT_EQ(with_url("https://coord/prefix"), "accepted");
  EXPECT_CONTAINS(with_url("ftp://coord"), "CoordinatorOptions::url");
  EXPECT_CONTAINS(with_url("ftp://coord"), "must start with http:// or https://");
  EXPECT_CONTAINS(with_url("http://"), "has no host");
  EXPECT_CONTAINS(with_url("http://coord:0"), "bad port '0'");
  EXPECT_CONTAINS(with_url("http://coord:99999"), "bad port");
  EXPECT_CONTAINS(with_url("http://coord:84x0"), "bad port");
  EXPECT_CONTAINS(with_url("http://user:pw@coord"), "user information");
  EXPECT_CONTAINS(with_url("http://coord/x?y=1"), "query");
  EXPECT_CONTAINS(with_url("http://co ord"), "spaces");
  EXPECT_EQ(with_url("http://coord:8470"), "accepted");
  EXPECT_EQ(with_url("http://[::1]:8470/prefix/"), "accepted");
  EXPECT_EQ(with_url("HTTP://10.0.0.1"), "accepted");

  CoordinatorOptions o;
  o.url = "http://coord:8470";
  o.retry.max_attempts = 0;
  EXPECT_CONTAINS(field_of(o), "RetryPolicy::max_attempts |");
  o.retry.max_attempts = 3;
  o.retry.jitter = 1.5;
  EXPECT_CONTAINS(field_of(o), "RetryPolicy::jitter |");
  o.retry.jitter = 0.1;
  o.retry.max_backoff_s = 0.01;
  EXPECT_CONTAINS(field_of(o), "RetryPolicy::max_backoff_s |");
  o.retry.max_backoff_s = 5;
  o.request_timeout_s = 0;
  EXPECT_CONTAINS(field_of(o), "CoordinatorOptions::request_timeout_s |");
  o.request_timeout_s = 1;
  o.token = "abc\r\nX-Evil: 1";
  const std::string token = field_of(o);
  EXPECT_CONTAINS(token, "CoordinatorOptions::token |");
  EXPECT_EQ(token.find("Evil"), std::string::npos) << "the token leaked into: " << token;
}

// ---- Routes and JSON shapes ---------------------------------------------------

TEST(CoordinatorClientTest, RegisterJobSendsTheFieldsAndTheToken) {
  FakeServer server(Script({Reply(200, R"({"job_id": "job-7"})")}));
  Recorded recorded;
  CoordinatorOptions o = TestOptions(server.url(), recorded);
  o.token = "s3cret";
  CoordinatorClient client(o);
  protocol::JobConfig job;
  job.pp_degree = 4;
  job.dp_degree = 2;
  job.tp_degree = 8;
  job.world_size = 64;
  job.spec = {schedule::Kind::kInterleaved, 4, 16, 2};
  job.p_block_w = 80.5;
  job.slowdown = 0.05;
  job.gpu = "A100-SXM4-80GB";
  EXPECT_EQ(client.RegisterJob(job), "job-7");

  const std::vector<Received> requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const Received& r = requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/jobs");
  EXPECT_EQ(r.Header("authorization"), "Bearer s3cret");
  EXPECT_EQ(r.Header("content-type"), "application/json");
  EXPECT_EQ(r.Header("connection"), "");  // kept open for the next request
  EXPECT_EQ(r.Header("expect"), "");      // no 100-continue round trip
  EXPECT_CONTAINS(r.Header("host"), "127.0.0.1:");
  const json body = json::parse(r.body);
  EXPECT_EQ(body, json::parse(R"({"pp_degree": 4, "dp_degree": 2, "tp_degree": 8,
      "world_size": 64, "schedule": "interleaved", "microbatches": 16, "chunks": 2,
      "p_block_w": 80.5, "slowdown": 0.05, "gpu": "A100-SXM4-80GB"})"));  // no job_id: the server
                                                                          // assigns
  EXPECT_TRUE(recorded.sleeps->empty());
}

TEST(CoordinatorClientTest, RegisterJobRefusesANegativeSlowdownBeforeSending) {
  FakeServer server(Script({Reply(200, R"({"job_id": "job-7"})")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  protocol::JobConfig job;
  job.slowdown = -0.1;
  try {
    client.RegisterJob(job);
    ADD_FAILURE() << "no error";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "JobConfig::slowdown");
  }
  EXPECT_TRUE(server.requests().empty());
}

TEST(CoordinatorClientTest, RegisterJobWithAnIdChecksTheAnswer) {
  FakeServer server(Script({Reply(200, R"({"job_id": "other"})")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  protocol::JobConfig job;
  job.job_id = "mine";
  const CoordinatorError e = CatchCoordinatorError([&] { client.RegisterJob(job); });
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kBadResponse);
  EXPECT_CONTAINS(e.what(), "job_id is 'other' but the request registered 'mine'");
  EXPECT_EQ(json::parse(server.requests()[0].body)["job_id"], "mine");
}

TEST(CoordinatorClientTest, RegisterRankUploadProfileAndReportIteration) {
  FakeServer server([](const Received& r) {
    if (r.target.find("/ranks") != std::string::npos) return Reply(200, "{}");
    if (r.target.find("/profile") != std::string::npos) return Reply(200, R"({"rows": 42})");
    return Reply(200, R"({"plan_version": 5})");
  });
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url() + "/coord/", recorded));
  protocol::RankInfo rank;
  rank.rank = 3;
  rank.dp_rank = 1;
  rank.pp_rank = 2;
  rank.tp_rank = 0;
  rank.available_mhz = {1410, 1200, 1000};
  client.RegisterRank("job 1/x", rank);
  EXPECT_EQ(client.UploadProfile("job 1/x", "stage,instruction,frequency,time,energy\n"), 42);
  protocol::IterationReport report;
  report.rank = 3;
  report.iteration = 17;
  report.time_s = 1.25;
  EXPECT_EQ(client.ReportIteration("job 1/x", report), 5);
  report.energy_j = 300.5;
  EXPECT_EQ(client.ReportIteration("job 1/x", report), 5);

  const std::vector<Received> r = server.requests();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].method, "POST");
  EXPECT_EQ(r[0].target, "/coord/jobs/job%201%2Fx/ranks");  // prefix; id percent-encoded
  EXPECT_EQ(json::parse(r[0].body), json::parse(R"({"rank": 3, "dp_rank": 1, "pp_rank": 2,
      "tp_rank": 0, "available_frequencies": [1410, 1200, 1000]})"));
  EXPECT_EQ(r[1].method, "PUT");
  EXPECT_EQ(r[1].target, "/coord/jobs/job%201%2Fx/profile");
  EXPECT_EQ(r[1].Header("content-type"), "text/csv");
  EXPECT_EQ(r[1].body, "stage,instruction,frequency,time,energy\n");
  EXPECT_EQ(r[2].target, "/coord/jobs/job%201%2Fx/iterations");
  EXPECT_EQ(json::parse(r[2].body),
            json::parse(R"({"rank": 3, "iteration": 17, "time_s": 1.25, "energy_j": null})"));
  EXPECT_EQ(json::parse(r[3].body)["energy_j"], 300.5);
  EXPECT_EQ(r[2].Header("authorization"), "");  // no token configured
}

TEST(CoordinatorClientTest, ReportIterationRefusesNaNBeforeSending) {
  FakeServer server(Script({Reply(200, R"({"plan_version": 1})")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  protocol::IterationReport report;
  report.time_s = 1;
  report.energy_j = std::nan("");
  try {
    client.ReportIteration("j", report);
    ADD_FAILURE() << "NaN energy accepted";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "IterationReport::energy_j");
  }
  EXPECT_TRUE(server.requests().empty());
}

TEST(CoordinatorClientTest, WaitForPlanParsesThePlanAndTheLongPollQuery) {
  FakeServer server(
      Script({Reply(200, PlanJson(2, 1100, 900, "recovered").dump()), Reply(204, "")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  const std::optional<protocol::RankPlan> plan = client.WaitForPlan("j1", 3, 1, 0.5);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->rank, 3);
  EXPECT_EQ(plan->pipeline, 1);
  EXPECT_EQ(plan->stage, 2);
  EXPECT_EQ(plan->version, 2);
  EXPECT_EQ(plan->reason, "recovered");
  ASSERT_TRUE(plan->predicted);
  EXPECT_EQ(plan->predicted->time_s, 1.5);
  EXPECT_EQ(plan->predicted->energy_j, 2500.25);
  const auto expected = SimplePlan(2, 1100, 900);
  ASSERT_EQ(plan->instructions.size(), expected.size());
  ASSERT_EQ(plan->frequencies.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    model::Instruction want = expected[i].instruction;
    want.stage = 2;
    EXPECT_EQ(plan->instructions[i].instruction, want) << i;
    EXPECT_EQ(plan->instructions[i].mhz, expected[i].mhz) << i;
    EXPECT_EQ(plan->frequencies[i].first, want.kind) << i;
    EXPECT_EQ(plan->frequencies[i].second, expected[i].mhz) << i;
  }
  EXPECT_FALSE(client.WaitForPlan("j1", 3, 2, 0));  // 204: nothing newer

  const std::vector<Received> r = server.requests();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].method, "GET");
  EXPECT_EQ(r[0].target, "/jobs/j1/plan?rank=3&after=1&wait_s=0.5");
  EXPECT_EQ(r[1].target, "/jobs/j1/plan?rank=3&after=2&wait_s=0");
  EXPECT_THROW(client.WaitForPlan("j1", 3, 0, 301), model::InputError);
}

// A server holding as many waits as it may (ServerOptions::max_waiting)
// says when to come back: the client waits without a connection and asks
// again for what is left of its wait_s; a 204 without Retry-After ends it.
TEST(CoordinatorClientTest, WaitForPlanComesBackWhenTheServerSaysSo) {
  FakeServer server(Script({Reply(204, "", "Retry-After: 2\r\nConnection: close\r\n"),
                            Reply(200, PlanJson(1, 1100, 900, "initial plan").dump()),
                            Reply(204, "", "Retry-After: 30\r\n"), Reply(204, "")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  const std::optional<protocol::RankPlan> plan = client.WaitForPlan("j1", 3, 0, 10);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->version, 1);
  ExpectDelays(*recorded.sleeps, {2.0});
  // The come-back is cut to what is left of the wait (0.5 s here).
  recorded.sleeps->clear();
  EXPECT_FALSE(client.WaitForPlan("j1", 3, 1, 0.5));
  ASSERT_EQ(recorded.sleeps->size(), 1u);
  EXPECT_LE((*recorded.sleeps)[0], 0.5);
  EXPECT_GT((*recorded.sleeps)[0], 0.3);

  const std::vector<Received> r = server.requests();
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].target, "/jobs/j1/plan?rank=3&after=0&wait_s=10");
  // Asked again for the rest of the 10 s (the recorded sleep took no time).
  EXPECT_EQ(r[1].target.rfind("/jobs/j1/plan?rank=3&after=0&wait_s=9.9", 0), 0u) << r[1].target;
  EXPECT_EQ(r[3].target.rfind("/jobs/j1/plan?rank=3&after=1&wait_s=0.4", 0), 0u) << r[3].target;
}

TEST(CoordinatorClientTest, APlanThatContradictsItselfIsABadResponse) {
  json wrong_frequency = PlanJson(1, 1100, 900, "initial plan");
  wrong_frequency["frequencies"][1][1] = 1000;
  json wrong_rank = PlanJson(1, 1100, 900, "initial plan");
  wrong_rank["rank"] = 4;
  json bad_kind = PlanJson(1, 1100, 900, "initial plan");
  bad_kind["instructions"][3]["instruction"] = "sideways";
  json stale = PlanJson(1, 1100, 900, "initial plan");
  FakeServer server(Script({Reply(200, wrong_frequency.dump()), Reply(200, wrong_rank.dump()),
                            Reply(200, bad_kind.dump()), Reply(200, stale.dump())}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  auto message = [&](int after) {
    const CoordinatorError e = CatchCoordinatorError([&] { client.WaitForPlan("j", 3, after, 0); });
    EXPECT_EQ(e.kind(), CoordinatorError::Kind::kBadResponse);
    return std::string(e.what());
  };
  EXPECT_CONTAINS(message(0),
                  "frequencies[1] is (forward, 1000) but instructions[1] is (forward, 1100)");
  EXPECT_CONTAINS(message(0), "rank is 4 but the request asked for rank 3");
  EXPECT_CONTAINS(message(0), "instructions[3].instruction must be \"forward\" or \"backward\"");
  EXPECT_CONTAINS(message(1), "version is 1 but the request asked for a plan newer than version 1");
  EXPECT_CONTAINS(message(1), "GET /jobs/j/plan?rank=3&after=1");
  EXPECT_EQ(server.requests().size(), 5u);  // none retried
  EXPECT_TRUE(recorded.sleeps->empty());
}

// ---- Retries -----------------------------------------------------------------

TEST(CoordinatorClientTest, RetriesServerErrorsWithBackoffAndJitter) {
  FakeServer server(Script({ErrorReply(500, "database locked", ""), Reply(502, "<html>"),
                            ErrorReply(503, "starting", ""), Reply(200, R"({"rows": 3})")}));
  Recorded recorded;
  CoordinatorOptions o = TestOptions(server.url(), recorded);
  o.retry.max_attempts = 4;
  o.retry.initial_backoff_s = 1;
  o.retry.max_backoff_s = 3;
  o.retry.multiplier = 2;
  o.retry.jitter = 0.5;
  // u = 0, 0.5, 0.999...: no shortening, a quarter, almost a half.
  auto draws = std::make_shared<std::vector<double>>(std::vector<double>{0, 0.5, 0.999});
  o.random = [draws, i = std::size_t{0}]() mutable { return (*draws)[i++]; };
  CoordinatorClient client(o);
  EXPECT_EQ(client.UploadProfile("j", "csv"), 3);
  EXPECT_EQ(server.requests().size(), 4u);
  ASSERT_EQ(recorded.sleeps->size(), 3u);
  EXPECT_DOUBLE_EQ((*recorded.sleeps)[0], 1.0);                 // d1 = 1
  EXPECT_DOUBLE_EQ((*recorded.sleeps)[1], 2.0 * 0.75);          // d2 = 2, jitter 0.5 x 0.5
  EXPECT_DOUBLE_EQ((*recorded.sleeps)[2], 3.0 * (1 - 0.4995));  // d3 = min(4, 3)
}

TEST(CoordinatorClientTest, GivesUpAfterMaxAttemptsOfServerErrors) {
  FakeServer server(Script({ErrorReply(503, "overloaded", "")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  const CoordinatorError e = CatchCoordinatorError([&] { client.UploadProfile("j", "csv"); });
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kUnreachable);
  EXPECT_EQ(e.attempts(), 3);
  EXPECT_EQ(e.status(), 503);
  EXPECT_CONTAINS(e.what(), "PUT /jobs/j/profile failed after 3 attempts");
  EXPECT_CONTAINS(e.last_error(), "503 Service Unavailable: overloaded");
  EXPECT_EQ(server.requests().size(), 3u);
  ExpectDelays(*recorded.sleeps, {0.075, 0.15});
}

TEST(CoordinatorClientTest, HonoursRetryAfterSecondsAndDatesUpToTheCap) {
  Recorded recorded;
  FakeServer seconds(Script({Reply(429, R"({"error": "slow down"})", "Retry-After: 3\r\n"),
                             Reply(200, R"({"rows": 1})")}));
  EXPECT_EQ(CoordinatorClient(TestOptions(seconds.url(), recorded)).UploadProfile("j", "csv"), 1);
  ExpectDelays(*recorded.sleeps, {3.0});

  recorded.sleeps->clear();
  FakeServer date(Script(
      {Reply(503, R"({"error": "maintenance"})", "Retry-After: Fri, 31 Dec 2100 23:59:59 GMT\r\n"),
       Reply(200, R"({"rows": 1})")}));
  CoordinatorOptions o = TestOptions(date.url(), recorded);
  o.retry.max_retry_after_s = 7;
  EXPECT_EQ(CoordinatorClient(o).UploadProfile("j", "csv"), 1);
  ExpectDelays(*recorded.sleeps, {7.0});

  // 429 without Retry-After: the ordinary backoff.
  recorded.sleeps->clear();
  FakeServer plain(Script({ErrorReply(429, "slow down", ""), Reply(200, R"({"rows": 1})")}));
  EXPECT_EQ(CoordinatorClient(TestOptions(plain.url(), recorded)).UploadProfile("j", "csv"), 1);
  ExpectDelays(*recorded.sleeps, {0.075});
}

TEST(CoordinatorClientTest, ClientErrorsAreNotRetriedAndQuoteTheServer) {
  FakeServer server(
      Script({ErrorReply(409, "job 'j' exists with pp_degree 4; this registration says 8",
                         "JobRegistration::pp_degree")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  protocol::JobConfig job;
  job.job_id = "j";
  job.pp_degree = 8;
  const CoordinatorError e = CatchCoordinatorError([&] { client.RegisterJob(job); });
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kRejected);
  EXPECT_EQ(e.status(), 409);
  EXPECT_EQ(e.field(), "JobRegistration::pp_degree");
  EXPECT_EQ(std::string(e.what()),
            "coordinator at " + server.url() +
                " rejected POST /jobs: 409 Conflict: job 'j' exists with pp_degree 4; this "
                "registration says 8");
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_TRUE(recorded.sleeps->empty());
}

TEST(CoordinatorClientTest, ANonJsonErrorBodyIsQuoted) {
  FakeServer server(Script({"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nno route!",
                            Reply(301, "", "Location: http://elsewhere/\r\n")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  CoordinatorError e = CatchCoordinatorError([&] { client.WaitForPlan("a b", 0, 0, 1); });
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kRejected);
  EXPECT_CONTAINS(e.what(),
                  "rejected GET /jobs/a%20b/plan?rank=0&after=0&wait_s=1: 404 Not Found: "
                  "(answer body: no route!)");
  e = CatchCoordinatorError([&] { client.WaitForPlan("a", 0, 0, 1); });
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kRejected);
  EXPECT_CONTAINS(e.what(), "redirects are not followed");
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(CoordinatorClientTest, ConnectionRefusedIsUnreachableAfterMaxAttempts) {
  Recorded recorded;
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  CoordinatorClient client(TestOptions(url, recorded));
  const CoordinatorError e = CatchCoordinatorError([&] { client.RegisterJob({}); });
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kUnreachable);
  EXPECT_EQ(e.attempts(), 3);
  EXPECT_CONTAINS(e.what(), "coordinator unreachable at " + url);
  EXPECT_CONTAINS(e.last_error(), "cannot connect to 127.0.0.1:");
  EXPECT_CONTAINS(e.last_error(), "refused");
  ExpectDelays(*recorded.sleeps, {0.075, 0.15});
}

TEST(CoordinatorClientTest, AServerThatNeverAnswersTimesOut) {
  FakeServer server(Script({kHang}));
  Recorded recorded;
  CoordinatorOptions o = TestOptions(server.url(), recorded);
  o.request_timeout_s = 0.2;
  o.retry.max_attempts = 2;
  CoordinatorClient client(o);
  const auto start = SteadyClock::now();
  const CoordinatorError e = CatchCoordinatorError([&] { client.UploadProfile("j", "csv"); });
  const double elapsed = SecondsSince(start);
  EXPECT_EQ(e.kind(), CoordinatorError::Kind::kUnreachable);
  EXPECT_CONTAINS(e.last_error(), "no answer from 127.0.0.1:");
  EXPECT_CONTAINS(e.last_error(), "within 0.2 s");
  EXPECT_GE(elapsed, 0.35);
  EXPECT_LT(elapsed, 1.5);
  EXPECT_TRUE(server.WaitRequests(2));
}

TEST(CoordinatorClientTest, ALongPollGetsItsWaitOnTopOfTheRequestTimeout) {
  // The server answers after 0.3 s; the request timeout alone (0.2 s) would
  // cut it, the long poll's wait_s extends it.
  FakeServer server([](const Received&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return Reply(204, "");
  });
  Recorded recorded;
  CoordinatorOptions o = TestOptions(server.url(), recorded);
  o.request_timeout_s = 0.2;
  o.retry.max_attempts = 1;
  CoordinatorClient client(o);
  EXPECT_FALSE(client.WaitForPlan("j", 0, 0, 0.5));
}

TEST(CoordinatorClientTest, AConnectionClosedEarlyIsRetried) {
  FakeServer server(Script({kClose, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ro",
                            Reply(200, R"({"rows": 9})")}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  EXPECT_EQ(client.UploadProfile("j", "csv"), 9);
  EXPECT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(recorded.sleeps->size(), 2u);
}

TEST(CoordinatorClientTest, ChunkedAnswersAreDecoded) {
  FakeServer server(
      Script({"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              "7\r\n{\"rows\"\r\n5;ext=1\r\n: 12}\r\n0\r\nX-Trailer: 1\r\n\r\n"}));
  Recorded recorded;
  CoordinatorClient client(TestOptions(server.url(), recorded));
  EXPECT_EQ(client.UploadProfile("j", "csv"), 12);
}

TEST(CoordinatorClientTest, OversizedOrMalformedAnswersAreRefusedNotRetried) {
  const std::string big_header = "X-Big: " + std::string(70 * 1024, 'a') + "\r\n";
  const std::string chunk(800, ' ');
  FakeServer server(Script({
      "HTTP/1.1 200 OK\r\nContent-Length: 70000000\r\n\r\n{",
      Reply(200, R"({"rows": 1})", big_header),
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n320\r\n" + chunk + "\r\n320\r\n" +
          chunk + "\r\n0\r\n\r\n",
      "SSH-2.0-OpenSSH_9.6\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nnope!",
  }));
  Recorded recorded;
  CoordinatorOptions o = TestOptions(server.url(), recorded);
  o.max_response_bytes = 1024;
  CoordinatorClient client(o);
  auto message = [&] {
    const CoordinatorError e = CatchCoordinatorError([&] { client.UploadProfile("j", "csv"); });
    EXPECT_EQ(e.kind(), CoordinatorError::Kind::kBadResponse);
    return std::string(e.what());
  };
  EXPECT_CONTAINS(message(), "announced a response body of 70000000 bytes, over the limit of 1024");
  EXPECT_CONTAINS(message(), "the response's status line and headers from 127.0.0.1:");
  EXPECT_CONTAINS(message(), "the response body from 127.0.0.1:");
  EXPECT_CONTAINS(message(), "did not answer with HTTP/1.x: bad status line 'SSH-2.0-OpenSSH_9.6'");
  EXPECT_CONTAINS(message(),
                  "answered PUT /jobs/j/profile with a bad body: the answer: not valid JSON");
  EXPECT_EQ(server.requests().size(), 5u);
  EXPECT_TRUE(recorded.sleeps->empty());
}

// https through libcurl against `openssl s_server` with a self-signed
// certificate: with it as the CA file the handshake and verification pass
// (s_server -www answers with HTML, which is then a bad body); without it
// the certificate is refused, and that is not retried.
TEST(CoordinatorClientTest, HttpsVerifiesTheServersCertificate) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl";
  const std::string dir = ::testing::TempDir() + "joulepipe-tls-" + std::to_string(::getpid());
  const std::string make =
      "mkdir -p " + dir + " && openssl req -x509 -newkey rsa:2048 -nodes -keyout " + dir +
      "/k.pem -out " + dir + "/c.pem -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 " +
      "-days 1 >/dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  // A free port: bind, read it, close (s_server binds it right after).
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  ::close(probe);
  const std::string serve =
      "timeout 20 openssl s_server -accept 127.0.0.1:" + std::to_string(port) + " -cert " + dir +
      "/c.pem -key " + dir + "/k.pem -www -quiet >/dev/null 2>&1 & echo $! > " + dir + "/pid";
  ASSERT_EQ(std::system(serve.c_str()), 0);
  // Until it listens (up to 10 s on a loaded machine).
  for (int k = 0; k < 200; ++k) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Recorded recorded;
  CoordinatorOptions o = TestOptions("https://127.0.0.1:" + std::to_string(port), recorded);
  o.retry.max_attempts = 3;
  o.ca_file = dir + "/c.pem";
  {
    CoordinatorClient client(o);
    const CoordinatorError e = CatchCoordinatorError([&] { client.WaitForPlan("j", 0, 0, 0); });
    EXPECT_EQ(e.kind(), CoordinatorError::Kind::kBadResponse) << e.what();
    EXPECT_CONTAINS(e.what(), "bad body");  // TLS worked: s_server's HTML page
  }
  o.ca_file = "";
  {
    CoordinatorClient client(o);
    const CoordinatorError e = CatchCoordinatorError([&] { client.WaitForPlan("j", 0, 0, 0); });
    EXPECT_EQ(e.kind(), CoordinatorError::Kind::kBadResponse) << e.what();
    EXPECT_CONTAINS(e.what(), "certificate");
    EXPECT_TRUE(recorded.sleeps->empty());  // not retried
  }
  EXPECT_EQ(std::system(("kill $(cat " + dir + "/pid) 2>/dev/null; rm -rf " + dir).c_str()), 0);
}

TEST(CoordinatorClientTest, TheDefaultResponseBoundIs64MiB) {
  FakeServer server(Script({"HTTP/1.1 200 OK\r\nContent-Length: 67108865\r\n\r\n"}));
  CoordinatorOptions o;
  o.url = server.url();
  o.retry.max_attempts = 1;
  CoordinatorClient client(o);
  const CoordinatorError e = CatchCoordinatorError([&] { client.UploadProfile("j", "csv"); });
  EXPECT_CONTAINS(e.what(), "over the limit of 67108864 bytes");
}

// ---- CoordinatedPlan -----------------------------------------------------------

// A thread-safe log.
struct Log {
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(line);
  }
  std::vector<std::string> Lines() const {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
  mutable std::mutex mutex;
  std::vector<std::string> lines;
};

struct AgentFixture {
  AgentFixture() {
    AgentOptions options;
    options.nvml_index = 0;
    options.control = control;
    options.log = [this](const std::string& line) { agent_log.Add(line); };
    agent = std::make_unique<Agent>(std::move(options));
  }
  CoordinatedPlanOptions Options(const std::string& url) {
    CoordinatedPlanOptions o;
    o.coordinator = TestOptions(url, recorded);
    o.job_id = "j1";
    o.rank = 3;
    o.start_wait_s = 0;
    o.start_timeout_s = 2;
    o.fetch_wait_s = 0;
    o.log = [this](const std::string& line) { log.Add(line); };
    return o;
  }
  // One training iteration through the coordinated plan's hooks (they drive
  // the agent).
  void Step(CoordinatedPlan& coordinated) {
    RunStep(coordinated, SimplePlan(2, 0, 0));  // identities only: every plan here has them
  }
  std::shared_ptr<FakeControl> control = std::make_shared<FakeControl>();
  std::unique_ptr<Agent> agent;
  Recorded recorded;
  Log agent_log;
  Log log;
};

// Waits (up to 2 s) for `done`, running training iterations meanwhile.
template <typename F>
bool TrainUntil(AgentFixture& f, CoordinatedPlan& coordinated, F done) {
  const auto start = SteadyClock::now();
  while (!done()) {
    if (SecondsSince(start) > 2) return false;
    f.Step(coordinated);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

TEST(CoordinatedPlanTest, UnreachableKeepsDefaultClocksAndLogsOnce) {
  AgentFixture f;
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  CoordinatedPlan coordinated(*f.agent, f.Options(url));
  EXPECT_FALSE(coordinated.Start());
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_EQ(f.log.Lines().size(), 1u);
  EXPECT_EQ(f.log.Lines()[0].find("coordinator unreachable at " + url +
                                  " after 3 attempts (last error: cannot connect to 127.0.0.1:"),
            0u)
      << f.log.Lines()[0];
  EXPECT_CONTAINS(f.log.Lines()[0], "); this rank keeps default clocks, training goes on");

  // Training goes on; the reports fail in the background, quietly.
  double slowest = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = SteadyClock::now();
    f.Step(coordinated);
    slowest = std::max(slowest, SecondsSince(start));
  }
  EXPECT_TRUE(TrainUntil(f, coordinated, [&] { return coordinated.stats().reports_failed >= 2; }));
  EXPECT_LT(slowest, 0.1);
  EXPECT_EQ(f.log.Lines().size(), 1u);
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  ASSERT_TRUE(f.agent->WaitIdle());
  EXPECT_TRUE(f.control->calls().empty());  // never touched the clocks
  const CoordinationStats s = coordinated.stats();
  EXPECT_EQ(s.running_version, 0);
  EXPECT_FALSE(s.connected);
}

TEST(CoordinatedPlanTest, BadOptionsTurnCoordinationOffWithoutThrowing) {
  AgentFixture f;
  CoordinatedPlanOptions o = f.Options("ftp://coord:8470");
  CoordinatedPlan bad_url(*f.agent, o);
  EXPECT_FALSE(bad_url.Start());
  o = f.Options("http://coord:8470");
  o.job_id = "";
  CoordinatedPlan no_job(*f.agent, o);
  EXPECT_FALSE(no_job.Start());
  f.Step(no_job);  // hooks are no-ops
  const std::vector<std::string> lines = f.log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_CONTAINS(lines[0],
                  "coordination off: CoordinatorOptions::url 'ftp://coord:8470' must start with");
  EXPECT_CONTAINS(lines[1], "coordination off: CoordinatedPlanOptions::job_id must name the job");
  EXPECT_CONTAINS(lines[1], "this rank keeps default clocks, training goes on");
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
}

TEST(CoordinatedPlanTest, StartRegistersAndRunsThePlan) {
  FakeServer server([](const Received& r) {
    if (r.target.find("/ranks") != std::string::npos) return Reply(200, "{}");
    if (r.target.find("/plan") != std::string::npos) {
      return Reply(200, PlanJson(1, 1000, 1200, "initial plan").dump());
    }
    return Reply(200, R"({"plan_version": 1})");
  });
  AgentFixture f;
  CoordinatedPlanOptions o = f.Options(server.url());
  o.start_wait_s = 30;
  o.start_timeout_s = 40;
  protocol::RankInfo registration;
  registration.rank = 3;
  registration.dp_rank = 1;
  registration.pp_rank = 2;
  registration.tp_rank = 0;
  registration.available_mhz = {1410, 1200, 1000};
  o.registration = registration;
  auto meter = std::make_shared<FakeMeter>();
  o.meter = meter;
  CoordinatedPlan coordinated(*f.agent, o);
  EXPECT_TRUE(coordinated.Start());
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  ASSERT_FALSE(f.log.Lines().empty());
  EXPECT_CONTAINS(f.log.Lines()[0],
                  "running plan version 1 for rank 3 (pipeline 1, stage 2) "
                  "from the coordinator at " +
                      server.url() + ": initial plan");
  std::vector<Received> r = server.requests();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].target, "/jobs/j1/ranks");
  EXPECT_EQ(r[1].target, "/jobs/j1/plan?rank=3&after=0&wait_s=30");

  // One iteration, 2.5 J on the meter: reported with the energy.
  coordinated.OnStepBegin();
  for (const model::PlannedInstruction& p : SimplePlan(2, 0, 0)) {
    coordinated.OnInstructionBegin(p.instruction.kind, p.instruction.microbatch,
                                   p.instruction.chunk);
    coordinated.OnInstructionEnd(p.instruction.kind, p.instruction.microbatch, p.instruction.chunk);
  }
  meter->energy_mj += 2500;
  coordinated.OnStepEnd();
  ASSERT_TRUE(server.WaitRequests(3));
  r = server.requests();
  const json report = json::parse(r[2].body);
  EXPECT_EQ(r[2].target, "/jobs/j1/iterations");
  EXPECT_EQ(report["rank"], 3);
  EXPECT_EQ(report["iteration"], 0);
  EXPECT_DOUBLE_EQ(report["energy_j"].get<double>(), 2.5);
  EXPECT_GE(report["time_s"].get<double>(), 0.0);
  ASSERT_TRUE(f.agent->WaitIdle());
  for (const std::string& call : f.control->calls()) {
    EXPECT_TRUE(call == "lock 0 1000 1000" || call == "lock 0 1200 1200") << call;
  }
  EXPECT_FALSE(f.agent->fallback_reason());
}

TEST(CoordinatedPlanTest, NoPlanAtStartThenSwitchesAtIterationBoundariesAsVersionsRise) {
  auto announced = std::make_shared<std::atomic<int>>(0);
  FakeServer server([announced](const Received& r) {
    if (r.target.find("/iterations") != std::string::npos) {
      return Reply(200, json({{"plan_version", announced->load()}}).dump());
    }
    if (r.target.find("after=0") != std::string::npos && announced->load() == 0) {
      return Reply(204, "");
    }
    if (r.target.find("after=0") != std::string::npos) {
      return Reply(200, PlanJson(1, 1000, 1200, "initial plan").dump());
    }
    if (r.target.find("after=1") != std::string::npos) {
      return Reply(200, PlanJson(2, 800, 600, "straggler pipeline 0 at 1.20x").dump());
    }
    return ErrorReply(400, "unexpected " + r.target, "");
  });
  AgentFixture f;
  CoordinatedPlan coordinated(*f.agent, f.Options(server.url()));
  EXPECT_FALSE(coordinated.Start());
  ASSERT_EQ(f.log.Lines().size(), 1u);
  EXPECT_CONTAINS(f.log.Lines()[0],
                  "has no plan for rank 3 of job 'j1' after 0 s; this rank "
                  "keeps default clocks until one comes, training goes on");
  EXPECT_EQ(f.agent->mode(), Mode::kOff);

  // Iterations run at default clocks until the coordinator announces v1.
  EXPECT_TRUE(TrainUntil(f, coordinated, [&] { return coordinated.stats().reports_sent >= 2; }));
  EXPECT_EQ(f.agent->mode(), Mode::kOff);
  announced->store(1);
  EXPECT_TRUE(TrainUntil(f, coordinated, [&] { return coordinated.stats().running_version == 1; }));
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);
  // Back-to-back hooks coalesce (and each step end gives the default clocks
  // back), so the clock is read inside the step's last instruction.
  const auto last_clock = [&] {
    const auto plan = SimplePlan(2, 0, 0);
    int mhz = -1;
    coordinated.OnStepBegin();
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const model::Instruction& p = plan[i].instruction;
      coordinated.OnInstructionBegin(p.kind, p.microbatch, p.chunk);
      if (i + 1 == plan.size()) {
        EXPECT_TRUE(f.agent->WaitIdle());
        mhz = f.agent->stats().last_applied_mhz;
      }
      coordinated.OnInstructionEnd(p.kind, p.microbatch, p.chunk);
    }
    coordinated.OnStepEnd();
    return mhz;
  };
  EXPECT_EQ(last_clock(), 1200);
  EXPECT_EQ(f.control->Count("lock 0 800 800") + f.control->Count("lock 0 600 600"), 0);

  // v2: the straggler plan lands at a boundary; the agent never sees a step
  // cut in two (no fallback) and runs the new clocks from the next step.
  announced->store(2);
  EXPECT_TRUE(TrainUntil(f, coordinated, [&] { return coordinated.stats().running_version == 2; }));
  EXPECT_EQ(last_clock(), 600);
  EXPECT_FALSE(f.agent->fallback_reason()) << *f.agent->fallback_reason();
  EXPECT_EQ(f.agent->mode(), Mode::kExecute);

  const CoordinationStats s = coordinated.stats();
  EXPECT_EQ(s.plans_fetched, 2u);
  EXPECT_EQ(s.plans_applied, 2u);
  EXPECT_EQ(s.announced_version, 2);
  EXPECT_TRUE(s.connected);
  const std::vector<std::string> lines = f.log.Lines();
  bool saw_switch = false;
  for (const std::string& line : lines) {
    saw_switch |= line.find("switching to plan version 2 for rank 3") != std::string::npos &&
                  line.find("straggler pipeline 0 at 1.20x") != std::string::npos;
  }
  EXPECT_TRUE(saw_switch);
  // The iterations arrive numbered from 0, in order.
  std::int64_t expected = 0;
  for (const Received& r : server.requests()) {
    if (r.target != "/jobs/j1/iterations") continue;
    EXPECT_EQ(json::parse(r.body)["iteration"], expected);
    ++expected;
  }
  EXPECT_GE(expected, 3);
}

TEST(CoordinatedPlanTest, AFullQueueDropsTheOldestReportsAndNeverBlocksTraining) {
  // The server holds every report until the gate opens (at the latest when
  // the test ends, before the server joins its thread).
  struct Gate {
    ~Gate() { Open(); }
    void Open() {
      {
        std::lock_guard<std::mutex> lock(mutex);
        open = true;
      }
      cv.notify_all();
    }
    void Wait() {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait(lock, [&] { return open; });
    }
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
  };
  auto gate = std::make_shared<Gate>();
  FakeServer server([gate](const Received& r) {
    if (r.target.find("/plan") != std::string::npos) return Reply(204, "");
    gate->Wait();
    return Reply(200, R"({"plan_version": 0})");
  });
  struct OpenAtEnd {
    ~OpenAtEnd() { gate->Open(); }
    std::shared_ptr<Gate> gate;
  } open_at_end{gate};
  AgentFixture f;
  CoordinatedPlanOptions o = f.Options(server.url());
  o.queue_capacity = 2;
  CoordinatedPlan coordinated(*f.agent, o);
  EXPECT_FALSE(coordinated.Start());
  coordinated.OnStepEnd(0.5, std::nullopt);  // iteration 0: taken, held by the server
  ASSERT_TRUE(server.WaitRequests(2));
  double slowest = 0;
  for (int i = 1; i <= 4; ++i) {  // 1 and 2 are pushed out by 3 and 4
    const auto start = SteadyClock::now();
    coordinated.OnStepEnd(0.5 + i, 10.0 * i);
    slowest = std::max(slowest, SecondsSince(start));
  }
  EXPECT_LT(slowest, 0.05);
  EXPECT_EQ(coordinated.stats().reports_dropped, 2u);
  gate->Open();
  ASSERT_TRUE(server.WaitRequests(4));
  std::vector<std::int64_t> iterations;
  for (const Received& r : server.requests()) {
    if (r.target == "/jobs/j1/iterations") iterations.push_back(json::parse(r.body)["iteration"]);
  }
  EXPECT_EQ(iterations, std::vector<std::int64_t>({0, 3, 4}));
  EXPECT_EQ(json::parse(server.requests()[3].body)["energy_j"], 40.0);
  const CoordinationStats s = coordinated.stats();
  EXPECT_EQ(s.reports_queued, 5u);
}

TEST(CoordinatedPlanTest, DestructionAbandonsARequestInFlightPromptly) {
  FakeServer server([](const Received& r) {
    if (r.target.find("/plan") != std::string::npos) return Reply(204, "");
    return kHang;
  });
  AgentFixture f;
  CoordinatedPlanOptions o = f.Options(server.url());
  o.coordinator.request_timeout_s = 30;
  o.coordinator.sleep = nullptr;  // the real, interruptible sleep
  auto coordinated = std::make_unique<CoordinatedPlan>(*f.agent, o);
  coordinated->Start();
  coordinated->OnStepEnd(1.0, std::nullopt);
  ASSERT_TRUE(server.WaitRequests(2));
  const auto start = SteadyClock::now();
  coordinated.reset();
  EXPECT_LT(SecondsSince(start), 0.5);
}

TEST(CoordinatedPlanTest, StartGivesUpAtItsTimeout) {
  FakeServer server(Script({kHang}));
  AgentFixture f;
  CoordinatedPlanOptions o = f.Options(server.url());
  o.coordinator.request_timeout_s = 30;
  o.start_wait_s = 0;
  o.start_timeout_s = 0.3;
  CoordinatedPlan coordinated(*f.agent, o);
  const auto start = SteadyClock::now();
  EXPECT_FALSE(coordinated.Start());
  const double elapsed = SecondsSince(start);
  EXPECT_GE(elapsed, 0.25);
  EXPECT_LT(elapsed, 1.0);
  ASSERT_EQ(f.log.Lines().size(), 1u);
  EXPECT_EQ(f.log.Lines()[0],
            "no answer from the coordinator at " + server.url() +
                " within 0.3 s; this rank keeps default clocks, training goes on");
}

}  // namespace
}  // namespace joulepipe::runtime
