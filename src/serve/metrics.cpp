#include "metrics.hpp"

#include <algorithm>
#include <cmath>

#include "joulepipe/model/format.hpp"

namespace joulepipe::serve {

namespace {

using model::Format;

// Request handling: 100 us .. 10 s. Parked time: up to the longest long
// poll (300 s) and beyond (Zeus's schedule barrier has no deadline).
const std::vector<double> kHandlingBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                             0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                             1,      2.5,     5,      10};
const std::vector<double> kParkedBounds = {0.01, 0.1, 0.5, 1,   2.5, 5,   10,
                                           30,   60,  120, 300, 900, 3600};
const std::vector<double> kSolveBounds = {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};

// A number as Prometheus reads it.
std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return Format("%.17g", v);
}

// A label value with \, " and newlines escaped.
std::string Escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Header(const char* name, const char* type, const char* help, std::string* out) {
  *out += Format("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void Counter(const char* name, const char* help, std::uint64_t value, std::string* out) {
  Header(name, "counter", help, out);
  *out += Format("%s %llu\n", name, static_cast<unsigned long long>(value));
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(at)];
  sum_ += value;
  ++count_;
}

void Histogram::Write(const std::string& name, const std::string& labels, std::string* out) const {
  const std::string sep = labels.empty() ? "" : labels + ",";
  std::uint64_t cumulative = 0;
  for (std::size_t k = 0; k < bounds_.size(); ++k) {
    cumulative += counts_[k];
    *out += Format("%s_bucket{%sle=\"%s\"} %llu\n", name.c_str(), sep.c_str(),
                   Number(bounds_[k]).c_str(), static_cast<unsigned long long>(cumulative));
  }
  cumulative += counts_.back();
  *out += Format("%s_bucket{%sle=\"+Inf\"} %llu\n", name.c_str(), sep.c_str(),
                 static_cast<unsigned long long>(cumulative));
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  *out += Format("%s_sum%s %s\n", name.c_str(), braces.c_str(), Number(sum_).c_str());
  *out += Format("%s_count%s %llu\n", name.c_str(), braces.c_str(),
                 static_cast<unsigned long long>(count_));
}

Metrics::Metrics() : solve_(kSolveBounds) {}

void Metrics::Add(std::uint64_t* counter, std::uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  *counter += n;
}

void Metrics::ObserveRequest(const std::string& route, int status, double handling_s,
                             double parked_s) {
  std::lock_guard<std::mutex> lock(mu_);
  handling_.try_emplace(route, kHandlingBounds).first->second.Observe(std::max(0.0, handling_s));
  if (parked_s > 0) parked_.try_emplace(route, kParkedBounds).first->second.Observe(parked_s);
  ++requests_[{route, status}];
}

void Metrics::ObserveSolve(double seconds, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  solve_.Observe(seconds);
  ++(ok ? plans_ : plan_failures_);
}

void Metrics::CountReport(std::int64_t completed, double saving) {
  std::lock_guard<std::mutex> lock(mu_);
  ++reports_;
  if (completed > 0) {
    completed_ += static_cast<std::uint64_t>(completed);
    saved_j_ += static_cast<double>(completed) * saving;
  }
}

std::string Metrics::Text(const Gauges& g) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Header("joulepipe_jobs", "gauge", "Jobs held by the coordinator, by phase.", &out);
  for (const auto& [phase, n] : g.jobs_by_phase) {
    out += Format("joulepipe_jobs{phase=\"%s\"} %d\n", Escape(phase).c_str(), n);
  }
  Header("joulepipe_ranks", "gauge", "Ranks registered, over every job.", &out);
  out += Format("joulepipe_ranks %lld\n", static_cast<long long>(g.ranks));
  Header("joulepipe_waiting_requests", "gauge",
         "Requests parked waiting for a plan or Zeus's schedule barrier (no thread each).", &out);
  out += Format("joulepipe_waiting_requests %d\n", g.waiting_requests);
  Header("joulepipe_plan_waits_held", "gauge",
         "Plan long polls parked now (at most joulepipe_plan_waits_max).", &out);
  out += Format("joulepipe_plan_waits_held %d\n", g.held_plan_waits);
  Header("joulepipe_plan_waits_max", "gauge",
         "Plan long polls held at once before further ones are told to come back "
         "(ServerOptions::max_waiting).",
         &out);
  out += Format("joulepipe_plan_waits_max %d\n", g.max_waiting);
  Counter("joulepipe_plan_waits_deferred_total",
          "Plan long polls answered 204 with Retry-After because max_waiting were held.",
          deferred_waits_, &out);
  Header("joulepipe_open_connections", "gauge", "HTTP connections open now.", &out);
  out += Format("joulepipe_open_connections %d\n", g.open_connections);
  Counter("joulepipe_connections_closed_for_room_total",
          "Answers that closed their connection because more than "
          "ServerOptions::keep_alive_connections were open.",
          closed_for_room_, &out);
  Counter("joulepipe_connections_closed_waiting_total",
          "Connections closed while waiting for a request's headers: overdue "
          "(ServerOptions::connection_timeout_s) or the oldest when the server ran out of room.",
          closed_waiting_, &out);
  Counter("joulepipe_plans_total", "Initial plans solved since the server started.", plans_, &out);
  Counter("joulepipe_plan_failures_total", "Plan solves that failed since the server started.",
          plan_failures_, &out);
  Counter("joulepipe_plan_timeouts_total",
          "Plan solves cancelled at the time limit (counted in the failures too).", plan_timeouts_,
          &out);
  Header("joulepipe_plan_time_limit_seconds", "gauge",
         "The time one job's plan solve may take (ServerOptions::plan_time_limit_s).", &out);
  out += Format("joulepipe_plan_time_limit_seconds %s\n", Number(g.plan_time_limit_s).c_str());
  Header("joulepipe_planning", "gauge", "Plan solves running now.", &out);
  out += Format("joulepipe_planning %d\n", g.planning);
  Header("joulepipe_plan_queue", "gauge", "Jobs ready to plan, waiting for a planner.", &out);
  out += Format("joulepipe_plan_queue %d\n", g.plan_queue);
  Counter("joulepipe_plan_switches_total",
          "Straggler plan switches (versions after the initial plan) since the server started.",
          switches_, &out);
  Counter("joulepipe_iteration_reports_total",
          "Iteration reports accepted (native reports and Zeus iter_time entries).", reports_,
          &out);
  Counter("joulepipe_completed_iterations_total",
          "Job iterations completed (every rank reported) since the server started.", completed_,
          &out);
  Header("joulepipe_predicted_energy_saved_joules_total", "counter",
         "Sum over completed iterations of the predicted GPU energy saving per iteration of the "
         "plan switch in force (J; predicted from the profile, not measured).",
         &out);
  out += Format("joulepipe_predicted_energy_saved_joules_total %s\n", Number(saved_j_).c_str());
  Header("joulepipe_predicted_energy_saving_joules_per_iteration", "gauge",
         "Sum over planned jobs of the current plan switch's predicted saving per iteration (J).",
         &out);
  out += Format("joulepipe_predicted_energy_saving_joules_per_iteration %s\n",
                Number(g.saving_j_per_iteration).c_str());
  Header("joulepipe_plan_solve_seconds", "histogram", "Wall time of each plan solve.", &out);
  solve_.Write("joulepipe_plan_solve_seconds", "", &out);
  Header("joulepipe_http_requests_total", "counter", "Answered requests by route and status.",
         &out);
  for (const auto& [key, n] : requests_) {
    out += Format("joulepipe_http_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                  Escape(key.first).c_str(), key.second, static_cast<unsigned long long>(n));
  }
  Header("joulepipe_http_request_duration_seconds", "histogram",
         "Time to handle a request, arrival to answer, excluding time parked waiting.", &out);
  for (const auto& [route, h] : handling_) {
    h.Write("joulepipe_http_request_duration_seconds", "route=\"" + Escape(route) + "\"", &out);
  }
  Header("joulepipe_http_request_wait_seconds", "histogram",
         "Time a long-polling request was parked before its answer.", &out);
  for (const auto& [route, h] : parked_) {
    h.Write("joulepipe_http_request_wait_seconds", "route=\"" + Escape(route) + "\"", &out);
  }
  return out;
}

}  // namespace joulepipe::serve
