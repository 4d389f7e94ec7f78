// bench_coord_load: load test of `joulepipe serve` (issue 11, "Acceptance"),
// over loopback HTTP against the real server process.
//
// What it does:
//   1. Starts `joulepipe serve --host 127.0.0.1 --port 0 --db <tmp>/state.sqlite`
//      and reads the port from its "listening on http://127.0.0.1:PORT" line.
//   2. Registers a job (pp 8 x dp R/32 x tp 4, 1F1B, 16 microbatches) and
//      uploads the GPT-3 175B A100-SXM profile (8 stages).
//   3. R simulated ranks (1,024 by default), all driven by one event loop
//      over libcurl's multi interface (a state machine and a socket each, no
//      thread each), register their rank, then at once wait for their plan
//      (after=0, wait_s=120). The server holds up to its --max-waiting
//      waits without a thread each and tells the rest when to come back
//      (204 + Retry-After); those ranks ask again then, as
//      runtime::CoordinatorClient::WaitForPlan does. Measured: the time
//      from the last registration to each rank receiving its plan, and the
//      server's solve time (joulepipe_plan_solve_seconds in /metrics).
//      Transient failures (refused, reset, 5xx) are retried like the
//      runtime client (5 attempts, 0.2 s doubling backoff) and counted.
//   4. N iterations (100 by default), a barrier between them: each rank
//      reports {time_s = its plan's predicted time (x 1.2 for pipeline 3 in
//      iterations 30..59 of 100), energy_j = predicted energy / pp}. When an
//      answer's plan_version rises, the rank fetches its new plan
//      (after=<old>, wait_s=0) and runs it from the next iteration, as
//      runtime::CoordinatedPlan does. A monitor thread GETs the job's status
//      every 100 ms, another scrapes /metrics every 500 ms.
//   5. Samples the server's /proc/<pid>/status every 50 ms: peak RSS
//      (VmHWM) and thread count, also while the plans are awaited; the
//      bench's own thread count is reported separately.
//   6. Prints per route: count, throughput, p50/p99/max latency (client
//      side: send to full answer, including queueing at the server and this
//      process's scheduling; a rank's first request includes its TCP
//      connect), the server's own view from its histograms, the CPU time of
//      server and bench (they share the cores), and PASS/FAIL against the
//      targets:
//        * every rank has its plan within 2 s of the last registration plus
//          the solve time, plus 1 s per --max-waiting ranks told to come
//          back (the server spreads them to that many a second);
//        * p99 < 20 ms for every non-waiting request;
//        * no request failed; every iteration completed;
//        * the server's threads while all plans were awaited: at most 32
//          (a thread per waiting rank would be >= ranks);
//        * with a straggler, the plans switched and switched back.
//      Then SIGTERMs the server and removes the temporary directory.
//
// Bounded: every request has a timeout, and a watchdog (--watchdog-s, 300 by
// default) kills the server and exits 2 if the run has not finished. The
// server gets PR_SET_PDEATHSIG, so it does not outlive the bench.
//
// Usage: bench_coord_load [--server PATH] [--ranks R] [--iterations N]
//                         [--spread-ms S] [--in-memory] [--preconnect]
//                         [--no-keep-alive] [--watchdog-s S] [--profile CSV]
//   --server       the joulepipe binary (default: joulepipe next to this executable)
//   --ranks        a multiple of 32 (pp 8 x tp 4), default 1024
//   --iterations   default 100
//   --spread-ms    each rank waits a random 0..S ms before registering and
//                  before each report (default 0: all ranks send at the same
//                  instant, the worst burst; real ranks start and finish their
//                  iterations over tens to hundreds of ms)
//   --in-memory    run the server without --db (no SQLite file), to tell
//                  the store's share of a route's cost
//   --preconnect   each rank opens its connection (GET /healthz, not counted)
//                  before the registrations, to tell the TCP connect's share
//   --no-keep-alive  one connection per request (keep --iterations small:
//                  every request then uses an ephemeral port)
//   --serve-arg A  appended to the server's command line (repeat it), e.g.
//                  --serve-arg --max-waiting --serve-arg 4096
// Exit status: 0 all targets met, 1 a target missed, 2 the run failed.

#include "coord_load/common.hpp"
#include "coord_load/http_client.hpp"
#include "coord_load/monitors.hpp"
#include "coord_load/proc_metrics.hpp"
#include "coord_load/rank_loop.hpp"
#include "coord_load/report.hpp"
#include "coord_load/server_process.hpp"
#include "coord_load/watchdog.hpp"

namespace {

std::string PathOfSelfDir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

void Usage() {
  std::fprintf(stderr,
               "usage: bench_coord_load [--server PATH] [--ranks R (multiple of %d)] "
               "[--iterations N] [--spread-ms S] [--no-keep-alive] [--in-memory] "
               "[--preconnect] [--watchdog-s S] [--profile CSV] [--serve-arg ARG]...\n",
               kPp * kTp);
}

// The command line into `opt`; false (after the usage line) when it is wrong.
bool ParseOptions(int argc, char** argv, Options& opt) {
  opt.server = PathOfSelfDir() + "/joulepipe";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--server" && has_value) {
      opt.server = argv[++i];
    } else if (a == "--profile" && has_value) {
      opt.profile = argv[++i];
    } else if (a == "--ranks" && has_value) {
      opt.ranks = std::atoi(argv[++i]);
    } else if (a == "--iterations" && has_value) {
      opt.iterations = std::atoi(argv[++i]);
    } else if (a == "--spread-ms" && has_value) {
      opt.spread_ms = std::atoi(argv[++i]);
    } else if (a == "--watchdog-s" && has_value) {
      opt.watchdog_s = std::atof(argv[++i]);
    } else if (a == "--serve-arg" && has_value) {
      opt.serve_args.push_back(argv[++i]);
    } else if (a == "--preconnect") {
      opt.preconnect = true;
    } else if (a == "--in-memory") {
      opt.in_memory = true;
    } else if (a == "--no-keep-alive") {
      opt.keep_alive = false;
    } else {
      Usage();
      return false;
    }
  }
  if (opt.ranks < kPp * kTp || opt.ranks % (kPp * kTp) != 0 || opt.iterations < 1 ||
      opt.spread_ms < 0 || opt.watchdog_s <= 0) {
    Usage();
    return false;
  }
  return true;
}

// The profile's text; false (said) when it cannot be read.
bool ReadProfile(const std::string& path, std::string& csv) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bench_coord_load: cannot read the profile %s\n", path.c_str());
    return false;
  }
  std::ostringstream s;
  s << in.rdbuf();
  csv = s.str();
  return true;
}

// Sockets: one per rank, the monitors', and the server's (it raises its
// own). False (said) when the open-file limit cannot cover `ranks`.
bool RaiseFileLimit(const Options& opt) {
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  const rlim_t want = static_cast<rlim_t>(opt.ranks) * 2 + 256;
  if (nofile.rlim_cur < want) {
    nofile.rlim_cur = std::min(nofile.rlim_max, std::max<rlim_t>(want, 4096));
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (nofile.rlim_cur < static_cast<rlim_t>(opt.ranks) + 64) {
    std::fprintf(stderr, "bench_coord_load: the open-file limit is %llu; %d ranks need more\n",
                 static_cast<unsigned long long>(nofile.rlim_cur), opt.ranks);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Run run;
  Options& opt = run.opt;
  if (!ParseOptions(argc, argv, opt)) return 2;
  run.dp = opt.ranks / (kPp * kTp);
  const int dp = run.dp;
  // The straggler: pipeline 3 (or the last one of fewer), slow in the middle
  // three tenths of the run; none with one pipeline (nothing to compare to).
  run.straggler = dp >= 2 ? std::min(kStragglerPipeline, dp - 1) : -1;
  run.slow_begin = opt.iterations * 3 / 10;
  run.slow_end = opt.iterations * 6 / 10;
  const int straggler = run.straggler;
  const std::int64_t slow_begin = run.slow_begin, slow_end = run.slow_end;

  std::string csv;
  if (!ReadProfile(opt.profile, csv)) return 2;
  if (::access(opt.server.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "bench_coord_load: %s is not an executable (give --server PATH)\n",
                 opt.server.c_str());
    return 2;
  }
  if (!RaiseFileLimit(opt)) return 2;

  char tmpl[] = "/tmp/joulepipe-coord-load-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "bench_coord_load: mkdtemp: %s\n", std::strerror(errno));
    return 2;
  }
  const std::string tmpdir = tmpl;
  ServerLog log;
  log.Open(tmpdir + "/server.log");

  Watchdog watchdog(opt.watchdog_s, log, tmpdir);
  auto finish = [&](int code) {
    watchdog.Disarm();
    log.Close();
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
    return code;
  };

  ServerProcess server;
  std::string error;
  if (!StartServer(opt.server, opt.in_memory ? "" : tmpdir + "/state.sqlite", opt.serve_args,
                   &server, &log, &error)) {
    std::fprintf(stderr, "bench_coord_load: starting %s serve: %s. Its output:\n",
                 opt.server.c_str(), error.c_str());
    for (const std::string& l : log.Tail()) std::fprintf(stderr, "  | %s\n", l.c_str());
    double ignored;
    StopServer(&server, &ignored);
    return finish(2);
  }
  const int port = server.port;
  std::printf(
      "bench_coord_load: %d ranks (pp %d x dp %d x tp %d), %d iterations, %s, %s; "
      "server %s (pid %d, port %d)\n",
      opt.ranks, kPp, dp, kTp, opt.iterations,
      opt.keep_alive ? "keep-alive connections" : "a connection per request",
      opt.in_memory ? "state in memory" : "state in SQLite", opt.server.c_str(),
      static_cast<int>(server.pid), port);
  if (straggler >= 0) {
    std::printf(
        "  straggler: pipeline %d x%.1f in iterations %lld..%lld; requests spread over "
        "0..%d ms\n",
        straggler, kSlowdown, static_cast<long long>(slow_begin),
        static_cast<long long>(slow_end - 1), opt.spread_ms);
  }
  std::fflush(stdout);

  Monitors monitors(run, server.pid);

  Recorder& setup_rec = run.setup_rec;
  bool& ok = run.ok;
  ok = true;
  {
    HttpClient http(port, opt.keep_alive);
    const json job = {{"job_id", "load"},
                      {"pp_degree", kPp},
                      {"dp_degree", dp},
                      {"tp_degree", kTp},
                      {"world_size", opt.ranks},
                      {"schedule", "1f1b"},
                      {"microbatches", kMicrobatches},
                      {"p_block_w", kPBlockW}};
    HttpResponse r = setup_rec.Timed(kCreateJob, http, "POST", "/jobs", job.dump(),
                                     "application/json", kRequestTimeoutS);
    ok = r.status == 200;
    if (ok) {
      r = setup_rec.Timed(kUploadProfile, http, "PUT", "/jobs/load/profile", csv, "text/csv",
                          kRequestTimeoutS);
      ok = r.status == 200;
    }
    if (!ok) std::fprintf(stderr, "bench_coord_load: %s\n", setup_rec.first_failure.c_str());
  }

  if (ok) monitors.WatchJob(port);

  // The ranks: one event loop over libcurl's multi interface drives every
  // rank (a state machine each), so the bench costs a socket per rank, not
  // a thread, and measures the server rather than its own scheduling.
  run.results.resize(opt.ranks);
  std::vector<RankResult>& results = run.results;
  std::string& first_error = run.first_error;
  int& registered = run.registered;
  int planned = 0;
  double& ranks_started_s = run.ranks_started_s;
  double& plans_done_s = run.plans_done_s;
  double& iterations_done_s = run.iterations_done_s;
  CpuMark& cpu_ranks = run.cpu_ranks;
  CpuMark& cpu_plans = run.cpu_plans;
  CpuMark& cpu_iterations = run.cpu_iterations;
  LoopFigures& loop = run.loop;
  if (ok) {
    g_phase = kRanks;
    ranks_started_s = Now();
    cpu_ranks = ReadCpu(server.pid);
    RankLoop ranks(port, opt, straggler, slow_begin, slow_end, &results);
    ranks.on_registered = [&] {
      if (++registered == opt.ranks) g_phase = kAwaiting;
    };
    ranks.on_all_planned = [&] {
      planned = opt.ranks;
      plans_done_s = Now();
      cpu_plans = ReadCpu(server.pid);
      g_phase = kIterations;
    };
    ranks.Run(&first_error);
    loop = ranks.figures();
    iterations_done_s = Now();
    cpu_iterations = ReadCpu(server.pid);
    if (plans_done_s == 0) plans_done_s = iterations_done_s;
  }
  g_phase = kDone;

  // The job's final state and one last scrape, then stop the monitors.
  json& final_status = run.final_status;
  std::string& metrics_text = run.metrics_text;
  {
    HttpClient http(port, opt.keep_alive);
    Recorder rec;
    HttpResponse r =
        rec.Timed(kJobStatus, http, "GET", "/jobs/load", "", nullptr, kRequestTimeoutS);
    if (r.status == 200) final_status = json::parse(r.body, nullptr, false);
    r = rec.Timed(kMetricsScrape, http, "GET", "/metrics", "", nullptr, kRequestTimeoutS);
    if (r.status == 200) metrics_text = r.body;
  }
  monitors.Stop();
  run.stopped = StopServer(&server, &run.stop_s);

  // ---- Figures and targets ---------------------------------------------------
  Summary sum;
  PrintRoutes(run, &sum);
  PrintDelivery(run, &sum);
  PrintResources(run);
  PrintSwitches(run, &sum);
  const int missed = CheckTargets(run, sum);
  std::printf("%s\n", missed == 0 && first_error.empty() ? "PASS" : "FAIL");
  if (!first_error.empty()) {
    std::printf("server's last lines:\n");
    for (const std::string& l : log.Tail()) std::printf("  | %s\n", l.c_str());
  }
  std::fflush(stdout);
  return finish(!first_error.empty() || !ok ? 2 : missed == 0 ? 0 : 1);
}
