// serve::Server end to end over loopback HTTP: every route's answers and
// errors, long polls, many parked waiters without threads, Zeus's routes,
// restart from the same database, eviction.
#include "joulepipe/serve/server.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http_test_client.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/serve/store.hpp"
#include "serve_fixture.hpp"

namespace joulepipe::serve {
namespace {

TEST_F(ServeTest, HealthzAndInfoAnswer) {
  Start(Options());
  const HttpResponse h = Get("/healthz");
  ASSERT_EQ(h.status, 200);
  EXPECT_EQ(h.Json().at("ok"), true);
  EXPECT_EQ(h.Json().at("persistent"), false);
  const HttpResponse i = Get("/info");
  ASSERT_EQ(i.status, 200);
  EXPECT_EQ(i.Json().at("scheduler"), "joulepipe");
  EXPECT_TRUE(i.Json().at("zeus_defaults").is_null());
  ExpectError(Get("/nope"), 404, "no such route", nullptr);
  const HttpResponse wrong = Http(port(), "DELETE", "/jobs");
  ExpectError(wrong, 405, "this path takes GET, POST", nullptr);
  EXPECT_EQ(wrong.Header("allow"), "GET, POST");
}

TEST_F(ServeTest, JobLifecycle) {
  Start(Options());
  // Registration, idempotent with the same fields, 409 with others.
  HttpResponse r = Post("/jobs", JobBody("job-a", 2, 2));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json(), json({{"job_id", "job-a"}}));
  EXPECT_EQ(Post("/jobs", JobBody("job-a", 2, 2)).Json().at("job_id"), "job-a");
  ExpectError(Post("/jobs", JobBody("job-a", 2, 4)), 409,
              "JobConfig::dp_degree: 2 registered, 4 given", "JobConfig::dp_degree");
  const json listed = Get("/jobs").Json().at("jobs");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].at("phase"), "waiting_for_ranks");

  // Ranks: identical re-registration is fine, other info or coordinates 409.
  for (int d = 0; d < 2; ++d) {
    for (int p = 0; p < 2; ++p) {
      r = Post("/jobs/job-a/ranks", Rank(d * 2 + p, d, p));
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.body, "{}");
    }
  }
  EXPECT_EQ(Post("/jobs/job-a/ranks", Rank(3, 1, 1)).status, 200);
  ExpectError(Post("/jobs/job-a/ranks", Rank(3, 1, 0)), 409,
              "rank 3 is already registered with job job-a with other information",
              "RankInfo::rank");
  ExpectError(Post("/jobs/job-a/ranks", Rank(9, 0, 0)), 409, "RankInfo::rank must be 0..3",
              "RankInfo::rank");
  json bad_clock = Rank(0, 0, 0);
  bad_clock["available_frequencies"] = {1410, 0};
  ExpectError(Post("/jobs/job-a/ranks", bad_clock), 409, "already registered", "RankInfo::rank");

  // No plan yet: wait_s=0 answers 204 at once.
  EXPECT_EQ(Get("/jobs/job-a/plan?rank=0&wait_s=0").status, 204);
  ExpectError(Get("/jobs/job-a/plan?rank=7&wait_s=0"), 409, "rank 7 is not registered",
              "PlanQuery::rank");
  ExpectError(Get("/jobs/job-a/plan?wait_s=0"), 400, "PlanQuery::rank is missing",
              "PlanQuery::rank");
  ExpectError(Get("/jobs/job-a/plan?rank=0&wait_s=301"), 400, "PlanQuery::wait_s must be",
              "PlanQuery::wait_s");
  // Decimal only (issue 61, 10: "0x10" was read as 16 s).
  for (const char* bad : {"0x10", "1e", "inf", "nan", "+1", " 1", ""}) {
    ExpectError(Get(std::string("/jobs/job-a/plan?rank=0&wait_s=") + bad), 400,
                "PlanQuery::wait_s must be", "PlanQuery::wait_s");
  }

  // The profile, then the plan.
  r = PutProfile("job-a", TinyProfileCsv());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json(), json({{"rows", 12}}));
  for (int rank = 0; rank < 4; ++rank) {
    r = Get("/jobs/job-a/plan?rank=" + std::to_string(rank) + "&wait_s=20");
    ASSERT_EQ(r.status, 200) << r.body;
    const json plan = r.Json();
    EXPECT_EQ(plan.at("rank"), rank);
    EXPECT_EQ(plan.at("pipeline"), rank / 2);
    EXPECT_EQ(plan.at("stage"), rank % 2);
    EXPECT_EQ(plan.at("version"), 1);
    EXPECT_NE(plan.at("reason").get<std::string>().find("initial plan"), std::string::npos);
    EXPECT_GT(plan.at("predicted").at("time_s").get<double>(), 0);
    const json& f = plan.at("frequencies");
    const json& in = plan.at("instructions");
    ASSERT_EQ(f.size(), 8u);  // 4 microbatches, forward and backward
    ASSERT_EQ(in.size(), 8u);
    for (std::size_t k = 0; k < f.size(); ++k) {
      EXPECT_EQ(f[k][0], in[k].at("instruction"));
      EXPECT_EQ(f[k][1], in[k].at("frequency"));
    }
  }
  // A plan newer than version 1 is not there: 204 after the wait.
  EXPECT_EQ(Get("/jobs/job-a/plan?rank=0&after=1&wait_s=0.2").status, 204);
  // Planned: the profile is fixed.
  ExpectError(PutProfile("job-a", TinyProfileCsv()), 409, "is planned already", nullptr);

  r = Post("/jobs/job-a/iterations", {{"rank", 0}, {"iteration", 0}, {"time_s", 0.2}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json(), json({{"plan_version", 1}}));

  const json status = Get("/jobs/job-a").Json();
  EXPECT_EQ(status.at("phase"), "planned");
  EXPECT_GE(status.at("frontier").at("points").size(), 1u);
  EXPECT_EQ(status.at("switches").size(), 1u);
  EXPECT_EQ(status.at("pipelines").size(), 2u);
  EXPECT_TRUE(Logged("job job-a: planned in"));

  ASSERT_EQ(Http(port(), "DELETE", "/jobs/job-a").status, 200);
  ExpectError(Get("/jobs/job-a"), 404, "no job 'job-a'", nullptr);
  EXPECT_EQ(Get("/jobs").Json().at("jobs").size(), 0u);
}

TEST_F(ServeTest, ServerAssignsZeusStyleIds) {
  Start(Options());
  json body = JobBody("", 2, 2);
  body["metadata"] = "my run/1";
  const std::string a = Post("/jobs", body).Json().at("job_id");
  const std::string b = Post("/jobs", body).Json().at("job_id");
  EXPECT_NE(a, b);  // no two jobs share an id, even in the same second
  EXPECT_NE(a.find("+dp2+pp2+tp1+joulepipe+my_run_1"), std::string::npos) << a;
  ASSERT_EQ(a.size(), 19u + std::string("+dp2+pp2+tp1+joulepipe+my_run_1").size()) << a;
  EXPECT_EQ(Get("/jobs/" + Encode(a)).status, 200);
}

TEST_F(ServeTest, BadInputIsRefusedWithPreciseMessages) {
  Start(Options());
  ExpectError(Http(port(), "POST", "/jobs", "{\"pp_degree\": 2,\n \"dp_degree\": }"), 400,
              "not valid JSON at line 2, column", nullptr);
  ExpectError(Http(port(), "POST", "/jobs", ""), 400, "has no body", nullptr);
  json body = JobBody("w", 2, 2);
  body["world_size"] = 5;
  ExpectError(Post("/jobs", body), 422, "JobConfig::world_size must be pp_degree x dp_degree",
              "JobConfig::world_size");
  body = JobBody("w", 2, 2);
  body["schedule"] = "zigzag";
  ExpectError(Post("/jobs", body), 400, "JobConfig::schedule must be", "JobConfig::schedule");
  body = JobBody("w", 2, 2);
  body["pp_degree"] = "2";
  ExpectError(Post("/jobs", body), 400, "JobConfig::pp_degree must be a whole number (got \"2\")",
              "JobConfig::pp_degree");
  body = JobBody("w", 2, 2);
  body["microbatchez"] = 4;
  ExpectError(Post("/jobs", body), 400, "JobConfig has no member \"microbatchez\"", "JobConfig");
  body = JobBody("w", 2, 2);
  body["schedule"] = "interleaved";
  ExpectError(Post("/jobs", body), 422, "JobConfig::chunks", "JobConfig::chunks");
  body = JobBody("w", 2, 2);
  body["straggler"] = {{"threshold", 0.5}};
  ExpectError(Post("/jobs", body), 400, "StragglerOptions::threshold",
              "StragglerOptions::threshold");
  // A rule between members is 422 (each member is within its schema range);
  // an absent recover_below follows a threshold below its default.
  body = JobBody("w", 2, 2);
  body["straggler"] = {{"threshold", 1.02}, {"recover_below", 1.03}};
  ExpectError(Post("/jobs", body), 422,
              "recover_below must be 1..StragglerOptions::threshold (1.02)",
              "StragglerOptions::recover_below");
  body = JobBody("low-threshold", 2, 2);
  body["straggler"] = {{"threshold", 1.02}};
  EXPECT_EQ(Post("/jobs", body).status, 200);
  ExpectError(Post("/jobs", JobBody("a/b", 2, 2)), 400, "JobConfig::job_id must be",
              "JobConfig::job_id");
  // '%' would start an escape in the job's path: "a%2Bb" could never be
  // addressed as itself (schemathesis ST302).
  ExpectError(Post("/jobs", JobBody("a%2Bb", 2, 2)), 400, "without spaces, '/', '%', '?' or '#'",
              "JobConfig::job_id");

  ExpectError(Get("/jobs/none"), 404, "no job 'none'", nullptr);
  ExpectError(Post("/jobs/none/ranks", Rank(0, 0, 0)), 404, "no job 'none'", nullptr);
  ExpectError(PutProfile("none", TinyProfileCsv()), 404, "no job 'none'", nullptr);
  ExpectError(Get("/jobs/none/plan?rank=0"), 404, "no job 'none'", nullptr);

  RegisterJob("j", 2, 1);
  // Iteration reports: NaN is not JSON; negative, zero and absurd times and
  // energies are refused by name.
  ExpectError(
      Http(port(), "POST", "/jobs/j/iterations", "{\"rank\":0,\"iteration\":0,\"time_s\":NaN}"),
      400, "not valid JSON at line 1, column", nullptr);
  ExpectError(Post("/jobs/j/iterations", {{"rank", 0}, {"iteration", 0}, {"time_s", -1}}), 400,
              "IterationReport::time_s must be a time in seconds, > 0", "IterationReport::time_s");
  ExpectError(Post("/jobs/j/iterations", {{"rank", 0}, {"iteration", 0}, {"time_s", 0}}), 400,
              "IterationReport::time_s", "IterationReport::time_s");
  ExpectError(Post("/jobs/j/iterations", {{"rank", 0}, {"iteration", 0}, {"time_s", 1e9}}), 400,
              "at most 86400", "IterationReport::time_s");
  ExpectError(
      Post("/jobs/j/iterations", {{"rank", 0}, {"iteration", 0}, {"time_s", 1}, {"energy_j", -3}}),
      400, "IterationReport::energy_j", "IterationReport::energy_j");
  ExpectError(Post("/jobs/j/iterations", {{"rank", 0}, {"iteration", -1}, {"time_s", 1}}), 400,
              "IterationReport::iteration counts from 0", "IterationReport::iteration");
  ExpectError(Post("/jobs/j/iterations", {{"rank", 5}, {"iteration", 0}, {"time_s", 1}}), 409,
              "rank 5 is not registered", "IterationReport::rank");
  EXPECT_EQ(Post("/jobs/j/iterations",
                 {{"rank", 0}, {"iteration", 0}, {"time_s", 1}, {"energy_j", nullptr}})
                .status,
            200);

  // Profiles: a CSV error names the line; a profile of the wrong stage
  // count names the job's pp_degree.
  ExpectError(PutProfile("j", "stage,instruction,frequency,time,energy\n0,forward,1410,abc,1\n"),
              422, "the uploaded profile", nullptr);
  std::string one_stage =
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1410,0.01,2.6\n0,backward,1410,0.02,5.2\n";
  ExpectError(PutProfile("j", one_stage), 422, "", "JobConfig::pp_degree");
  EXPECT_EQ(Get("/jobs/j").Json().at("has_profile"), false);  // nothing half-written
}

TEST_F(ServeTest, OversizedBodiesAre413) {
  Start(Options());
  RegisterJob("j", 2, 1);
  // Declared too large: refused before the body is sent.
  HttpResponse r = Http(port(), "POST", "/jobs", "", {{"Content-Length", "2000000"}});
  ExpectError(r, 413, "the request body is 2000000 bytes; POST /jobs takes at most 65536 bytes",
              nullptr);
  r = Http(port(), "POST", "/jobs", "", {{"Content-Length", "65537"}});
  ExpectError(r, 413, "POST /jobs takes at most 65536 bytes", nullptr);
  r = Http(port(), "PUT", "/jobs/j/profile", "", {{"Content-Length", "70000000"}});
  ExpectError(r, 413, "PUT /jobs/{id}/profile takes at most 64 MiB", nullptr);
  // Chunked, no length declared: refused from the headers (411), its body
  // never read.
  const std::string piece(64 * 1024, ' ');
  std::string chunked;
  for (int k = 0; k < 20; ++k) chunked += "10000\r\n" + piece + "\r\n";
  chunked += "0\r\n\r\n";
  r = Http(port(), "POST", "/jobs", chunked, {{"Transfer-Encoding", "chunked"}});
  ExpectError(r, 411, "send the body with a Content-Length header", nullptr);
  // Just under the limit is read (and then judged as JSON).
  r = Http(port(), "POST", "/jobs", std::string(1000, ' ') + "{}");
  ExpectError(r, 400, "JobConfig::pp_degree is missing", "JobConfig::pp_degree");
}

// schemathesis ST204: a method a path does not take is 405 with Allow, even
// with a body (TRACE with a body was 413: the no-body rule came first).
TEST_F(ServeTest, AMethodThePathDoesNotTakeIs405EvenWithABody) {
  Start(Options());
  for (const char* path : {"/jobs/x/ranks", "/jobs/x/iterations", "/register_job"}) {
    const HttpResponse r = Http(port(), "TRACE", path, "{}");
    EXPECT_EQ(r.status, 405) << path << ": " << r.body;
    EXPECT_NE(r.Header("allow"), "") << path;
  }
}

TEST_F(ServeTest, TokenIsRequiredAndComparedExactly) {
  ServerOptions o = Options();
  o.token = "s3cret-token-0123";
  Start(std::move(o));
  EXPECT_EQ(Get("/healthz").status, 200);  // open
  HttpResponse r = Get("/jobs");
  ExpectError(r, 401, "this server requires a bearer token", nullptr);
  EXPECT_EQ(r.Header("www-authenticate"), "Bearer realm=\"joulepipe\"");
  ExpectError(Get("/jobs", {{"Authorization", "Bearer s3cret-token-0124"}}), 401,
              "the bearer token does not match", nullptr);
  ExpectError(Get("/jobs", {{"Authorization", "Bearer s3cret-token-0123-and-more"}}), 401,
              "does not match", nullptr);
  ExpectError(Get("/jobs", {{"Authorization", "Basic czNjcmV0"}}), 401,
              "must be 'Bearer <token>' (got the scheme 'Basic')", nullptr);
  // A refused POST never reaches the route, even with a body.
  ExpectError(Post("/jobs", JobBody("x", 2, 1)), 401, "requires a bearer token", nullptr);
  EXPECT_EQ(Get("/jobs", {{"Authorization", "Bearer s3cret-token-0123"}}).status, 200);
  EXPECT_EQ(Get("/metrics", {{"Authorization", "bearer s3cret-token-0123"}}).status, 200);
  // The path prefix for clients that cannot send headers (Zeus's).
  EXPECT_EQ(Get("/t/s3cret-token-0123/jobs").status, 200);
  ExpectError(Get("/t/wrong/jobs"), 401, "the token in the path", nullptr);
  EXPECT_EQ(Get("/jobs").status, 401);
}

TEST_F(ServeTest, NonLoopbackWithoutTokenIsWarnedAbout) {
  ServerOptions o = Options();
  o.host = "0.0.0.0";
  Start(std::move(o));
  EXPECT_TRUE(
      Logged("warning: listening on 0.0.0.0, which is not a loopback address, without "
             "a token (ServerOptions::token)"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("10.1.2.3"));
  EXPECT_FALSE(IsLoopbackHost("::"));
}

TEST_F(ServeTest, PortInUseNamesThePort) {
  Start(Options());
  ServerOptions o = Options();
  o.port = port();
  try {
    Server second(std::move(o));
    FAIL() << "a second server bound the same port";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::port");
    EXPECT_NE(std::string(e.what()).find("cannot listen on 127.0.0.1:" + std::to_string(port())),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ServeTest, LongPollIsAnsweredWhenThePlanAppears) {
  Start(Options());
  RegisterJob("j", 2, 1);
  auto waiting = std::async(std::launch::async,
                            [&] { return Http(port(), "GET", "/jobs/j/plan?rank=1&wait_s=60"); });
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 1; }, 10));
  EXPECT_EQ(Get("/healthz").Json().at("waiting_requests"), 1);
  const auto uploaded = std::chrono::steady_clock::now();
  ASSERT_EQ(PutProfile("j", TinyProfileCsv()).status, 200);
  const HttpResponse r = waiting.get();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - uploaded).count();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json().at("rank"), 1);
  EXPECT_EQ(r.Json().at("version"), 1);
  EXPECT_LT(took, 10);
  EXPECT_EQ(server_->waiting_requests(), 0);

  // A deadline: 204 after about wait_s.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Get("/jobs/j/plan?rank=1&after=1&wait_s=0.3").status, 204);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.29);
  EXPECT_LT(waited, 3);

  const std::string metrics = Get("/metrics").body;
  EXPECT_NE(metrics.find("joulepipe_jobs{phase=\"planned\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("joulepipe_plans_total 1"), std::string::npos);
  EXPECT_NE(metrics.find("joulepipe_plan_solve_seconds_count 1"), std::string::npos);
  EXPECT_NE(metrics.find("joulepipe_ranks 2"), std::string::npos);
  EXPECT_NE(metrics.find("joulepipe_waiting_requests 0"), std::string::npos);
  EXPECT_NE(metrics.find("joulepipe_http_request_duration_seconds_bucket{route=\"POST "
                         "/jobs/{id}/ranks\",le=\"+Inf\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("joulepipe_http_request_wait_seconds_count{route=\"GET "
                         "/jobs/{id}/plan\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find("joulepipe_http_requests_total{route=\"GET /jobs/{id}/plan\",code=\"204\"} 1"),
      std::string::npos);
}

TEST_F(ServeTest, ManyWaitersHoldNoThreads) {
  Start(Options());
  constexpr int kPipelines = 128;  // 256 ranks
  RegisterJob("big", 2, kPipelines);
  const int before = ThreadCount();
  std::vector<int> sockets;
  for (int rank = 0; rank < 2 * kPipelines; ++rank) {
    const int fd = Connect(port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(
        SendRequest(fd, "GET", "/jobs/big/plan?rank=" + std::to_string(rank) + "&wait_s=120"));
    sockets.push_back(fd);
  }
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 2 * kPipelines; }, 20))
      << server_->waiting_requests();
  // The server's threads (the HTTP thread, planner, timer) plus this test's: the
  // same as before the 256 requests arrived.
  EXPECT_EQ(ThreadCount(), before);
  EXPECT_LE(ThreadCount(), 12);
  ASSERT_EQ(PutProfile("big", TinyProfileCsv()).status, 200);
  for (int rank = 0; rank < 2 * kPipelines; ++rank) {
    const HttpResponse r = ReadResponse(sockets[rank], 30);
    ASSERT_EQ(r.status, 200) << "rank " << rank << ": " << r.body;
    EXPECT_EQ(r.Json().at("rank"), rank);
    EXPECT_EQ(r.Json().at("pipeline"), rank / 2);
  }
  EXPECT_EQ(server_->waiting_requests(), 0);
}

TEST_F(ServeTest, HungUpWaitersAreDropped) {
  Start(Options());
  RegisterJob("j", 2, 1);
  const int fd = Connect(port());
  ASSERT_TRUE(SendRequest(fd, "GET", "/jobs/j/plan?rank=0&wait_s=300"));
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 1; }, 10));
  ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return server_->waiting_requests() == 0; }, 5));
}

TEST_F(ServeTest, StopAnswersParkedRequests503) {
  Start(Options());
  RegisterJob("j", 2, 1);
  auto waiting = std::async(std::launch::async,
                            [&] { return Http(port(), "GET", "/jobs/j/plan?rank=0&wait_s=300"); });
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 1; }, 10));
  server_->Stop();
  const HttpResponse r = waiting.get();
  ExpectError(r, 503, "the server is stopping", nullptr);
  EXPECT_EQ(r.Header("retry-after"), "1");
}

TEST_F(ServeTest, DeletingAJobAnswersItsWaiters404) {
  Start(Options());
  RegisterJob("j", 2, 1);
  auto waiting = std::async(std::launch::async,
                            [&] { return Http(port(), "GET", "/jobs/j/plan?rank=0&wait_s=300"); });
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 1; }, 10));
  ASSERT_EQ(Http(port(), "DELETE", "/jobs/j").status, 200);
  ExpectError(waiting.get(), 404, "job j was deleted while the request waited", nullptr);
}

// ---- Zeus 0.16.0 compatibility ---------------------------------------------------

ServerOptions WithZeusDefaults(ServerOptions o, bool profile) {
  o.zeus.microbatches = 4;
  o.zeus.p_block_w = 60;
  if (profile) {
    o.zeus.profile = model::ParseProfileCsv(TinyProfileCsv(), "tiny.csv");
    o.zeus.profile_name = "tiny.csv";
  }
  return o;
}

TEST_F(ServeTest, ZeusClientFlow) {
  Start(WithZeusDefaults(Options(), true));
  const json info = {{"job_id", ""},   {"pp_degree", 2},  {"dp_degree", 1},
                     {"tp_degree", 1}, {"world_size", 2}, {"job_metadata", "bert"}};
  HttpResponse r = Post("/register_job", info);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string id = r.Json().get<std::string>();
  EXPECT_NE(id.find("+dp1+pp2+tp1+joulepipe+bert"), std::string::npos) << id;
  const std::string encoded = Encode(id);  // '+' as %2B
  ASSERT_NE(encoded.find("%2B"), std::string::npos);
  for (int rank = 0; rank < 2; ++rank) {
    json rank_info = Rank(rank, 0, rank);
    rank_info["extra"] = "ignored, as pydantic does";
    r = Post("/register_rank/" + (rank == 0 ? encoded : id), rank_info);  // literal '+' too
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, "null");
  }
  // The plan exists (default profile), but GET /schedule waits until every
  // rank has asked.
  auto first = std::async(std::launch::async,
                          [&] { return Http(port(), "GET", "/schedule/" + encoded + "?rank=0"); });
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 1; }, 10));
  ASSERT_TRUE(WaitFor([&] { return Get("/jobs/" + encoded).Json().at("phase") == "planned"; }, 20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(server_->waiting_requests(), 1);
  r = Get("/schedule/" + encoded + "?rank=1");
  ASSERT_EQ(r.status, 200) << r.body;
  const json s1 = r.Json();
  EXPECT_EQ(s1.at("rank"), 1);
  ASSERT_EQ(s1.at("frequencies").size(), 8u);
  EXPECT_TRUE(s1.at("frequencies")[0][0] == "forward");
  EXPECT_TRUE(s1.at("frequencies")[0][1].is_number_integer());
  const HttpResponse r0 = first.get();
  ASSERT_EQ(r0.status, 200) << r0.body;
  EXPECT_EQ(r0.Json().at("rank"), 0);
  // Asking again answers at once: the barrier is open.
  EXPECT_EQ(Get("/schedule/" + encoded + "?rank=0").Json(), r0.Json());
  // The native plan of the same rank says the same clocks.
  EXPECT_EQ(Get("/jobs/" + encoded + "/plan?rank=0").Json().at("frequencies"),
            r0.Json().at("frequencies"));

  // ProfilingResult: each iter_time is an iteration report.
  for (int rank = 0; rank < 2; ++rank) {
    r = Post("/result/" + encoded, {{"rank", rank},
                                    {"iter_time", {0.2, 0.21, 0.2}},
                                    {"iter_energy", {50.0, 51.0, 50.5}},
                                    {"time_breakdown", json::object()},
                                    {"energy_breakdown", json::object()}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, "null");
  }
  EXPECT_EQ(Get("/jobs/" + encoded).Json().at("completed_iterations"), 3);
  ExpectError(Post("/result/" + encoded,
                   {{"rank", 0}, {"iter_time", {0.2, -1.0}}, {"iter_energy", json::array()}}),
              400, "ProfilingResult::iter_time[1] must be a time in seconds",
              "ProfilingResult::iter_time");
  ExpectError(
      Post("/result/" + encoded, {{"rank", 0}, {"iter_time", {0.2, 0.2}}, {"iter_energy", {1.0}}}),
      422, "ProfilingResult::iter_energy has 1 entries but iter_time has 2",
      "ProfilingResult::iter_energy");
  EXPECT_EQ(Get("/jobs/" + encoded).Json().at("completed_iterations"), 3);  // nothing applied

  // JobInfo's own rules.
  json bad = info;
  bad["world_size"] = 3;
  ExpectError(Post("/register_job", bad), 422, "JobInfo::world_size must be pp_degree x",
              "JobInfo::world_size");
  bad = info;
  bad["job_id"] = "mine";
  ExpectError(Post("/register_job", bad), 400, "JobInfo::job_id must be empty", "JobInfo::job_id");
  bad = info;
  bad["pp_degree"] = 4;
  bad["world_size"] = 4;
  ExpectError(Post("/register_job", bad), 409, "", "JobInfo::pp_degree");  // profile has 2
  ExpectError(Get("/schedule/" + encoded), 400, "ScheduleQuery::rank is missing",
              "ScheduleQuery::rank");
}

TEST_F(ServeTest, ZeusJobsWaitForAnUploadedProfile) {
  Start(WithZeusDefaults(Options(), false));
  const std::string id =
      Post(
          "/register_job",
          {{"job_id", ""}, {"pp_degree", 2}, {"dp_degree", 1}, {"tp_degree", 1}, {"world_size", 2}})
          .Json();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(Post("/register_rank/" + Encode(id), Rank(rank, 0, rank)).status, 200);
  }
  std::vector<std::future<HttpResponse>> asks;
  for (int rank = 0; rank < 2; ++rank) {
    asks.push_back(std::async(std::launch::async, [&, rank] {
      return Http(port(), "GET", "/schedule/" + Encode(id) + "?rank=" + std::to_string(rank));
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 2; }, 10));
  ASSERT_EQ(PutProfile(id, TinyProfileCsv()).status, 200);
  for (int rank = 0; rank < 2; ++rank) {
    const HttpResponse r = asks[rank].get();
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json().at("rank"), rank);
  }
}

TEST_F(ServeTest, ZeusRegistrationNeedsDefaults) {
  Start(Options());
  ExpectError(Post("/register_job", {{"job_id", ""},
                                     {"pp_degree", 1},
                                     {"dp_degree", 1},
                                     {"tp_degree", 1},
                                     {"world_size", 1}}),
              409, "no schedule for Zeus-registered jobs", "ZeusDefaults::microbatches");
}

// ---- Persistence -----------------------------------------------------------------

TEST_F(ServeTest, RestartFromTheSameDatabaseKeepsEveryPlanAndSwitch) {
  const std::string db = (dir_ / "state.sqlite").string();
  ServerOptions o = Options();
  o.db_path = db;
  Start(o);
  EXPECT_TRUE(server_->persistent());
  RegisterJob("j", 2, 2);
  ASSERT_EQ(PutProfile("j", TinyProfileCsv()).status, 200);
  std::vector<json> plans;
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r = Get("/jobs/j/plan?rank=" + std::to_string(rank) + "&wait_s=20");
    ASSERT_EQ(r.status, 200) << r.body;
    plans.push_back(r.Json());
  }
  // Pipeline 1 straggles (1.3x) for a few iterations: a plan switch.
  const double t = plans[0].at("predicted").at("time_s");
  int version = 1;
  for (int it = 0; it < 4; ++it) {
    for (int rank = 0; rank < 4; ++rank) {
      const double time = rank / 2 == 1 ? 1.3 * t : t;
      const HttpResponse r =
          Post("/jobs/j/iterations", {{"rank", rank}, {"iteration", it}, {"time_s", time}});
      ASSERT_EQ(r.status, 200) << r.body;
      version = r.Json().at("plan_version");
    }
  }
  ASSERT_EQ(version, 2) << Get("/jobs/j").body;
  plans.clear();
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r = Get("/jobs/j/plan?rank=" + std::to_string(rank) + "&after=1");
    ASSERT_EQ(r.status, 200) << r.body;
    plans.push_back(r.Json());
  }
  EXPECT_NE(plans[0].at("frequencies"), plans[2].at("frequencies"));  // pipeline 0 slowed
  const json switches = Get("/jobs/j").Json().at("switches");
  ASSERT_EQ(switches.size(), 2u);

  server_->Stop();
  server_.reset();
  Start(o);
  EXPECT_EQ(server_->restored_jobs(), 1);
  EXPECT_TRUE(Logged("job j: restored (planned, 4 of 4 ranks, plan version 2)"));
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r = Get("/jobs/j/plan?rank=" + std::to_string(rank));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json(), plans[rank]) << "rank " << rank;
  }
  EXPECT_EQ(Get("/jobs/j").Json().at("switches"), switches);
  // Ranks go on reporting.
  EXPECT_EQ(Post("/jobs/j/iterations", {{"rank", 0}, {"iteration", 4}, {"time_s", t}})
                .Json()
                .at("plan_version"),
            2);
  // A second server on the same file is refused.
  ServerOptions other = Options();
  other.db_path = db;
  try {
    Server second(std::move(other));
    FAIL() << "two servers opened one database";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::db_path");
    EXPECT_NE(std::string(e.what()).find("in use by another process"), std::string::npos)
        << e.what();
  }
}

TEST_F(ServeTest, AJobReadyButNotPlannedIsPlannedAtRestart) {
  const std::string db = (dir_ / "state.sqlite").string();
  {
    // The state a server killed while solving leaves: every rank and the
    // profile stored, no frontier.
    Store store(db);
    store.Write([&] {
      store.InsertJob("j", 1,
                      json({{"job_id", "j"},
                            {"pp_degree", 2},
                            {"dp_degree", 1},
                            {"tp_degree", 1},
                            {"schedule", "1f1b"},
                            {"microbatches", 4},
                            {"p_block_w", 60.0}})
                          .dump(),
                      1.7e9);
      for (int rank = 0; rank < 2; ++rank) store.PutRank("j", rank, Rank(rank, 0, rank).dump());
      store.PutProfile("j", TinyProfileCsv());
    });
  }
  ServerOptions o = Options();
  o.db_path = db;
  o.evict_after_s = 0;  // the job's last activity is long ago
  Start(o);
  const HttpResponse r = Get("/jobs/j/plan?rank=1&wait_s=20");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json().at("version"), 1);
}

TEST_F(ServeTest, UnreadableStoredJobsAreKeptAndNamed) {
  const std::string db = (dir_ / "state.sqlite").string();
  {
    Store store(db);
    store.Write([&] { store.InsertJob("bad", 1, "{\"pp_degree\": ", 1.7e9); });
  }
  ServerOptions o = Options();
  o.db_path = db;
  o.evict_after_s = 0;
  Start(o);
  EXPECT_EQ(server_->restored_jobs(), 0);
  EXPECT_TRUE(Logged("warning: job bad could not be restored"));
  ExpectError(Get("/jobs/bad"), 409, "could not be restored", nullptr);
  ExpectError(Post("/jobs", JobBody("bad", 2, 1)), 409, "could not be restored", nullptr);
  EXPECT_EQ(Http(port(), "DELETE", "/jobs/bad").status, 200);
  ExpectError(Get("/jobs/bad"), 404, "no job", nullptr);
}

TEST_F(ServeTest, IdleJobsAreEvictedWithTheirRows) {
  const std::string db = (dir_ / "state.sqlite").string();
  ServerOptions o = Options();
  o.db_path = db;
  o.evict_after_s = 0.5;
  o.evict_check_period_s = 0.1;
  Start(o);
  RegisterJob("idle", 2, 1);
  RegisterJob("busy", 2, 1);
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500)) {
    ASSERT_EQ(Get("/jobs/busy").status, 200);  // keeps it active
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ExpectError(Get("/jobs/idle"), 404, "no job 'idle'", nullptr);
  EXPECT_TRUE(Logged("job idle: evicted after"));
  server_.reset();
  o.evict_after_s = 0;
  Start(o);
  EXPECT_EQ(server_->restored_jobs(), 1);  // busy only: idle's rows are gone
  EXPECT_EQ(Get("/jobs/busy").status, 200);
}

TEST(StoreTest, AFailedWriteLeavesNothing) {
  Store store("");
  EXPECT_FALSE(store.persistent());
  EXPECT_THROW(store.Write([&] {
    store.InsertJob("j", 1, "{}", 1.0);
    store.set_fail_writes(true);
    store.PutRank("j", 0, "{}");
  }),
               StoreError);
  store.set_fail_writes(false);
  EXPECT_FALSE(store.Load("j").has_value());
  EXPECT_THROW(store.InsertJob("j", 1, "{}", 1.0), StoreError);  // only inside Write
  store.Write([&] { store.InsertJob("j", 1, "{}", 1.0); });
  ASSERT_TRUE(store.Load("j").has_value());
  EXPECT_EQ(store.LoadAll().size(), 1u);
}

// Issue 41, item 2: a database the service creates is private to its user
// (it holds every job's profile and plans); before, it was 0644 under the
// usual umask.
TEST(StoreTest, ANewDatabaseIsPrivate) {
  const fs::path dir =
      fs::temp_directory_path() / ("joulepipe-store-mode-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const mode_t old_umask = ::umask(022);
  {
    Store store((dir / "state.sqlite").string());
    store.Write([&] { store.InsertJob("j", 1, "{}", 1.0); });
  }
  // Issue 61, 10: through a symbolic link to nowhere, the file it names is
  // created private too (SQLite created it 0644).
  fs::create_symlink(dir / "target.sqlite", dir / "link.sqlite");
  {
    Store store((dir / "link.sqlite").string());
    store.Write([&] { store.InsertJob("j", 1, "{}", 1.0); });
  }
  ::umask(old_umask);
  struct stat info{};
  ASSERT_EQ(::stat((dir / "state.sqlite").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir / "target.sqlite").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  fs::remove_all(dir);
}

TEST(StoreTest, NotADatabaseIsNamed) {
  const fs::path path =
      fs::temp_directory_path() / ("joulepipe-notadb-" + std::to_string(::getpid()));
  {
    std::ofstream out(path);
    out << "this is not an SQLite file, just some text that is long enough to have a header\n";
  }
  try {
    Store store(path.string());
    FAIL();
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::db_path");
    EXPECT_NE(std::string(e.what()).find("cannot use the state database '" + path.string() +
                                         "': it is not an SQLite database"),
              std::string::npos)
        << e.what();
  }
  fs::remove(path);
}

}  // namespace
}  // namespace joulepipe::serve
