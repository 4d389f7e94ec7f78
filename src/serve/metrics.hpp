// The counters and histograms behind GET /metrics (Prometheus text format
// 0.0.4; docs/coordination.md, "Metrics", defines each one). Private to the
// serve part. Thread-safe: request threads, the planner and the scrape may
// call any method at once.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace joulepipe::serve {

// Cumulative buckets (upper bounds in seconds), their sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  // Appends "<name>_bucket{<labels>,le=...}", "_sum" and "_count" lines.
  void Write(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, not cumulative; last: +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// What the service knows at scrape time (read under its lock).
struct Gauges {
  std::map<std::string, int> jobs_by_phase;  // every phase name, 0 included
  std::int64_t ranks = 0;
  int waiting_requests = 0;
  double saving_j_per_iteration = 0;  // sum over planned jobs of the current switch's saving
  int planning = 0;                   // solves running now
  int plan_queue = 0;                 // jobs waiting for a planner
  double plan_time_limit_s = 0;       // ServerOptions::plan_time_limit_s
  int held_plan_waits = 0;            // plan long polls parked now
  int max_waiting = 0;                // ServerOptions::max_waiting
  int open_connections = 0;           // the transport's, now
};

class Metrics {
 public:
  Metrics();

  // One answered request: the route template ("GET /jobs/{id}/plan"), its
  // status, the time spent handling it (arrival to answer, minus the time
  // it was parked) and the time it was parked waiting (0 if never).
  void ObserveRequest(const std::string& route, int status, double handling_s, double parked_s);
  void ObserveSolve(double seconds, bool ok);
  void CountSwitch() { Add(&switches_, 1); }
  void CountPlanTimeout() { Add(&plan_timeouts_, 1); }
  void CountDeferredWait() { Add(&deferred_waits_, 1); }
  void CountClosedForRoom() { Add(&closed_for_room_, 1); }
  void CountClosedWaiting() { Add(&closed_waiting_, 1); }
  // One accepted iteration report; `completed` iterations it completed and
  // the predicted saving per iteration (J) of the plan they ran under.
  void CountReport(std::int64_t completed, double saving_j_per_iteration);

  std::string Text(const Gauges& gauges) const;

 private:
  void Add(std::uint64_t* counter, std::uint64_t n);

  mutable std::mutex mu_;
  std::map<std::string, Histogram> handling_;                      // by route
  std::map<std::string, Histogram> parked_;                        // by route, parked requests only
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // (route, status)
  Histogram solve_;
  std::uint64_t plans_ = 0, plan_failures_ = 0, plan_timeouts_ = 0, switches_ = 0, reports_ = 0,
                completed_ = 0, deferred_waits_ = 0, closed_for_room_ = 0, closed_waiting_ = 0;
  double saved_j_ = 0;
};

}  // namespace joulepipe::serve
