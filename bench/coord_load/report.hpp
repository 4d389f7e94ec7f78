// bench_coord_load's figures and targets: what a run gathered (Run), printed
// per route, for plan delivery, the server's and the bench's resources and
// the job's plan switches, then judged against the targets
// (coord_load.cpp's header lists them).
#pragma once

#include "common.hpp"
#include "http_client.hpp"
#include "proc_metrics.hpp"
#include "rank_loop.hpp"

namespace {

// Everything one run gathered, for the report.
struct Run {
  Options opt;
  int dp = 0;
  int straggler = -1;  // the slowed pipeline; -1: none
  std::int64_t slow_begin = 0, slow_end = 0;
  bool ok = false;  // the job was created and its profile uploaded
  Recorder setup_rec, status_rec, metrics_rec;
  int max_waiting = 0;  // GET /jobs/{id} waiting_requests, the most seen
  ProcPeaks peaks;
  std::vector<RankResult> results;
  std::string first_error;
  int registered = 0;
  double ranks_started_s = 0, plans_done_s = 0, iterations_done_s = 0;
  CpuMark cpu_ranks, cpu_plans, cpu_iterations;
  LoopFigures loop;
  json final_status;         // GET /jobs/load at the end
  std::string metrics_text;  // the last /metrics scrape
  double stop_s = 0;
  std::string stopped;  // how the server stopped
};

struct RouteFigures {
  std::size_t count = 0;
  int failures = 0;
  double rate = 0, p50 = 0, p99 = 0, max = 0;
};

// What the figures found that the targets judge.
struct Summary {
  RouteFigures fig[kRoutes];
  int failures[kRoutes] = {};
  std::vector<double> delays;  // each rank's plan after the last registration (s)
  std::optional<double> solve_sum;
  double solve_s = NAN;
  std::int64_t completed = -1, dropped = -1;
  int switches = 0, reverts = 0;  // plan versions with a straggler / back
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

// Per route: the client's view, then the server's histograms.
void PrintRoutes(const Run& run, Summary* sum) {
  std::vector<Recorder::Sample> by_route[kRoutes];
  int* failures = sum->failures;
  auto merge = [&](const Recorder& rec) {
    for (int k = 0; k < kRoutes; ++k) {
      by_route[k].insert(by_route[k].end(), rec.samples[k].begin(), rec.samples[k].end());
      failures[k] += rec.failures[k];
    }
  };
  merge(run.setup_rec);
  merge(run.status_rec);
  merge(run.metrics_rec);
  for (const RankResult& r : run.results) merge(r.rec);

  std::printf("\n%-34s %8s %9s %9s %9s %9s %6s\n", "route (client side)", "count", "req/s",
              "p50 ms", "p99 ms", "max ms", "fail");
  RouteFigures* fig = sum->fig;
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
      ServerHistograms(run.metrics_text, "joulepipe_http_request_duration_seconds");
  if (!server_routes.empty()) {
    std::printf("\n%-34s %8s %9s %11s %11s\n", "route (server's histogram)", "count", "mean ms",
                "p50 <= ms", "p99 <= ms");
    for (const auto& [route, h] : server_routes) {
      std::printf("%-34s %8.0f %9.3f %11g %11g\n", route.c_str(), h.count,
                  h.count > 0 ? h.sum / h.count * 1e3 : 0.0, BucketQuantile(h, 0.5) * 1e3,
                  BucketQuantile(h, 0.99) * 1e3);
    }
  }
}

// Registration, and each rank's plan after the last registration.
void PrintDelivery(const Run& run, Summary* sum) {
  // Plan delivery.
  double last_registration = -1;
  std::vector<double>& delays = sum->delays;
  for (const RankResult& r : run.results) {
    last_registration = std::max(last_registration, r.registered_at_s);
  }
  for (const RankResult& r : run.results) {
    if (r.plan_at_s >= 0) delays.push_back(r.plan_at_s - last_registration);
  }
  sum->solve_sum = MetricValue(run.metrics_text, "joulepipe_plan_solve_seconds_sum");
  const std::optional<double> solve_count =
      MetricValue(run.metrics_text, "joulepipe_plan_solve_seconds_count");
  sum->solve_s = sum->solve_sum.value_or(NAN);
  const double solve_s = sum->solve_s;
  std::printf("\nregistration: %d ranks in %.3f s (first request to last answer)\n", run.registered,
              last_registration - run.ranks_started_s);
  if (!delays.empty()) {
    std::printf(
        "plans: %zu of %d delivered; after the last registration: p50 %.3f s, p99 %.3f s, "
        "max %.3f s; server solve %.3f s (%s solve%s)\n",
        delays.size(), run.opt.ranks, Percentile(delays, 0.5), Percentile(delays, 0.99),
        Percentile(delays, 1.0), solve_s,
        solve_count ? std::to_string(static_cast<int>(*solve_count)).c_str() : "?",
        solve_count && *solve_count == 1 ? "" : "s");
  }
  std::printf(
      "requests parked at once (GET /jobs/{id} waiting_requests, sampled every 100 ms): "
      "max %d\n",
      run.max_waiting);
}

// Iterations, the server's and the bench's threads, memory and CPU.
void PrintResources(const Run& run) {
  int fetches = 0, not_ready = 0;
  for (const RankResult& r : run.results) {
    fetches += r.fetches;
    not_ready += r.not_ready;
  }
  if (run.opt.iterations > 0 && run.iterations_done_s > run.plans_done_s) {
    const double span = run.iterations_done_s - run.plans_done_s;
    std::printf(
        "iterations: %d in %.2f s (%.1f iterations/s, %.0f reports/s); plan fetches "
        "after a version rise: %d (%d answered 204)\n",
        run.opt.iterations, span, run.opt.iterations / span,
        run.opt.iterations * run.opt.ranks / span, fetches, not_ready);
  }
  std::printf(
      "server: peak RSS (VmHWM) %.1f MiB (%.1f MiB by the time every plan was "
      "delivered); threads max %d (%d while the plans were awaited, %s during "
      "iterations); %d samples at 50 ms\n",
      run.peaks.hwm_kb / 1024.0, run.peaks.hwm_kb_awaiting / 1024.0, run.peaks.threads,
      run.peaks.threads_awaiting,
      run.peaks.threads_iterations > 0 ? std::to_string(run.peaks.threads_iterations).c_str()
                                       : "not sampled",
      run.peaks.samples);
  std::printf(
      "client (this bench): threads max %d (one event loop for %d ranks + monitors); "
      "%ld TCP connections opened by the ranks; %d plan waits told to come back "
      "(204 + Retry-After); %d requests retried; CPU %.2f s\n",
      run.peaks.client_threads, run.opt.ranks, run.loop.connects, run.loop.comebacks,
      run.loop.retries, run.loop.loop_cpu_s);
  if (run.iterations_done_s > run.plans_done_s && run.plans_done_s > run.ranks_started_s) {
    const double plan_wall = run.plans_done_s - run.ranks_started_s;
    const double it_wall = run.iterations_done_s - run.plans_done_s;
    std::printf(
        "CPU (s, user+system): registration + plans %.2f server / %.2f bench in %.2f s "
        "wall; iterations %.2f server / %.2f bench in %.2f s wall (%u cores)\n",
        run.cpu_plans.server_s - run.cpu_ranks.server_s,
        run.cpu_plans.client_s - run.cpu_ranks.client_s, plan_wall,
        run.cpu_iterations.server_s - run.cpu_plans.server_s,
        run.cpu_iterations.client_s - run.cpu_plans.client_s, it_wall,
        std::thread::hardware_concurrency());
  }
  std::printf("server stop: SIGTERM -> %s in %.3f s\n", run.stopped.c_str(), run.stop_s);
}

// The job's plan versions, and the ranks on the last one.
void PrintSwitches(const Run& run, Summary* sum) {
  // The job's switches.
  int& switches = sum->switches;
  int& reverts = sum->reverts;
  std::int64_t& completed = sum->completed;
  std::int64_t& dropped = sum->dropped;
  int final_version = 0;
  // json::value throws on a member of another type: a wrong shape is a
  // finding, not a crash.
  try {
    if (run.final_status.is_object()) {
      completed = run.final_status.value("completed_iterations", std::int64_t{-1});
      dropped = run.final_status.value("dropped_iterations", std::int64_t{-1});
      final_version = run.final_status.value("plan_version", 0);
      if (run.final_status.contains("switches") && run.final_status["switches"].is_array()) {
        std::printf("plan versions:\n");
        for (const json& s : run.final_status["switches"]) {
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
  for (const RankResult& r : run.results) on_final += r.version == final_version;
  std::printf("ranks running the final plan version %d at the end: %d of %d\n", final_version,
              on_final, run.opt.ranks);
}

// PASS/FAIL per target; returns the targets missed.
int CheckTargets(const Run& run, const Summary& sum) {
  int missed = 0;
  const std::vector<double>& delays = sum.delays;
  const double solve_s = sum.solve_s;
  const RouteFigures* fig = sum.fig;
  auto check = [&](bool pass, const std::string& what) {
    std::printf("  [%s] %s\n", pass ? "PASS" : "FAIL", what.c_str());
    missed += !pass;
  };
  std::printf("\ntargets:\n");
  if (!run.first_error.empty() || !run.ok) {
    std::printf("  error: %s\n", run.first_error.empty() ? run.setup_rec.first_failure.c_str()
                                                         : run.first_error.c_str());
  }
  {
    // Ranks over the server's held waits come back when told to, at most
    // max_waiting a second: the last of them may come that much later.
    const double held_waits = MetricValue(run.metrics_text, "joulepipe_plan_waits_max").value_or(0);
    const double comeback_s =
        held_waits > 0 ? std::ceil(std::max(0.0, run.opt.ranks - held_waits) / held_waits) : 0;
    const double allowed = kPlanDeadlineS + comeback_s;
    const double max_delay = delays.empty() ? INFINITY : Percentile(delays, 1.0);
    char line[320];
    std::snprintf(line, sizeof line,
                  "every rank has its plan within %.0f s (+ %.0f s for %.0f ranks over the "
                  "%.0f held waits to come back) of the last registration plus the solve "
                  "(%zu of %d; max %.3f s - solve %.3f s = %.3f s)",
                  kPlanDeadlineS, comeback_s, std::max(0.0, run.opt.ranks - held_waits), held_waits,
                  delays.size(), run.opt.ranks, max_delay, solve_s, max_delay - solve_s);
    check(static_cast<int>(delays.size()) == run.opt.ranks && sum.solve_sum &&
              max_delay - solve_s <= allowed,
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
    for (int k = 0; k < kRoutes; ++k) total_failures += sum.failures[k];
    check(total_failures == 0 && run.first_error.empty(),
          "every request answered 2xx (" + std::to_string(total_failures) + " failed)");
  }
  check(sum.completed == run.opt.iterations && sum.dropped == 0,
        "every iteration completed at the server (" + std::to_string(sum.completed) + " of " +
            std::to_string(run.opt.iterations) + ", " + std::to_string(sum.dropped) + " dropped)");
  check(run.peaks.threads_awaiting > 0 && run.peaks.threads_awaiting <= kMaxServerThreadsWaiting,
        "server threads while " + std::to_string(run.opt.ranks) +
            " plans were awaited <= " + std::to_string(kMaxServerThreadsWaiting) + " (max " +
            std::to_string(run.peaks.threads_awaiting) + ")");
  if (run.straggler >= 0 && run.slow_end - run.slow_begin >= 4) {
    check(sum.switches >= 1 && sum.reverts >= 1,
          "the straggler moved the other pipelines and its recovery moved them back (" +
              std::to_string(sum.switches) + " switch(es) with a straggler, " +
              std::to_string(sum.reverts) + " back)");
  }
  return missed;
}

}  // namespace
