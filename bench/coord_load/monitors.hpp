// bench_coord_load's monitors, each a thread beside the ranks' event loop:
// the server's /proc status every 50 ms (peak memory and threads, per
// phase; the bench's own threads), and, once the job exists, its status
// every 100 ms (the most requests parked at once) and /metrics every 500 ms,
// both timed like any other route.
#pragma once

#include "common.hpp"
#include "http_client.hpp"
#include "proc_metrics.hpp"
#include "report.hpp"

namespace {

class Monitors {
 public:
  // Starts the /proc sampler of `server_pid` into run.peaks.
  Monitors(Run& run, pid_t server_pid) : run_(run) {
    sampler_ = std::thread([this, server_pid] { Sample(server_pid); });
  }
  ~Monitors() { Stop(); }
  Monitors(const Monitors&) = delete;
  Monitors& operator=(const Monitors&) = delete;

  // Starts the status and /metrics monitors against the server at `port`.
  void WatchJob(int port) {
    status_ = std::thread([this, port] {
      HttpClient http(port, run_.opt.keep_alive);
      while (!stop_.load()) {
        const HttpResponse r = run_.status_rec.Timed(kJobStatus, http, "GET", "/jobs/load", "",
                                                     nullptr, kRequestTimeoutS);
        if (r.status == 200) {
          const json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
          if (j.is_object() && j.contains("waiting_requests") &&
              j.at("waiting_requests").is_number_integer()) {
            run_.max_waiting = std::max(run_.max_waiting, j.at("waiting_requests").get<int>());
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
    metrics_ = std::thread([this, port] {
      HttpClient http(port, run_.opt.keep_alive);
      while (!stop_.load()) {
        run_.metrics_rec.Timed(kMetricsScrape, http, "GET", "/metrics", "", nullptr,
                               kRequestTimeoutS);
        for (int k = 0; k < 10 && !stop_.load(); ++k) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }

  // Stops and joins every monitor. Idempotent.
  void Stop() {
    stop_ = true;
    for (std::thread* t : {&status_, &metrics_, &sampler_}) {
      if (t->joinable()) t->join();
    }
  }

 private:
  void Sample(pid_t server_pid) {
    ProcPeaks& peaks = run_.peaks;
    const std::string path = "/proc/" + std::to_string(server_pid) + "/status";
    while (!stop_.load()) {
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
  }

  Run& run_;
  std::atomic<bool> stop_{false};
  std::thread sampler_, status_, metrics_;
};

}  // namespace
