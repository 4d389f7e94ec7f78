// bench_coord_load's watchdog: a broken server must not hang the bench.
// Unless disarmed within `seconds`, it prints the server's last lines, kills
// it, removes the run's directory and exits 2.
#pragma once

#include "common.hpp"
#include "proc_metrics.hpp"
#include "server_process.hpp"

namespace {

class Watchdog {
 public:
  Watchdog(double seconds, ServerLog& log, std::string tmpdir)
      : thread_(
            [this, seconds, &log, tmpdir = std::move(tmpdir)] { Watch(seconds, log, tmpdir); }) {}
  ~Watchdog() { Disarm(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The run finished: the watchdog stands down. Idempotent.
  void Disarm() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Watch(double seconds, ServerLog& log, const std::string& tmpdir) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return finished_; })) {
      return;
    }
    std::fprintf(stderr,
                 "bench_coord_load: watchdog: not finished after %.0f s (phase %d); "
                 "killing the server. Its last lines:\n",
                 seconds, g_phase.load());
    for (const std::string& l : log.Tail()) std::fprintf(stderr, "  | %s\n", l.c_str());
    const pid_t pid = g_server_pid.load();
    if (pid > 0) ::kill(pid, SIGKILL);
    std::error_code ec;
    std::filesystem::remove_all(tmpdir, ec);
    std::fflush(stderr);
    _exit(2);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::thread thread_;  // last: it starts once the rest is built
};

}  // namespace
