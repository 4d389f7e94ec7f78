// `joulepipe serve` against the requests of issue 24 (tried as an attacker
// would): none grows memory by what it names, none adds server state
// without a token, and one rank's nonsense cannot stop a job's straggler
// detection. Each test is that reproduction, made small.
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http_test_client.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile_rows.hpp"
#include "serve_fixture.hpp"

namespace joulepipe::serve {
namespace {

// /healthz asked every 5 ms on a thread of its own while a test loads the
// server; Stop() ends it and returns the answers' latencies (s), sorted.
class HealthzSampler {
 public:
  explicit HealthzSampler(int port)
      : thread_([this, port] {
          while (!done_.load()) {
            const auto start = std::chrono::steady_clock::now();
            EXPECT_EQ(Http(port, "GET", "/healthz", "", {}).status, 200);
            latencies_.push_back(SecondsSince(start));
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        }) {}
  ~HealthzSampler() { Stop(); }
  std::vector<double> Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    std::sort(latencies_.begin(), latencies_.end());
    return latencies_;
  }

 private:
  std::atomic<bool> done_{false};
  std::vector<double> latencies_;
  std::thread thread_;  // last: it starts once the members above exist
};

// Issue 24, 1: a 171-byte upload naming stage 2147483646 grew the server to
// 15.6 GB (the message listed every missing stage id). Now the stage id is
// refused as read, and an id within the limit costs what its rows cost.
TEST_F(ServeTest, AProfileNamingAHugeStageIdCostsNothing) {
  Start(Options());
  RegisterJob("j", 2, 1);
  const long before_kb = ResidentKb();
  const std::string tiny =
      "stage,instruction,frequency,time,energy\n"
      "2147483646,forward,1410,0.01,2.5\n";
  auto start = std::chrono::steady_clock::now();
  ExpectError(PutProfile("j", tiny), 422, "over the largest stage id", nullptr);
  EXPECT_LT(SecondsSince(start), 2.0);
  // The largest id allowed, beside real rows: refused for not fitting the
  // job, with the missing ids as ranges, not a megabyte of them.
  std::string csv = TinyProfileCsv();
  csv += "1048575,forward,1410,0.01,2.5\n1048575,backward,1410,0.02,5.0\n";
  start = std::chrono::steady_clock::now();
  const HttpResponse r = PutProfile("j", csv);
  EXPECT_LT(SecondsSince(start), 2.0);
  ExpectError(r, 422, "stages 2..1048574", "JobConfig::pp_degree");
  EXPECT_LT(r.body.size(), 2000u) << r.body.size();
  EXPECT_LT(ResidentKb() - before_kb, 50 * 1024) << "kB grown";
  EXPECT_EQ(Get("/healthz").status, 200);
}

// A profile of `stages` stages with `clocks` clocks each, about
// 52 x 2 x stages x clocks bytes. Lower clocks are slower and dearer (so
// the frontier is one point and planning it is quick).
std::string BigProfileCsv(int stages, int clocks) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  char row[128];
  for (int s = 0; s < stages; ++s) {
    for (int k = 0; k < clocks; ++k) {
      const int mhz = 9999 - k;
      const double t = 0.01 * 9999.0 / mhz;
      const double e = t * (300 + k * 0.01);
      for (const char* kind : {"forward", "backward"}) {
        std::snprintf(row, sizeof row, "%d,%s,%d,%.15f,%.15f\n", s, kind, mhz, t, e);
        csv += row;
      }
    }
  }
  return csv;
}

// Issue 24, 2: a 54 MB profile was parsed on the only HTTP thread and
// /healthz took 11.2 s meanwhile. Now the upload is parsed on the intake
// thread while its request is parked.
TEST_F(ServeTest, HealthzStaysQuickDuringAFiftyMegabyteUpload) {
  Start(Options());
  RegisterJob("big", 80, 1);
  const std::string csv = BigProfileCsv(80, 6000);
  ASSERT_GT(csv.size(), 50'000'000u);  // 50 MB
  HealthzSampler sampler(port());
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r = PutProfile("big", csv);
  const double upload_s = SecondsSince(start);
  const std::vector<double> sorted = sampler.Stop();
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 500);
  EXPECT_EQ(r.Json().at("rows"), 80 * 6000 * 2);
  ASSERT_GT(sorted.size(), 10u);
  const double p50 = sorted[sorted.size() / 2];
  const double p99 = sorted[std::min(sorted.size() - 1, sorted.size() * 99 / 100)];
  std::printf(
      "[hardening] %.1f MB profile upload answered in %.2f s; /healthz meanwhile: %zu requests, "
      "p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
      csv.size() / 1e6, upload_s, sorted.size(), p50 * 1e3, p99 * 1e3, sorted.back() * 1e3);
  // The figure to meet is p99 < 50 ms (issue 24); this guard is looser for
  // a loaded CI machine, and still 40 x under the old stall.
  EXPECT_LT(p99, 0.25);
}

// An upload whose client hangs up while it is parsed, and one for a job
// deleted meanwhile: the server answers others and holds nothing.
TEST_F(ServeTest, AnUploadWhoseClientLeavesIsForgotten) {
  Start(Options());
  RegisterJob("big", 80, 1);
  const std::string csv = BigProfileCsv(80, 3000);
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendRequest(fd, "PUT", "/jobs/big/profile", csv, {{"Content-Type", "text/csv"}}));
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 1; }, 20));
  ::close(fd);
  EXPECT_TRUE(WaitFor([&] { return server_->waiting_requests() == 0; }, 10));
  EXPECT_EQ(Get("/healthz").status, 200);
  // Issue 41, 4: work for a client that hung up is dropped when it is still
  // queued, else finished: the profile is applied whole or not at all, and
  // in either case an upload that stays gets its answer.
  const HttpResponse again = PutProfile("big", csv);
  // 200: the first was dropped (or replaced); 409: it was applied and the
  // job planned meanwhile.
  EXPECT_TRUE(again.status == 200 ||
              (again.status == 409 && again.body.find("planned already") != std::string::npos))
      << again.status << " " << again.body.substr(0, 300);
  EXPECT_TRUE(
      WaitFor([&] { return Get("/jobs/big").Json().at("phase") != "waiting_for_profile"; }, 20));
}

// Issue 41, 4: 30 uploads of 25 MB, each sent and hung up at once, took the
// server to 860 MB and were all parsed. Now at most kMaxIntakeBytes of
// bodies wait to be parsed; a further upload is told to come back.
TEST_F(ServeTest, QueuedUploadsAreBounded) {
  Start(Options());
  RegisterJob("big", 80, 1);
  const std::string csv = BigProfileCsv(80, 3600);  // about 30 MB
  ASSERT_GT(csv.size(), 28'000'000u);
  std::vector<std::future<HttpResponse>> answers;
  for (int i = 0; i < 8; ++i) {
    answers.push_back(std::async(std::launch::async, [&] { return PutProfile("big", csv); }));
  }
  int ok = 0, busy = 0;
  for (auto& a : answers) {
    const HttpResponse r = a.get();
    if (r.status == 503) {
      ++busy;
      EXPECT_EQ(r.Header("retry-after"), "2");
      // Turned away while received (the bodies being received) or while
      // queued for parsing (the intake): either way before it is kept.
      EXPECT_TRUE(r.body.find("of uploads already") != std::string::npos ||
                  r.body.find("request bodies already") != std::string::npos)
          << r.body;
    } else if (r.status == 200 || r.status == 409) {  // 409: planned by then
      ++ok;
    } else {
      ADD_FAILURE() << r.status << " " << r.body.substr(0, 300);
    }
  }
  std::printf("[hardening] 8 concurrent 30 MB uploads: %d answered, %d told to come back\n", ok,
              busy);
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);  // 240 MB sent in well under the ~1 s one takes to parse
  EXPECT_EQ(Get("/healthz").status, 200);
}

// Issue 24, 3: random HTTP methods, unauthenticated, each made a /metrics
// series (5,000 took it from 189 KB to 208 MB). Now the label is the
// method's name only for HTTP's own methods, "OTHER" otherwise.
TEST_F(ServeTest, UnauthenticatedRandomMethodsAddNoMetricsSeries) {
  ServerOptions o = Options();
  o.token = "a-secret-of-16-bytes";
  Start(std::move(o));
  const testing::Headers auth = {{"Authorization", "Bearer a-secret-of-16-bytes"}};
  const std::size_t before = Get("/metrics", auth).body.size();
  std::mt19937 rng(3);
  for (int k = 0; k < 300; ++k) {
    std::string method;
    for (int c = 0; c < 12; ++c) method += static_cast<char>('A' + rng() % 26);
    const HttpResponse r = Http(port(), method, k % 2 ? "/jobs" : "/healthz");
    EXPECT_TRUE(r.status == 401 || r.status == 405 || r.status == 400 || r.status == 501)
        << method << " " << r.status;
  }
  const std::string metrics = Get("/metrics", auth).body;
  // At most a few new series (OTHER on two paths, by status), not 300.
  EXPECT_LT(metrics.size(), before + 8000) << metrics;
  EXPECT_EQ(metrics.find("AAAA"), std::string::npos);
}

// Issue 24, 5: 16 reports for iterations near 10^12 from one rank (all
// answered 200) stopped every later iteration from completing. Now they are
// refused (400, naming the field) and a straggler still switches the plans.
TEST_F(ServeTest, OneRanksBogusIterationsAreRefusedAndDetectionGoesOn) {
  Start(Options());
  RegisterJob("j", 2, 2);  // ranks 0, 1: pipeline 0; 2, 3: pipeline 1
  ASSERT_EQ(PutProfile("j", TinyProfileCsv()).status, 200);
  ASSERT_EQ(Get("/jobs/j/plan?rank=0&wait_s=30").status, 200);
  auto report = [&](int rank, long long iteration, double time_s) {
    return Post("/jobs/j/iterations",
                {{"rank", rank}, {"iteration", iteration}, {"time_s", time_s}});
  };
  const double t = Get("/jobs/j").Json().at("pipelines").at(0).at("time_s").get<double>();
  for (int i = 0; i < 2; ++i) {
    for (int rank = 0; rank < 4; ++rank) ASSERT_EQ(report(rank, i, t).status, 200);
  }
  for (int k = 0; k < 16; ++k) {
    ExpectError(report(3, 1'000'000'000'000LL - k, t), 409, "from job j's current iteration",
                "IterationReport::iteration");
  }
  int version = 1;
  for (int i = 2; i < 20 && version == 1; ++i) {
    for (int rank = 0; rank < 4; ++rank) {
      const HttpResponse r = report(rank, i, rank >= 2 ? 1.3 * t : t);
      ASSERT_EQ(r.status, 200) << r.body;
      version = r.Json().at("plan_version").get<int>();
    }
  }
  EXPECT_EQ(version, 2) << "no plan switch after the bogus reports";
}

// Zeus's /result carries a whole profiling window per rank; the service
// numbers the entries itself, so the window (meant for rank-numbered
// reports) must not refuse them.
TEST_F(ServeTest, ZeusResultsOfAWholeProfilingWindowAreTaken) {
  Start(Options());
  RegisterJob("j", 2, 2);
  ASSERT_EQ(PutProfile("j", TinyProfileCsv()).status, 200);
  ASSERT_EQ(Get("/jobs/j/plan?rank=0&wait_s=30").status, 200);
  const json times = json(std::vector<double>(100, 0.05));
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r =
        Post("/result/j", {{"rank", rank}, {"iter_time", times}, {"iter_energy", json::array()}});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_GE(Get("/jobs/j").Json().at("completed_iterations").get<int>(), 16);
}

// Issue 61, 5: a Zeus result of up to 1 MiB is parsed on the intake thread,
// its request parked meanwhile: a burst of them does not hold the HTTP
// thread (/healthz waited 6.2 s while such bodies were parsed on it). A
// malformed one is still answered in Zeus's terms, naming its field.
TEST_F(ServeTest, ZeusResultsOfAMebibyteAreReadOffTheHttpThread) {
  Start(Options());
  RegisterJob("j", 2, 2);
  ASSERT_EQ(PutProfile("j", TinyProfileCsv()).status, 200);
  ASSERT_EQ(Get("/jobs/j/plan?rank=0&wait_s=30").status, 200);
  std::string times = "[";
  while (times.size() < (1u << 20) - 4096) times += "0.0500000000000001,";
  times.back() = ']';
  auto body = [&](int rank) {
    return "{\"rank\":" + std::to_string(rank) + ",\"iter_time\":" + times + ",\"iter_energy\":[]}";
  };
  ASSERT_GT(body(0).size(), 1000'000u);
  HealthzSampler sampler(port());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<HttpResponse>> posts;
  for (int k = 0; k < 16; ++k) {
    posts.push_back(std::async(std::launch::async, [&, k] {
      return Http(port(), "POST", "/result/j", body(k % 4), {{"Content-Type", "application/json"}});
    }));
  }
  int ok = 0;
  for (auto& f : posts) {
    const HttpResponse r = f.get();
    EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
    ok += r.status == 200;
  }
  const double took = SecondsSince(start);
  const std::vector<double> latencies = sampler.Stop();
  ASSERT_FALSE(latencies.empty());
  std::printf(
      "[hardening] 16 Zeus results of %.2f MB each: %d answered 200 in %.2f s; /healthz "
      "median %.1f ms, max %.1f ms (%zu samples)\n",
      body(0).size() / 1e6, ok, took, latencies[latencies.size() / 2] * 1e3, latencies.back() * 1e3,
      latencies.size());
  EXPECT_LT(latencies[latencies.size() * 99 / 100], 0.25);
  // Off the HTTP thread, a refusal is still Zeus's, naming the field.
  std::string bad = body(0);
  bad.replace(bad.find("\"iter_energy\":[]"), 16, "\"iter_energy\":[1.0]");
  ExpectError(Http(port(), "POST", "/result/j", bad, {{"Content-Type", "application/json"}}), 422,
              "ProfilingResult::iter_energy has 1 entries but iter_time has",
              "ProfilingResult::iter_energy");
}

// The promise that memory and the database never disagree, through the
// service with a failing store: in a child process whose file-size limit
// (RLIMIT_FSIZE, SIGXFSZ ignored) stops SQLite from writing a large
// profile, the upload is refused (500, nothing changed), the job in memory
// is still waiting for its profile, and a restart from the database finds
// it the same; with the limit lifted the same upload is taken.
TEST(ServeStoreFailure, AFailedWriteChangesNeitherMemoryNorTheDatabase) {
  const std::string dir =
      ::testing::TempDir() + "joulepipe-store-failure-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = dir + "/state.sqlite";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int failures = 0;
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) {
        std::fprintf(stderr, "child: FAILED: %s\n", what.c_str());
        ++failures;
      }
    };
    ::signal(SIGXFSZ, SIG_IGN);
    ServerOptions o;
    o.port = 0;
    o.db_path = db;
    const std::string csv = BigProfileCsv(2, 9000);  // about 1.9 MB
    {
      Server server(o);
      const int port = server.port();
      check(Http(port, "POST", "/jobs", JobBody("j", 2, 1).dump()).status == 200, "job");
      for (int p = 0; p < 2; ++p) {
        check(Http(port, "POST", "/jobs/j/ranks", Rank(p, 0, p).dump()).status == 200, "rank");
      }
      rlimit limit{};
      ::getrlimit(RLIMIT_FSIZE, &limit);
      rlimit small = limit;
      small.rlim_cur = 512 * 1024;  // the database and its WAL stop growing here
      ::setrlimit(RLIMIT_FSIZE, &small);
      const HttpResponse r =
          Http(port, "PUT", "/jobs/j/profile", csv, {{"Content-Type", "text/csv"}});
      check(r.status == 500, "upload refused with 500 (got " + std::to_string(r.status) + ")");
      check(r.body.find("nothing was changed") != std::string::npos, "message: " + r.body);
      const json status = Http(port, "GET", "/jobs/j").Json();
      check(status.at("phase") == "waiting_for_profile",
            "memory after the failed write: " + status.at("phase").dump());
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    {
      Server server(o);  // replayed from the database
      const int port = server.port();
      check(Http(port, "GET", "/jobs/j").Json().at("phase") == "waiting_for_profile",
            "restored phase");
      check(Http(port, "PUT", "/jobs/j/profile", csv, {{"Content-Type", "text/csv"}}).status == 200,
            "the same upload with the limit lifted");
    }
    std::fflush(stderr);
    ::_exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "see the child's lines above";
  fs::remove_all(dir);
}

// Registers a 2-stage job of `microbatches` with its two ranks and the tiny
// profile: it is queued for planning at once.
void RegisterPlannable(ServeTest* t, int port, const std::string& id, int microbatches) {
  json body = JobBody(id, 2, 1);
  body["microbatches"] = microbatches;
  ASSERT_EQ(Http(port, "POST", "/jobs", body.dump()).status, 200);
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(Http(port, "POST", "/jobs/" + id + "/ranks", Rank(p, 0, p).dump()).status, 200);
  }
  ASSERT_EQ(Http(port, "PUT", "/jobs/" + id + "/profile", TinyProfileCsv(),
                 {{"Content-Type", "text/csv"}})
                .status,
            200);
  (void)t;
}

std::string PlanningState(int port, const std::string& id) {
  const HttpResponse r = Http(port, "GET", "/jobs/" + id);
  return r.status == 200 ? r.Json().at("planning").at("state").get<std::string>() : "?";
}

// Issue 61, 8: a full disk while a plan was stored left the job unplanned
// until a restart, even after space returned. Now the job is planned again
// after a backoff, and planned once the store works again.
TEST(ServeStoreFailure, APlanThatCouldNotBeStoredIsPlannedAgainOnceTheStoreWorks) {
  const std::string dir =
      ::testing::TempDir() + "joulepipe-store-retry-" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int failures = 0;
    auto check = [&](bool ok, const std::string& what) {
      if (!ok) {
        std::fprintf(stderr, "child: FAILED: %s\n", what.c_str());
        ++failures;
      }
    };
    ::signal(SIGXFSZ, SIG_IGN);
    std::mutex mu;
    std::vector<std::string> log;
    auto logged = [&](const std::string& part) {
      std::lock_guard<std::mutex> lock(mu);
      for (const std::string& line : log) {
        if (line.find(part) != std::string::npos) return true;
      }
      return false;
    };
    ServerOptions o;
    o.port = 0;
    o.db_path = dir + "/state.sqlite";
    o.log = [&](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      log.push_back(line);
    };
    {
      Server server(o);
      const int port = server.port();
      rlimit limit{};
      ::getrlimit(RLIMIT_FSIZE, &limit);
      RegisterPlannable(nullptr, port, "j", 600);  // a few seconds of solving
      rlimit full = limit;
      full.rlim_cur = 4096;  // the disk is full: no file grows
      ::setrlimit(RLIMIT_FSIZE, &full);
      check(WaitFor([&] { return logged("the plan could not be stored"); }, 120),
            "the plan's write failed");
      check(Http(port, "GET", "/jobs/j").Json().at("phase") != "planned", "not planned");
      ::setrlimit(RLIMIT_FSIZE, &limit);  // space again
      check(WaitFor([&] { return Http(port, "GET", "/jobs/j").Json().at("phase") == "planned"; },
                    120),
            "planned once the store works again, without a restart");
      check(logged("planning again (its plan could not be stored before)"), "said");
    }
    {
      Server server(o);  // and it was stored
      check(Http(server.port(), "GET", "/jobs/j").Json().at("phase") == "planned",
            "restored planned");
    }
    std::fflush(stderr);
    ::_exit(failures == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "see the child's lines above";
  fs::remove_all(dir);
}

// Issue 24, 4: a heavy job (many microbatches) kept the only planner busy
// for minutes while a light job queued behind it got no plan. Now one
// planner stays free for light jobs.
TEST_F(ServeTest, ALightJobIsPlannedWhileAHeavyOneIs) {
  ServerOptions o = Options();
  o.plan_time_limit_s = 60;
  Start(std::move(o));
  RegisterPlannable(this, port(), "heavy", 1'500);  // ~10 s of solving: heavy
  ASSERT_TRUE(WaitFor([&] { return PlanningState(port(), "heavy") == "running"; }, 10));
  const auto start = std::chrono::steady_clock::now();
  RegisterPlannable(this, port(), "light", 4);
  const HttpResponse plan = Get("/jobs/light/plan?rank=0&wait_s=30");
  const double took = SecondsSince(start);
  ASSERT_EQ(plan.status, 200) << plan.body;
  EXPECT_LT(took, 2.0) << "the light job's plan took " << took << " s";
  // The heavy one was still being solved (else this proves nothing).
  EXPECT_EQ(PlanningState(port(), "heavy"), "running");
  const json status = Get("/jobs/heavy").Json().at("planning");
  EXPECT_EQ(status.at("heavy"), true);
  EXPECT_EQ(status.at("instructions"), 6'000);
  std::printf("[hardening] light job planned in %.3f s while the heavy one was planning\n", took);
}

// Registers a job of `stages` stages x `microbatches` on a grid of
// `resolution_s`, with its ranks and a profile measured at `settings`
// clocks (WideProfileCsv): queued for planning at once.
void RegisterWide(int port, const std::string& id, int stages, int microbatches, int settings,
                  double resolution_s) {
  json body = JobBody(id, stages, 1);
  body["microbatches"] = microbatches;
  body["resolution_s"] = resolution_s;
  ASSERT_EQ(Http(port, "POST", "/jobs", body.dump()).status, 200);
  for (int p = 0; p < stages; ++p) {
    ASSERT_EQ(Http(port, "POST", "/jobs/" + id + "/ranks", Rank(p, 0, p).dump()).status, 200);
  }
  const HttpResponse r = Http(port, "PUT", "/jobs/" + id + "/profile",
                              WideProfileCsv(stages, settings), {{"Content-Type", "text/csv"}});
  ASSERT_EQ(r.status, 200) << r.body;
}

// Issue 41, 5: two jobs of few instructions but profiles of 400 clock
// settings were rated light (instructions x deadlines), took both planners
// for minutes, and a normal light job waited 26 s. The estimate now counts
// the clock settings: they are heavy, and one planner stays free.
TEST_F(ServeTest, ClockSettingsMakeAJobHeavy) {
  ServerOptions o = Options();
  o.plan_time_limit_s = 120;
  Start(std::move(o));
  RegisterWide(port(), "wide1", 8, 4, 400, 0.001);
  RegisterWide(port(), "wide2", 8, 4, 400, 0.001);
  ASSERT_TRUE(WaitFor(
      [&] {
        return PlanningState(port(), "wide1") == "running" ||
               PlanningState(port(), "wide2") == "running";
      },
      10));
  for (const char* id : {"wide1", "wide2"}) {
    const json status = Get(std::string("/jobs/") + id).Json().at("planning");
    EXPECT_EQ(status.at("heavy"), true) << id << ": " << status.dump();
  }
  const auto start = std::chrono::steady_clock::now();
  RegisterPlannable(this, port(), "light", 4);
  const HttpResponse plan = Get("/jobs/light/plan?rank=0&wait_s=60");
  const double took = SecondsSince(start);
  ASSERT_EQ(plan.status, 200) << plan.body;
  EXPECT_LT(took, 3.0) << "the light job's plan took " << took << " s";
  // At most one of the wide jobs was solving (the other waited for the heavy slot).
  const int running =
      (PlanningState(port(), "wide1") == "running") + (PlanningState(port(), "wide2") == "running");
  EXPECT_LE(running, 1);
  std::printf("[hardening] light job planned in %.3f s beside two jobs of 400 clock settings\n",
              took);
}

// Fairness when the estimate is wrong: a job rated light whose solve
// outruns ServerOptions::light_solve_budget_s while another job waits
// yields (cancelled, queued again as heavy); the waiting job is planned,
// then the yielded one.
TEST_F(ServeTest, ALightSolveOverItsBudgetYieldsToAWaitingJob) {
  ServerOptions o = Options();
  o.planners = 1;
  o.light_solve_budget_s = 0.05;
  o.plan_time_limit_s = 120;
  Start(std::move(o));
  // The light job's ranks first: its upload is then the one request
  // between the slow job's solve starting and the light job's queueing.
  ASSERT_EQ(Post("/jobs", JobBody("light", 2, 1)).status, 200);
  for (int p = 0; p < 2; ++p) ASSERT_EQ(Post("/jobs/light/ranks", Rank(p, 0, p)).status, 200);
  // Rated light (about 0.6 s of solving on a 2-core machine): over the
  // budget, not over the threshold.
  RegisterWide(port(), "slow", 8, 16, 32, 0.004);
  ASSERT_TRUE(WaitFor([&] { return PlanningState(port(), "slow") == "running"; }, 10));
  EXPECT_EQ(Get("/jobs/slow").Json().at("planning").at("heavy"), false);
  ASSERT_EQ(PutProfile("light", TinyProfileCsv()).status, 200);
  const HttpResponse light = Get("/jobs/light/plan?rank=0&wait_s=60");
  ASSERT_EQ(light.status, 200) << light.body;
  EXPECT_TRUE(Logged("job slow: planning ran")) << "the slow job did not yield";
  EXPECT_EQ(Get("/jobs/slow").Json().at("planning").at("heavy"), true);
  const HttpResponse slow = Get("/jobs/slow/plan?rank=0&wait_s=120");
  EXPECT_EQ(slow.status, 200) << slow.body;
}

TEST_F(ServeTest, TheLightSolveBudgetIsChecked) {
  ServerOptions o = Options();
  o.light_solve_budget_s = 0;
  try {
    Start(o);
    ADD_FAILURE() << "light_solve_budget_s = 0 was taken";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::light_solve_budget_s");
  }
}

// A solve over its time limit is cancelled; the job fails with a message
// saying how to plan faster, the failure is counted, and a restart does not
// plan it again (it is stored).
TEST_F(ServeTest, PlanningOverItsTimeLimitFailsTheJobForGood) {
  const std::string db = (dir_ / "state.sqlite").string();
  ServerOptions o = Options();
  o.db_path = db;
  o.plan_time_limit_s = 0.5;
  Start(o);
  RegisterPlannable(this, port(), "heavy", 1'500);
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r = Get("/jobs/heavy/plan?rank=0&wait_s=60");
  const double took = SecondsSince(start);
  ExpectError(r, 409, "longer than its time limit of 0.5 s", nullptr);
  EXPECT_LT(took, 10.0);
  EXPECT_NE(r.Json().at("error").get<std::string>().find("JobConfig::resolution_s"),
            std::string::npos);
  const std::string metrics = Get("/metrics").body;
  EXPECT_NE(metrics.find("joulepipe_plan_timeouts_total 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("joulepipe_plan_time_limit_seconds 0.5"), std::string::npos);
  server_.reset();
  Start(o);
  EXPECT_EQ(Get("/jobs/heavy").Json().at("phase"), "failed");
  EXPECT_EQ(PlanningState(port(), "heavy"), "idle");
}

TEST_F(ServeTest, PlannerOptionsAreChecked) {
  ServerOptions o = Options();
  o.planners = 0;
  try {
    Start(o);
    ADD_FAILURE() << "planners = 0 was taken";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::planners");
  }
  o = Options();
  o.plan_time_limit_s = 0;
  try {
    Start(o);
    ADD_FAILURE() << "plan_time_limit_s = 0 was taken";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::plan_time_limit_s");
  }
}

}  // namespace
}  // namespace joulepipe::serve

// ---- Scale: what a rank costs the server is bounded by options ----------------

namespace joulepipe::serve {
namespace {

// One request on a new connection without "Connection: close"; the answer's
// headers (lower-cased names) once they are in, the socket left open in *fd.
std::map<std::string, std::string> KeptAliveHeaders(int port, const std::string& target, int* fd) {
  *fd = Connect(port);
  std::map<std::string, std::string> headers;
  if (*fd < 0) return headers;
  testing::SendAll(*fd, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  std::string raw;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (raw.find("\r\n\r\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{*fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(*fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<std::size_t>(n));
  }
  std::size_t at = raw.find("\r\n");
  headers[":status"] = raw.substr(0, at);
  while (at != std::string::npos) {
    const std::size_t next = raw.find("\r\n", at + 2);
    const std::string line = raw.substr(at + 2, next - at - 2);
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    headers[name] = colon == std::string::npos ? "" : line.substr(colon + 2);
    at = next;
  }
  return headers;
}

}  // namespace

// Over max_waiting held long polls, a wait is answered at once with when to
// come back, and its connection is closed: a 16,384-rank job's start does
// not hold a connection per rank.
TEST_F(ServeTest, WaitsOverTheLimitAreToldWhenToComeBack) {
  ServerOptions o = Options();
  o.max_waiting = 2;
  Start(o);
  RegisterJob("big", 1, 4);  // no profile: no plan comes
  std::vector<std::future<HttpResponse>> held;
  for (int rank = 0; rank < 2; ++rank) {
    held.push_back(std::async(std::launch::async, [&, rank] {
      return Get("/jobs/big/plan?rank=" + std::to_string(rank) + "&wait_s=1.5");
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return server_->waiting_requests() == 2; }, 10));
  std::vector<int> after_s;
  for (int rank = 2; rank < 4; ++rank) {
    const auto start = std::chrono::steady_clock::now();
    const HttpResponse r = Get("/jobs/big/plan?rank=" + std::to_string(rank) + "&wait_s=30");
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1);
    ASSERT_EQ(r.status, 204) << r.body;
    EXPECT_EQ(r.Header("connection"), "close");
    after_s.push_back(std::atoi(r.Header("retry-after").c_str()));
  }
  // max_waiting (2) come back per second at most, none sooner than 1 s.
  EXPECT_EQ(after_s, (std::vector<int>{1, 2}));
  EXPECT_EQ(server_->waiting_requests(), 2);
  const std::string metrics = Get("/metrics").body;
  EXPECT_NE(metrics.find("joulepipe_plan_waits_deferred_total 2\n"), std::string::npos);
  EXPECT_NE(metrics.find("joulepipe_plan_waits_held 2\n"), std::string::npos);
  EXPECT_NE(metrics.find("joulepipe_plan_waits_max 2\n"), std::string::npos);
  // The held ones end at their deadline (204, no Retry-After): room again.
  for (auto& f : held) {
    const HttpResponse r = f.get();
    EXPECT_EQ(r.status, 204);
    EXPECT_EQ(r.Header("retry-after"), "");
  }
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse again = Get("/jobs/big/plan?rank=3&wait_s=0.3");
  EXPECT_EQ(again.status, 204);
  EXPECT_EQ(again.Header("retry-after"), "");
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.25);
  // The limit is checked against the connection limit, naming the field.
  ServerOptions bad = Options();
  bad.max_connections = 8;
  bad.max_waiting = 9;
  try {
    Server s(bad);
    ADD_FAILURE() << "max_waiting over max_connections was accepted";
  } catch (const model::InputError& e) {
    EXPECT_EQ(e.field(), "ServerOptions::max_waiting");
  }
}

// Above keep_alive_connections open connections, every answer closes its
// connection; below, connections are kept.
TEST_F(ServeTest, AnswersCloseTheirConnectionOnlyWhenConnectionsAreScarce) {
  ServerOptions o = Options();
  o.keep_alive_connections = 1;
  Start(o);
  int first = -1, second = -1;
  auto h = KeptAliveHeaders(port(), "/healthz", &first);
  EXPECT_EQ(h[":status"].rfind("HTTP/1.1 200", 0), 0u) << h[":status"];
  EXPECT_EQ(h.count("connection"), 0u) << h["connection"];
  h = KeptAliveHeaders(port(), "/healthz", &second);  // two open now
  EXPECT_EQ(h[":status"].rfind("HTTP/1.1 200", 0), 0u) << h[":status"];
  EXPECT_EQ(h["connection"], "close");
  ::close(first);
  ::close(second);
  const std::string metrics = Get("/metrics").body;
  EXPECT_NE(metrics.find("joulepipe_connections_closed_for_room_total "), std::string::npos);
  EXPECT_EQ(metrics.find("joulepipe_connections_closed_for_room_total 0\n"), std::string::npos);
}

// Issue 61, 2 and 3: an upload of a measured profile whose rows are half
// implausible, padded with comment lines. The rule for its rows runs outside
// the jobs' lock and says what it left out in a bounded number of notes
// (one note per row made an 18 MB upload hold the lock for 21.7 s and
// GET /jobs/{id} answer 172.6 MB); the store keeps the rows, not the bytes
// (60 MiB of padding per job was 60 MiB of database and of memory).
TEST_F(ServeTest, AHalfImplausibleProfileIsSaidInFewNotesAndStoredWithoutItsPadding) {
  ServerOptions o = Options();
  o.db_path = (dir_ / "state.sqlite").string();
  Start(std::move(o));
  ASSERT_EQ(Post("/jobs", JobBody("odd", 80, 1)).status, 200);  // no ranks: nothing is planned
  std::string csv = "# source: measured\n";
  for (int i = 0; i < 80'000; ++i) csv += "# padding padding padding padding padding padding\n";
  const std::size_t padding = csv.size();
  csv += "stage,instruction,frequency,time,energy\n";
  char row[128];
  int rows = 0;
  for (int s = 0; s < 80; ++s) {
    for (int k = 0; k < 1000; ++k) {
      const int mhz = 1800 - k;
      // Every other clock draws 25x the power of its neighbours: no
      // instruction's clocks differ in power by more than 20x.
      const double power = k % 2 == 0 ? 100 : 2500;
      for (const char* kind : {"forward", "backward"}) {
        std::snprintf(row, sizeof row, "%d,%s,%d,%.9f,%.9f\n", s, kind, mhz, 0.01, 0.01 * power);
        csv += row;
        ++rows;
      }
    }
  }
  HealthzSampler sampler(port());
  const HttpResponse r = PutProfile("odd", csv);
  const std::vector<double> latencies = sampler.Stop();
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 500);
  EXPECT_EQ(r.Json().at("rows"), rows);
  const HttpResponse status = Get("/jobs/odd");
  ASSERT_EQ(status.status, 200);
  const json notes = status.Json().at("profile_notes");
  std::uintmax_t stored = 0;  // the database with its write-ahead log
  for (const fs::directory_entry& f : fs::directory_iterator(dir_)) {
    if (f.path().filename().string().rfind("state.sqlite", 0) == 0) stored += f.file_size();
  }
  std::printf(
      "[hardening] %.1f MB upload (%zu rows, half implausible, %.1f MB padding): %zu notes, "
      "GET /jobs/{id} %zu bytes, /healthz max %.1f ms, database %.1f MB\n",
      csv.size() / 1e6, static_cast<std::size_t>(rows), padding / 1e6, notes.size(),
      status.body.size(), latencies.empty() ? -1 : latencies.back() * 1e3, stored / 1e6);
  EXPECT_LE(notes.size(), 2 * model::kMaxRowNotes + 2);
  EXPECT_NE(notes.dump().find("more rows were left out"), std::string::npos) << notes.dump();
  EXPECT_LT(status.body.size(), 64'000u);
  ASSERT_FALSE(latencies.empty());
  EXPECT_LT(latencies[latencies.size() * 99 / 100], 0.25);
  // The rows are stored, not the padding (nor the upload's number format).
  EXPECT_GT(stored, 0u);
  EXPECT_LT(stored, csv.size() - padding / 2);
}

// Issue 61, 4: bodies still being received count against a budget
// (kMaxReceivingBytes), reserved from their declared length once their
// headers are in: eight unfinished 60 MiB uploads held 553 MB until their
// deadline. A third 60 MiB upload beside two unfinished ones is answered
// 503 with Retry-After before any of its body is read; once they hang up,
// the budget is back.
TEST_F(ServeTest, UnfinishedUploadsCountAgainstTheBodiesBeingReceived) {
  Start(Options());
  ASSERT_EQ(Post("/jobs", JobBody("slow", 2, 1)).status, 200);
  const std::string length = std::to_string(60u << 20);
  std::vector<int> open;
  for (int i = 0; i < 2; ++i) {
    const int fd = Connect(port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendRequest(fd, "PUT", "/jobs/slow/profile", "stage,instruction",
                            {{"Content-Type", "text/csv"}, {"Content-Length", length}}));
    open.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both headers in
  const int third = Connect(port());
  ASSERT_GE(third, 0);
  ASSERT_TRUE(SendRequest(third, "PUT", "/jobs/slow/profile", "",
                          {{"Content-Type", "text/csv"}, {"Content-Length", length}}));
  const HttpResponse busy = ReadResponse(third, 10);
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_EQ(busy.headers.count("retry-after"), 1u);
  EXPECT_NE(busy.body.find("request bodies already"), std::string::npos) << busy.body;
  EXPECT_EQ(Get("/healthz").status, 200);  // no body: served meanwhile
  for (int fd : open) ::close(fd);
  // The reservations are given back as MHD closes the connections.
  EXPECT_TRUE(WaitFor([&] { return PutProfile("slow", TinyProfileCsv()).status != 503; }, 10));
}

}  // namespace joulepipe::serve
