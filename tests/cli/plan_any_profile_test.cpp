// No profile can blow up `joulepipe plan` (docs/limits.md, "What planning
// costs"): random measured-like profiles (noisy, non-monotone, rows faster
// than the highest clock, equal times, microsecond- to ten-minute-scale rows)
// are planned by the real command, each in its own process under an address
// space limit, and each must finish within its time with its peak memory
// bounded, either planning or refusing with a message whose advice works
// when followed. A profile of this kind (ms-scale rows, two odd clocks) once
// drew the frontier chart with a tick step below an ulp and filled 16 GB.
//
// JOULEPIPE_PLAN_FUZZ_PROFILES sets how many profiles (default 150; the
// closing figures in the issue used 1,000).
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.hpp"

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDirTest;
using testing::Slurp;
using testing::Spit;

// The bounds the test holds `plan` to on these small jobs (at most 4 stages
// x 8 microbatches): far above what it needs (about 10 MB and 0.05 s), far
// below what a runaway reaches.
constexpr long kMaxRssKb = 512 * 1024;
constexpr double kMaxSeconds = 60;
constexpr rlim_t kAddressSpaceLimit = 4ull << 30;

struct PlanRun {
  int exit_code = -1;  // -1: killed by a signal
  int signal = 0;
  long max_rss_kb = 0;
  double seconds = 0;
  std::string err;
};

// Runs the CLI with `args` in a child limited to kAddressSpaceLimit and
// killed after kMaxSeconds; its stdout is dropped, stderr kept.
PlanRun RunPlan(const std::vector<std::string>& args, const fs::path& err_file) {
  std::fflush(stdout);
  std::fflush(stderr);
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const rlimit as{kAddressSpaceLimit, kAddressSpaceLimit};
    ::setrlimit(RLIMIT_AS, &as);
    const rlimit cpu{static_cast<rlim_t>(kMaxSeconds), static_cast<rlim_t>(kMaxSeconds)};
    ::setrlimit(RLIMIT_CPU, &cpu);
    if (!std::freopen("/dev/null", "w", stdout)) ::_exit(98);
    if (!std::freopen(err_file.c_str(), "w", stderr)) ::_exit(98);
    std::vector<char*> argv{const_cast<char*>(JOULEPIPE_CLI)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(JOULEPIPE_CLI, argv.data());
    ::_exit(99);
  }
  PlanRun run;
  int status = 0;
  rusage usage{};
  // A wall-clock limit too (a child that sleeps would not spend CPU time).
  for (;;) {
    const pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() - started > std::chrono::duration<double>(kMaxSeconds)) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.max_rss_kb = usage.ru_maxrss;
  if (WIFEXITED(status)) {
    run.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    run.signal = WTERMSIG(status);
  }
  run.err = Slurp(err_file);
  return run;
}

// A profile as the in-situ profiler writes one, with what real measurements
// and broken ones do to it.
struct Generated {
  std::string csv;
  int stages = 1;
  int microbatches = 1;
  std::string schedule = "1f1b";
  std::string what;  // for failure messages
};

Generated MeasuredLikeProfile(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  auto pick = [&](auto... values) {
    const double options[] = {static_cast<double>(values)...};
    return options[rng() % sizeof...(values)];
  };
  Generated g;
  g.stages = 1 + static_cast<int>(rng() % 4);
  g.microbatches = 1 + static_cast<int>(rng() % 8);
  g.schedule = rng() % 4 == 0 ? "gpipe" : "1f1b";
  // Instruction time scale: microseconds to ten minutes.
  const double scale = pick(2e-5, 1e-3, 1.3e-3, 0.05, 5.0, 600.0);
  const double noise = pick(0.0, 0.02, 0.1, 0.4, 1.0);  // log-normal spread of times
  const int top = static_cast<int>(pick(1275, 1410, 1980, 2100));
  const int clocks = 1 + static_cast<int>(rng() % 8);
  const int step = static_cast<int>(pick(15, 60, 135));
  const double p_block = 40 + 200 * u(rng);
  std::normal_distribution<double> gauss(0, 1);
  std::string rows;
  for (int s = 0; s < g.stages; ++s) {
    for (const char* kind : {"forward", "backward"}) {
      const double base = scale * (0.5 + 1.5 * u(rng)) * (kind[0] == 'b' ? 2 : 1);
      const double compute = 0.2 + 0.7 * u(rng);    // share that scales with 1/f
      const double top_power = 150 + 550 * u(rng);  // W at the highest clock
      const double exponent = 1 + 1.5 * u(rng);
      double previous = 0;
      for (int c = 0; c < clocks; ++c) {
        const int mhz = top - c * step;
        if (mhz < 200) break;
        const double ratio = static_cast<double>(top) / mhz;
        double t = base * ((1 - compute) + compute * ratio) * std::exp(noise * gauss(rng));
        if (c > 0 && rng() % 6 == 0) t = previous;           // equal times
        if (rng() % 10 == 0) t *= pick(0.5, 0.8, 1.6, 3.0);  // a wild row
        t = std::clamp(t, 1e-7, 3000.0);
        previous = t;
        const double power = std::clamp(
            top_power * std::pow(1 / ratio, exponent) * std::exp(0.1 * noise * gauss(rng)), 20.0,
            4000.0);
        char row[160];
        std::snprintf(row, sizeof(row), "%d,%s,%d,%.17g,%.17g\n", s, kind, mhz, t, t * power);
        rows += row;
      }
    }
  }
  char head[256];
  std::snprintf(head, sizeof(head),
                "# joulepipe profile\n# gpu: NVIDIA A100-SXM4-80GB\n# p_block_w: %.6g\n"
                "# source: measured\nstage,instruction,frequency,time,energy\n",
                p_block);
  g.csv = head + rows;
  char what[160];
  std::snprintf(what, sizeof(what),
                "%s %d stages x %d microbatches, scale %g s, noise %g, %d clocks",
                g.schedule.c_str(), g.stages, g.microbatches, scale, noise, clocks);
  g.what = what;
  return g;
}

class PlanAnyProfileTest : public ScratchDirTest {
 protected:
  PlanAnyProfileTest() : ScratchDirTest("plan-any-profile") {}
};

TEST_F(PlanAnyProfileTest, MemoryAndTimeStayBoundedAndEveryAdviceWorks) {
  int count = 150;
  if (const char* env = std::getenv("JOULEPIPE_PLAN_FUZZ_PROFILES")) count = std::atoi(env);
  std::mt19937_64 rng(20261207);
  long worst_rss = 0;
  double worst_seconds = 0;
  int planned = 0, refused = 0, advised = 0;
  const std::regex advice("use ([0-9.e+-]+) ms or more");
  for (int i = 0; i < count; ++i) {
    const Generated g = MeasuredLikeProfile(rng);
    const fs::path profile = root_ / ("p" + std::to_string(i) + ".csv");
    Spit(profile, g.csv);
    std::vector<std::string> args = {"plan",
                                     "--profile",
                                     profile.string(),
                                     "--schedule",
                                     g.schedule,
                                     "--stages",
                                     std::to_string(g.stages),
                                     "--microbatches",
                                     std::to_string(g.microbatches),
                                     "--out",
                                     (root_ / ("out" + std::to_string(i))).string()};
    PlanRun run = RunPlan(args, root_ / "err.txt");
    std::smatch m;
    if (run.exit_code == 2 && std::regex_search(run.err, m, advice)) {
      // The advice must work: plan again with the resolution it names.
      ++advised;
      args.push_back("--resolution-ms");
      args.push_back(m[1].str());
      run = RunPlan(args, root_ / "err.txt");
      EXPECT_EQ(run.exit_code, 0) << "the advised --resolution-ms " << m[1].str()
                                  << " did not plan profile " << i << " (" << g.what << ")\n"
                                  << run.err;
    }
    worst_rss = std::max(worst_rss, run.max_rss_kb);
    worst_seconds = std::max(worst_seconds, run.seconds);
    ASSERT_EQ(run.signal, 0) << "profile " << i << " (" << g.what << ") killed by signal "
                             << run.signal << "\n"
                             << g.csv << run.err;
    ASSERT_LE(run.max_rss_kb, kMaxRssKb) << "profile " << i << " (" << g.what << ")\n" << g.csv;
    ASSERT_LE(run.seconds, kMaxSeconds) << "profile " << i << " (" << g.what << ")\n" << g.csv;
    if (run.exit_code == 0) {
      ++planned;
      // No plan faster than all-max clocks from the same rows (the one rule
      // for a measured profile's rows).
      const nlohmann::json summary =
          nlohmann::json::parse(Slurp(root_ / ("out" + std::to_string(i)) / "summary.json"));
      const double baseline = summary["baseline"]["time_s"].get<double>();
      EXPECT_GE(summary["frontier"]["fastest_time_s"].get<double>(), baseline * (1 - 1e-9))
          << "profile " << i << " (" << g.what << ")\n"
          << g.csv;
      EXPECT_GE(summary["chosen"]["slowdown_pct"].get<double>(), -1e-7);
      fs::remove_all(root_ / ("out" + std::to_string(i)));
    } else {
      ++refused;
      if (std::getenv("JOULEPIPE_PLAN_FUZZ_SHOW")) std::printf("refused: %s", run.err.c_str());
      // Refusals are the clear kind (exit 2, a message), never "out of
      // memory" or an internal error.
      EXPECT_EQ(run.exit_code, 2) << "profile " << i << " (" << g.what << ")\n" << g.csv << run.err;
      EXPECT_NE(run.err.find("joulepipe: error: "), std::string::npos) << run.err;
      EXPECT_EQ(run.err.find("out of memory"), std::string::npos) << run.err;
    }
  }
  std::printf(
      "%d profiles: %d planned, %d refused (%d followed a resolution advice); worst peak "
      "RSS %.1f MB, worst time %.2f s\n",
      count, planned, refused, advised, worst_rss / 1024.0, worst_seconds);
  EXPECT_GT(planned, count / 2);
}

}  // namespace
}  // namespace joulepipe::cli
