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
#include "coord_load/proc_metrics.hpp"
#include "coord_load/rank_loop.hpp"
#include "coord_load/server_process.hpp"

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

struct RouteFigures {
  std::size_t count = 0;
  int failures = 0;
  double rate = 0, p50 = 0, p99 = 0, max = 0;
};

RouteFigures Figures(const std::vector<Recorder::Sample>& s, int failures) {
  RouteFigures f;
  f.count = s.size();
  f.failures = failures;
  if (s.empty()) return f;
  std::vector<double> lat;
  lat.reserve(s.size());
  double first = INFINITY, last = 0;
  for (const Recorder::Sample& x : s) {
    lat.push_back(x.latency_s);
    first = std::min(first, x.start_s);
    last = std::max(last, x.start_s + x.latency_s);
  }
  f.rate = last > first ? static_cast<double>(s.size()) / (last - first) : 0;
  f.p50 = Percentile(lat, 0.5);
  f.p99 = Percentile(lat, 0.99);
  f.max = Percentile(lat, 1.0);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
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
      return 2;
    }
  }
  if (opt.ranks < kPp * kTp || opt.ranks % (kPp * kTp) != 0 || opt.iterations < 1 ||
      opt.spread_ms < 0 || opt.watchdog_s <= 0) {
    Usage();
    return 2;
  }
  const int dp = opt.ranks / (kPp * kTp);
  // The straggler: pipeline 3 (or the last one of fewer), slow in the middle
  // three tenths of the run; none with one pipeline (nothing to compare to).
  const int straggler = dp >= 2 ? std::min(kStragglerPipeline, dp - 1) : -1;
  const std::int64_t slow_begin = opt.iterations * 3 / 10, slow_end = opt.iterations * 6 / 10;

  std::string csv;
  {
    std::ifstream in(opt.profile, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "bench_coord_load: cannot read the profile %s\n", opt.profile.c_str());
      return 2;
    }
    std::ostringstream s;
    s << in.rdbuf();
    csv = s.str();
  }
  if (::access(opt.server.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "bench_coord_load: %s is not an executable (give --server PATH)\n",
                 opt.server.c_str());
    return 2;
  }

  // Sockets: one per rank, the monitors', and the server's (it raises its own).
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
    return 2;
  }

  char tmpl[] = "/tmp/joulepipe-coord-load-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "bench_coord_load: mkdtemp: %s\n", std::strerror(errno));
    return 2;
  }
  const std::string tmpdir = tmpl;
  ServerLog log;
  log.Open(tmpdir + "/server.log");

  // Watchdog: a broken server must not hang the bench.
  std::mutex watchdog_mu;
  std::condition_variable watchdog_cv;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(watchdog_mu);
    if (watchdog_cv.wait_for(lock, std::chrono::duration<double>(opt.watchdog_s),
                             [&] { return finished; })) {
      return;
    }
    std::fprintf(stderr,
                 "bench_coord_load: watchdog: not finished after %.0f s (phase %d); "
                 "killing the server. Its last lines:\n",
                 opt.watchdog_s, g_phase.load());
    for (const std::string& l : log.Tail()) std::fprintf(stderr, "  | %s\n", l.c_str());
    const pid_t pid = g_server_pid.load();
    if (pid > 0) ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
    std::fflush(stderr);
    _exit(2);
  });
  auto finish = [&](int code) {
    {
      std::lock_guard<std::mutex> lock(watchdog_mu);
      finished = true;
    }
    watchdog_cv.notify_all();
    watchdog.join();
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

  // /proc sampler (50 ms).
  std::atomic<bool> stop_monitors{false};
  ProcPeaks peaks;
  std::thread sampler([&] {
    const std::string path = "/proc/" + std::to_string(server.pid) + "/status";
    while (!stop_monitors.load()) {
      const ProcStatus s = ReadProcStatus(path);
      const ProcStatus self = ReadProcStatus("/proc/self/status");
      const int phase = g_phase.load();
      if (s.threads > 0) {
        ++peaks.samples;
        peaks.hwm_kb = std::max(peaks.hwm_kb, s.hwm_kb);
        peaks.rss_kb = std::max(peaks.rss_kb, s.rss_kb);
        peaks.threads = std::max(peaks.threads, s.threads);
        if (phase == kRanks || phase == kAwaiting) {
          peaks.threads_awaiting = std::max(peaks.threads_awaiting, s.threads);
          peaks.hwm_kb_awaiting = std::max(peaks.hwm_kb_awaiting, s.hwm_kb);
        }
        if (phase == kIterations) {
          peaks.threads_iterations = std::max(peaks.threads_iterations, s.threads);
        }
      }
      peaks.client_threads = std::max(peaks.client_threads, self.threads);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });

  Recorder setup_rec;
  bool ok = true;
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

  // Monitors: job status every 100 ms, /metrics every 500 ms.
  Recorder status_rec, metrics_rec;
  int max_waiting = 0;
  std::thread status_monitor, metrics_monitor;
  if (ok) {
    status_monitor = std::thread([&] {
      HttpClient http(port, opt.keep_alive);
      while (!stop_monitors.load()) {
        const HttpResponse r =
            status_rec.Timed(kJobStatus, http, "GET", "/jobs/load", "", nullptr, kRequestTimeoutS);
        if (r.status == 200) {
          const json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
          if (j.is_object() && j.contains("waiting_requests") &&
              j.at("waiting_requests").is_number_integer()) {
            max_waiting = std::max(max_waiting, j.at("waiting_requests").get<int>());
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    metrics_monitor = std::thread([&] {
      HttpClient http(port, opt.keep_alive);
      while (!stop_monitors.load()) {
        metrics_rec.Timed(kMetricsScrape, http, "GET", "/metrics", "", nullptr, kRequestTimeoutS);
        for (int k = 0; k < 10 && !stop_monitors.load(); ++k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }

  // The ranks: one event loop over libcurl's multi interface drives every
  // rank (a state machine each), so the bench costs a socket per rank, not
  // a thread, and measures the server rather than its own scheduling.
  std::vector<RankResult> results(opt.ranks);
  std::string first_error;
  int registered = 0, planned = 0;
  double ranks_started_s = 0, plans_done_s = 0, iterations_done_s = 0;
  CpuMark cpu_ranks, cpu_plans, cpu_iterations;
  LoopFigures loop;
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
  json final_status;
  std::string metrics_text;
  {
    HttpClient http(port, opt.keep_alive);
    Recorder rec;
    HttpResponse r =
        rec.Timed(kJobStatus, http, "GET", "/jobs/load", "", nullptr, kRequestTimeoutS);
    if (r.status == 200) final_status = json::parse(r.body, nullptr, false);
    r = rec.Timed(kMetricsScrape, http, "GET", "/metrics", "", nullptr, kRequestTimeoutS);
    if (r.status == 200) metrics_text = r.body;
  }
  stop_monitors = true;
  if (status_monitor.joinable()) status_monitor.join();
  if (metrics_monitor.joinable()) metrics_monitor.join();
  sampler.join();
  double stop_s = 0;
  const std::string stopped = StopServer(&server, &stop_s);

  // ---- Figures ---------------------------------------------------------------
  std::vector<Recorder::Sample> by_route[kRoutes];
  int failures[kRoutes] = {};
  auto merge = [&](const Recorder& rec) {
    for (int k = 0; k < kRoutes; ++k) {
      by_route[k].insert(by_route[k].end(), rec.samples[k].begin(), rec.samples[k].end());
      failures[k] += rec.failures[k];
    }
  };
  merge(setup_rec);
  merge(status_rec);
  merge(metrics_rec);
  int fetches = 0, not_ready = 0;
  for (const RankResult& r : results) {
    merge(r.rec);
    fetches += r.fetches;
    not_ready += r.not_ready;
  }

  std::printf("\n%-34s %8s %9s %9s %9s %9s %6s\n", "route (client side)", "count", "req/s",
              "p50 ms", "p99 ms", "max ms", "fail");
  RouteFigures fig[kRoutes];
  for (int k = 0; k < kRoutes; ++k) {
    fig[k] = Figures(by_route[k], failures[k]);
    if (fig[k].count == 0) {
      std::printf("%-34s %8d\n", kRouteNames[k], 0);
      continue;
    }
    std::printf("%-34s %8zu %9.1f %9.2f %9.2f %9.2f %6d\n", kRouteNames[k], fig[k].count,
                fig[k].rate, fig[k].p50 * 1e3, fig[k].p99 * 1e3, fig[k].max * 1e3, fig[k].failures);
  }

  // The server's own view (handling time, arrival to answer minus parking).
  const auto server_routes =
      ServerHistograms(metrics_text, "joulepipe_http_request_duration_seconds");
  if (!server_routes.empty()) {
    std::printf("\n%-34s %8s %9s %11s %11s\n", "route (server's histogram)", "count", "mean ms",
                "p50 <= ms", "p99 <= ms");
    for (const auto& [route, h] : server_routes) {
      std::printf("%-34s %8.0f %9.3f %11g %11g\n", route.c_str(), h.count,
                  h.count > 0 ? h.sum / h.count * 1e3 : 0.0, BucketQuantile(h, 0.5) * 1e3,
                  BucketQuantile(h, 0.99) * 1e3);
    }
  }

  // Plan delivery.
  double last_registration = -1;
  std::vector<double> delays;
  for (const RankResult& r : results) {
    last_registration = std::max(last_registration, r.registered_at_s);
  }
  for (const RankResult& r : results) {
    if (r.plan_at_s >= 0) delays.push_back(r.plan_at_s - last_registration);
  }
  const std::optional<double> solve_sum =
      MetricValue(metrics_text, "joulepipe_plan_solve_seconds_sum");
  const std::optional<double> solve_count =
      MetricValue(metrics_text, "joulepipe_plan_solve_seconds_count");
  const double solve_s = solve_sum.value_or(NAN);
  std::printf("\nregistration: %d ranks in %.3f s (first request to last answer)\n", registered,
              last_registration - ranks_started_s);
  if (!delays.empty()) {
    std::printf(
        "plans: %zu of %d delivered; after the last registration: p50 %.3f s, p99 %.3f s, "
        "max %.3f s; server solve %.3f s (%s solve%s)\n",
        delays.size(), opt.ranks, Percentile(delays, 0.5), Percentile(delays, 0.99),
        Percentile(delays, 1.0), solve_s,
        solve_count ? std::to_string(static_cast<int>(*solve_count)).c_str() : "?",
        solve_count && *solve_count == 1 ? "" : "s");
  }
  std::printf(
      "requests parked at once (GET /jobs/{id} waiting_requests, sampled every 100 ms): "
      "max %d\n",
      max_waiting);
  if (opt.iterations > 0 && iterations_done_s > plans_done_s) {
    const double span = iterations_done_s - plans_done_s;
    std::printf(
        "iterations: %d in %.2f s (%.1f iterations/s, %.0f reports/s); plan fetches "
        "after a version rise: %d (%d answered 204)\n",
        opt.iterations, span, opt.iterations / span, opt.iterations * opt.ranks / span, fetches,
        not_ready);
  }
  std::printf(
      "server: peak RSS (VmHWM) %.1f MiB (%.1f MiB by the time every plan was "
      "delivered); threads max %d (%d while the plans were awaited, %s during "
      "iterations); %d samples at 50 ms\n",
      peaks.hwm_kb / 1024.0, peaks.hwm_kb_awaiting / 1024.0, peaks.threads, peaks.threads_awaiting,
      peaks.threads_iterations > 0 ? std::to_string(peaks.threads_iterations).c_str()
                                   : "not sampled",
      peaks.samples);
  std::printf(
      "client (this bench): threads max %d (one event loop for %d ranks + monitors); "
      "%ld TCP connections opened by the ranks; %d plan waits told to come back "
      "(204 + Retry-After); %d requests retried; CPU %.2f s\n",
      peaks.client_threads, opt.ranks, loop.connects, loop.comebacks, loop.retries,
      loop.loop_cpu_s);
  if (iterations_done_s > plans_done_s && plans_done_s > ranks_started_s) {
    const double plan_wall = plans_done_s - ranks_started_s;
    const double it_wall = iterations_done_s - plans_done_s;
    std::printf(
        "CPU (s, user+system): registration + plans %.2f server / %.2f bench in %.2f s "
        "wall; iterations %.2f server / %.2f bench in %.2f s wall (%u cores)\n",
        cpu_plans.server_s - cpu_ranks.server_s, cpu_plans.client_s - cpu_ranks.client_s, plan_wall,
        cpu_iterations.server_s - cpu_plans.server_s, cpu_iterations.client_s - cpu_plans.client_s,
        it_wall, std::thread::hardware_concurrency());
  }
  std::printf("server stop: SIGTERM -> %s in %.3f s\n", stopped.c_str(), stop_s);

  // The job's switches.
  int switches = 0, reverts = 0;
  std::int64_t completed = -1, dropped = -1;
  int final_version = 0;
  // json::value throws on a member of another type: a wrong shape is a
  // finding, not a crash.
  try {
    if (final_status.is_object()) {
      completed = final_status.value("completed_iterations", std::int64_t{-1});
      dropped = final_status.value("dropped_iterations", std::int64_t{-1});
      final_version = final_status.value("plan_version", 0);
      if (final_status.contains("switches") && final_status["switches"].is_array()) {
        std::printf("plan versions:\n");
        for (const json& s : final_status["switches"]) {
          const int version = s.value("version", 0);
          bool any_slow = false;
          if (s.contains("slowdowns") && s["slowdowns"].is_array()) {
            for (const json& x : s["slowdowns"]) any_slow = any_slow || x.get<double>() > 1;
          }
          if (version > 1) (any_slow ? switches : reverts) += 1;
          std::printf(
              "  v%d from iteration %lld: T' %.4f s, predicted saving %.1f J/iteration: "
              "%s\n",
              version, static_cast<long long>(s.value("iteration", std::int64_t{0})),
              s.value("target_s", 0.0), s.value("predicted_saving_j", 0.0),
              s.value("reason", std::string()).c_str());
        }
      }
    }
  } catch (const json::exception& e) {
    std::printf("GET /jobs/load: an answer of an unexpected shape: %s\n", e.what());
  }
  int on_final = 0;
  for (const RankResult& r : results) on_final += r.version == final_version;
  std::printf("ranks running the final plan version %d at the end: %d of %d\n", final_version,
              on_final, opt.ranks);

  // ---- Targets ---------------------------------------------------------------
  int missed = 0;
  auto check = [&](bool pass, const std::string& what) {
    std::printf("  [%s] %s\n", pass ? "PASS" : "FAIL", what.c_str());
    missed += !pass;
  };
  std::printf("\ntargets:\n");
  if (!first_error.empty() || !ok) {
    std::printf("  error: %s\n",
                first_error.empty() ? setup_rec.first_failure.c_str() : first_error.c_str());
  }
  {
    // Ranks over the server's held waits come back when told to, at most
    // max_waiting a second: the last of them may come that much later.
    const double max_waiting = MetricValue(metrics_text, "joulepipe_plan_waits_max").value_or(0);
    const double comeback_s =
        max_waiting > 0 ? std::ceil(std::max(0.0, opt.ranks - max_waiting) / max_waiting) : 0;
    const double allowed = kPlanDeadlineS + comeback_s;
    const double max_delay = delays.empty() ? INFINITY : Percentile(delays, 1.0);
    char line[320];
    std::snprintf(line, sizeof line,
                  "every rank has its plan within %.0f s (+ %.0f s for %.0f ranks over the "
                  "%.0f held waits to come back) of the last registration plus the solve "
                  "(%zu of %d; max %.3f s - solve %.3f s = %.3f s)",
                  kPlanDeadlineS, comeback_s, std::max(0.0, opt.ranks - max_waiting), max_waiting,
                  delays.size(), opt.ranks, max_delay, solve_s, max_delay - solve_s);
    check(
        static_cast<int>(delays.size()) == opt.ranks && solve_sum && max_delay - solve_s <= allowed,
        line);
  }
  for (int k = 0; k < kRoutes; ++k) {
    if (k == kPlanWait || fig[k].count == 0) continue;
    char line[160];
    std::snprintf(line, sizeof line, "p99 < %.0f ms: %s (%.2f ms)", kP99TargetS * 1e3,
                  kRouteNames[k], fig[k].p99 * 1e3);
    check(fig[k].p99 < kP99TargetS, line);
  }
  {
    int total_failures = 0;
    for (int k = 0; k < kRoutes; ++k) total_failures += failures[k];
    check(total_failures == 0 && first_error.empty(),
          "every request answered 2xx (" + std::to_string(total_failures) + " failed)");
  }
  check(completed == opt.iterations && dropped == 0,
        "every iteration completed at the server (" + std::to_string(completed) + " of " +
            std::to_string(opt.iterations) + ", " + std::to_string(dropped) + " dropped)");
  check(peaks.threads_awaiting > 0 && peaks.threads_awaiting <= kMaxServerThreadsWaiting,
        "server threads while " + std::to_string(opt.ranks) +
            " plans were awaited <= " + std::to_string(kMaxServerThreadsWaiting) + " (max " +
            std::to_string(peaks.threads_awaiting) + ")");
  if (straggler >= 0 && slow_end - slow_begin >= 4) {
    check(switches >= 1 && reverts >= 1,
          "the straggler moved the other pipelines and its recovery moved them back (" +
              std::to_string(switches) + " switch(es) with a straggler, " +
              std::to_string(reverts) + " back)");
  }
  std::printf("%s\n", missed == 0 && first_error.empty() ? "PASS" : "FAIL");
  if (!first_error.empty()) {
    std::printf("server's last lines:\n");
    for (const std::string& l : log.Tail()) std::printf("  | %s\n", l.c_str());
  }
  std::fflush(stdout);
  return finish(!first_error.empty() || !ok ? 2 : missed == 0 ? 0 : 1);
}
