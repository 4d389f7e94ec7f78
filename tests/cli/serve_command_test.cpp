// `joulepipe serve` as a process: its flags and messages, a clean stop on
// SIGTERM, and the restart acceptance test: kill -9 mid-job, restart
// on the same database, every rank gets the same plan and no job is lost.
#include <signal.h>
#include <sys/wait.h>

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../serve/http_test_client.hpp"
#include "cli_test_support.hpp"
#include "process_test_support.hpp"

namespace joulepipe::cli::testing {
namespace {

using nlohmann::json;
using serve::testing::Encode;
using serve::testing::Http;
using serve::testing::HttpResponse;

class ServeCommandTest : public ScratchDirTest {
 protected:
  ServeCommandTest() : ScratchDirTest("serve") {}

  // Starts `joulepipe serve --port 0 ...`; returns its pid and sets port_
  // from the line it prints once listening.
  pid_t StartServe(const std::vector<std::string>& extra, int run) {
    std::vector<std::string> args = {"serve", "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    out_ = root_ / ("serve-" + std::to_string(run) + ".out");
    err_ = root_ / ("serve-" + std::to_string(run) + ".err");
    const pid_t pid = StartCli(args, out_, err_);
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+) ");
    std::smatch m;
    port_ = 0;
    WaitUntil(
        [&] {
          const std::string text = Slurp(out_);
          if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
          return port_ != 0 || !StillRunning(pid);
        },
        20);
    EXPECT_NE(port_, 0) << Slurp(out_) << Slurp(err_);
    return pid;
  }

  HttpResponse Post(const std::string& target, const json& body) {
    return Http(port_, "POST", target, body.dump());
  }

  fs::path out_, err_;
  int port_ = 0;
};

json Rank(int rank, int dp, int pp) {
  return {{"rank", rank},
          {"dp_rank", dp},
          {"pp_rank", pp},
          {"tp_rank", 0},
          {"available_frequencies", {1410, 1200, 1000}}};
}

json Job(const std::string& id) {
  return {{"job_id", id},       {"pp_degree", 2},    {"dp_degree", 2},    {"tp_degree", 1},
          {"schedule", "1f1b"}, {"microbatches", 4}, {"p_block_w", 60.0}, {"resolution_s", 0.0005}};
}

TEST_F(ServeCommandTest, KillNineMidJobLosesNothing) {
  const std::string db = (root_ / "state.sqlite").string();
  pid_t pid = StartServe({"--db", db}, 1);
  ASSERT_NE(port_, 0);
  EXPECT_NE(Slurp(out_).find("(db " + db + ", 0 jobs restored)"), std::string::npos) << Slurp(out_);

  // A planned job mid-run (with a straggler switch) and one waiting for its profile.
  const std::string id = "2025-01-01-00-00-00+dp2+pp2+tp1+joulepipe";  // '+' as in Zeus ids
  ASSERT_EQ(Post("/jobs", Job(id)).status, 200);
  ASSERT_EQ(Post("/jobs", Job("waiting")).status, 200);
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(Post("/jobs/" + Encode(id) + "/ranks", Rank(rank, rank / 2, rank % 2)).status, 200);
    ASSERT_EQ(Post("/jobs/waiting/ranks", Rank(rank, rank / 2, rank % 2)).status, 200);
  }
  ASSERT_EQ(Http(port_, "PUT", "/jobs/" + Encode(id) + "/profile", serve::testing::TinyProfileCsv(),
                 {{"Content-Type", "text/csv"}})
                .status,
            200);
  std::vector<json> plans;
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r = Http(
        port_, "GET", "/jobs/" + Encode(id) + "/plan?rank=" + std::to_string(rank) + "&wait_s=30");
    ASSERT_EQ(r.status, 200) << r.body;
    plans.push_back(r.Json());
  }
  const double t = plans[0].at("predicted").at("time_s");
  int version = 1;
  for (int it = 0; it < 4; ++it) {
    for (int rank = 0; rank < 4; ++rank) {
      const HttpResponse r =
          Post("/jobs/" + Encode(id) + "/iterations",
               {{"rank", rank}, {"iteration", it}, {"time_s", rank / 2 == 1 ? 1.3 * t : t}});
      ASSERT_EQ(r.status, 200) << r.body;
      version = r.Json().at("plan_version");
    }
  }
  ASSERT_EQ(version, 2);
  plans.clear();
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r =
        Http(port_, "GET", "/jobs/" + Encode(id) + "/plan?rank=" + std::to_string(rank));
    ASSERT_EQ(r.status, 200) << r.body;
    plans.push_back(r.Json());
  }
  const std::string log = Slurp(out_);
  EXPECT_NE(log.find("job " + id + ": planned in"), std::string::npos) << log;
  EXPECT_NE(log.find("job " + id + ": plan version 2 from iteration"), std::string::npos) << log;

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_EQ(ShellCode(WaitStatus(pid, 10)), 128 + SIGKILL);

  pid = StartServe({"--db", db}, 2);
  ASSERT_NE(port_, 0);
  EXPECT_NE(Slurp(out_).find("(db " + db + ", 2 jobs restored)"), std::string::npos) << Slurp(out_);
  for (int rank = 0; rank < 4; ++rank) {
    const HttpResponse r =
        Http(port_, "GET", "/jobs/" + Encode(id) + "/plan?rank=" + std::to_string(rank));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.Json(), plans[rank]) << "rank " << rank;
  }
  // Ranks continue reporting; the waiting job is still there and plans once
  // its profile arrives.
  EXPECT_EQ(
      Post("/jobs/" + Encode(id) + "/iterations", {{"rank", 0}, {"iteration", 4}, {"time_s", t}})
          .Json()
          .at("plan_version"),
      2);
  const json jobs = Http(port_, "GET", "/jobs").Json().at("jobs");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].at("job_id"), id);
  EXPECT_EQ(jobs[1].at("job_id"), "waiting");
  EXPECT_EQ(jobs[1].at("phase"), "waiting_for_profile");
  EXPECT_EQ(jobs[1].at("registered_ranks"), 4);
  ASSERT_EQ(Http(port_, "PUT", "/jobs/waiting/profile", serve::testing::TinyProfileCsv()).status,
            200);
  EXPECT_EQ(Http(port_, "GET", "/jobs/waiting/plan?rank=3&wait_s=30").status, 200);

  // SIGTERM: a clean stop, exit 0.
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(ShellCode(WaitStatus(pid, 20)), 0) << Slurp(err_);
  EXPECT_NE(Slurp(out_).find("joulepipe serve: stopped; the state is in " + db), std::string::npos)
      << Slurp(out_);
}

TEST_F(ServeCommandTest, HelpTeachesWithAnExample) {
  const Result r = Run("serve --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--token-file"), std::string::npos);
  EXPECT_NE(r.out.find("curl -s 'localhost:8470/jobs/demo/plan?rank=0&wait_s=60'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Zeus jobs"), std::string::npos);
}

TEST_F(ServeCommandTest, BadFlagsNameTheFlag) {
  Result r = Run("serve --port 70000");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--port must be 0..65535"), std::string::npos) << r.err;
  r = Run("serve --profile x.csv");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("need --microbatches too"), std::string::npos) << r.err;
  Spit(root_ / "empty-token", "\n");
  r = Run("serve --token-file " + Quote((root_ / "empty-token").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--token-file '" + (root_ / "empty-token").string() + "' is empty"),
            std::string::npos)
      << r.err;
  // A guessable token is refused at start (issue 41, item 2).
  Spit(root_ / "short-token", "s3cret\n");
  r = Run("serve --port 0 --token-file " + Quote((root_ / "short-token").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--token-file must be at least 16 bytes (got 6)"), std::string::npos)
      << r.err;
  Spit(root_ / "not.db", "not a database, just text long enough to fill a header page....\n");
  r = Run("serve --port 0 --db " + Quote((root_ / "not.db").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("it is not an SQLite database; give --db a writable file path"),
            std::string::npos)
      << r.err;
  r = Run("serve --port 0 --light-solve-budget 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--light-solve-budget must be > 0 seconds (got 0)"), std::string::npos)
      << r.err;
  r = Run("serve --port 0 --evict-after -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--evict-after must be >= 0"), std::string::npos) << r.err;
}

TEST_F(ServeCommandTest, APortInUseIsNamed) {
  const pid_t pid = StartServe({}, 1);
  ASSERT_NE(port_, 0);
  EXPECT_NE(Slurp(out_).find("db in memory, nothing persists: give --db FILE"), std::string::npos);
  const Result r = Run("serve --port " + std::to_string(port_));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + std::to_string(port_)), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("choose another --port (0 picks a free one)"), std::string::npos) << r.err;
  ::kill(pid, SIGINT);
  EXPECT_EQ(ShellCode(WaitStatus(pid, 20)), 0);
}

}  // namespace
}  // namespace joulepipe::cli::testing
