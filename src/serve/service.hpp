// Service: the routes of `joulepipe serve`, with no HTTP in it. A facade
// over three objects:
//   * the router (router.hpp): the native and Zeus route tables, stateless;
//   * the jobs (jobs.hpp): registry, store, replay, eviction, planners and
//     profile intake, under their own lock, planning through coord only;
//   * the waiters (waiters.hpp): parked requests, deadlines, hang-ups,
//     come-back times, under their own lock, woken by the jobs.
// Each route's handler here parses its request (outside every lock), asks
// the jobs, and words the answer. The transport (http_server.hpp) hands it
// decoded requests and parks the connections it asks to park. Private to
// the serve part.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>

#include "api.hpp"
#include "jobs.hpp"
#include "joulepipe/serve/server.hpp"
#include "metrics.hpp"
#include "router.hpp"
#include "waiters.hpp"

namespace joulepipe::serve {

class Service {
 public:
  // Checks the options, opens the store and restores its jobs; starts the
  // planner, timer and intake threads. Throws model::InputError
  // (ServerOptions::...) or StoreError.
  explicit Service(const ServerOptions& options);
  ~Service();

  // A complete request (body received). nullopt: parked; the transport
  // calls Resumed once it is resumed. A profile upload's body is moved out
  // of `request` (to the intake thread).
  std::optional<Reply> Handle(Request& request, Parked* parked);
  // The answer of a parked request that was resumed.
  std::optional<Reply> Resumed(const Request& request, Parked* parked);
  // The transport is done with `parked` (its answer was sent, or its
  // connection closed): forget it.
  void Forget(Parked* parked);

  // Stop, first half: no more parking; every parked request is resumed (to
  // answer 503) and every solve in progress is cancelled. Then waits up to
  // `wait_s` until the resumed requests have been answered.
  void BeginStop(double wait_s);
  // Second half, after the transport stopped: joins the threads and writes
  // the last-active times.
  void Finish();

  // Metrics of one answered request (the transport's completion callback).
  void ObserveRequest(const std::string& route, int status, double handling_s, double parked_s) {
    metrics_.ObserveRequest(route, status, handling_s, parked_s);
  }
  // The transport closed a connection after its answer because more than
  // ServerOptions::keep_alive_connections were open.
  void CountClosedForRoom() { metrics_.CountClosedForRoom(); }
  // The transport closed a connection that waited for a request's headers
  // too long, or the longest when it ran out of room (http_server.hpp).
  void CountClosedWaiting() { metrics_.CountClosedWaiting(); }
  // The transport's open connections: +1 / -1 as they open and close; the
  // count now (Connection: close above keep_alive_connections, /metrics).
  int AddOpenConnections(int delta) { return open_connections_.fetch_add(delta) + delta; }
  int open_connections() const { return open_connections_.load(std::memory_order_relaxed); }
  // A line to ServerOptions::log (serialized).
  void Log(const std::string& line);

  int restored_jobs() const { return jobs_.restored(); }
  bool persistent() const { return jobs_.persistent(); }
  int jobs() const { return jobs_.counts().jobs; }
  int waiting() const { return waiters_.waiting(); }

 private:
  friend const Api& NativeApi();
  friend const Api& ZeusApi();

  // The native routes (routes.cpp).
  std::optional<Reply> Healthz(Request& r, Parked* parked);
  std::optional<Reply> MetricsText(Request& r, Parked* parked);
  std::optional<Reply> ListJobs(Request& r, Parked* parked);
  std::optional<Reply> CreateJob(Request& r, Parked* parked);
  std::optional<Reply> GetJob(Request& r, Parked* parked);
  std::optional<Reply> DeleteJob(Request& r, Parked* parked);
  std::optional<Reply> RegisterRank(Request& r, Parked* parked);
  std::optional<Reply> PutProfile(Request& r, Parked* parked);  // parks; the intake answers
  std::optional<Reply> GetPlan(Request& r, Parked* parked);     // may park
  std::optional<Reply> ReportIteration(Request& r, Parked* parked);
  // Zeus 0.16.0's PFO routes (zeus_routes.cpp).
  std::optional<Reply> ZeusInfo(Request& r, Parked* parked);
  std::optional<Reply> ZeusRegisterJob(Request& r, Parked* parked);
  std::optional<Reply> ZeusRegisterRank(Request& r, Parked* parked);
  std::optional<Reply> ZeusSchedule(Request& r, Parked* parked);  // parks until all ranks ask
  std::optional<Reply> ZeusResult(Request& r, Parked* parked);    // parks a large result
  void ApplyZeusResult(const std::string& job_id, const std::string& body);

  const ServerOptions options_;  // checked, the Zeus default profile's CSV filled in
  std::mutex log_mu_;
  Metrics metrics_;
  std::atomic<int> open_connections_{0};
  const SteadyClock::time_point started_ = SteadyClock::now();
  Waiters waiters_;
  Jobs jobs_;
};

}  // namespace joulepipe::serve
