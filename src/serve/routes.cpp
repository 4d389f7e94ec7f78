// The route table (RouteOf, BodyLimit: the metrics label never carries a
// client's text) and the error body every refusal uses.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "service.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

Reply ErrorReply(int status, const std::string& message, const std::string& field) {
  return JsonReply(status,
                   {{"error", message}, {"field", field.empty() ? json(nullptr) : json(field)}});
}

// ---- Routes ------------------------------------------------------------------

namespace {

// The method as a metrics label: one of HTTP's own, else "OTHER". A label
// never carries what a client typed, so no request adds a series.
const char* MethodLabel(const std::string& method) {
  for (const char* known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    if (method == known) return known;
  }
  return "OTHER";
}

}  // namespace

RouteMatch RouteOf(const std::string& method, const std::vector<std::string>& s) {
  RouteMatch m;
  auto pick = [&](std::initializer_list<std::pair<const char*, Route>> methods,
                  const std::string& path) {
    std::string allowed;
    for (const auto& [verb, route] : methods) {
      allowed += (allowed.empty() ? "" : ", ") + std::string(verb);
      if (method == verb) {
        m.route = route;
        m.template_name = std::string(verb) + " " + path;
        return;
      }
    }
    m.route = Route::kMethodNotAllowed;
    m.template_name = std::string(MethodLabel(method)) + " " + path;
    m.allowed = allowed;
  };
  const std::size_t n = s.size();
  if (n == 1 && s[0] == "healthz") {
    pick({{"GET", Route::kHealthz}}, "/healthz");
  } else if (n == 1 && s[0] == "metrics") {
    pick({{"GET", Route::kMetrics}}, "/metrics");
  } else if (n == 1 && s[0] == "jobs") {
    pick({{"GET", Route::kListJobs}, {"POST", Route::kCreateJob}}, "/jobs");
  } else if (n == 2 && s[0] == "jobs") {
    m.job_id = s[1];
    pick({{"GET", Route::kGetJob}, {"DELETE", Route::kDeleteJob}}, "/jobs/{id}");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "ranks") {
    m.job_id = s[1];
    pick({{"POST", Route::kRegisterRank}}, "/jobs/{id}/ranks");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "profile") {
    m.job_id = s[1];
    pick({{"PUT", Route::kPutProfile}}, "/jobs/{id}/profile");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "plan") {
    m.job_id = s[1];
    pick({{"GET", Route::kGetPlan}}, "/jobs/{id}/plan");
  } else if (n == 3 && s[0] == "jobs" && s[2] == "iterations") {
    m.job_id = s[1];
    pick({{"POST", Route::kReportIteration}}, "/jobs/{id}/iterations");
  } else if (n == 1 && s[0] == "info") {
    pick({{"GET", Route::kZeusInfo}}, "/info");
  } else if (n == 1 && s[0] == "register_job") {
    pick({{"POST", Route::kZeusRegisterJob}}, "/register_job");
  } else if (n == 2 && s[0] == "register_rank") {
    m.job_id = s[1];
    pick({{"POST", Route::kZeusRegisterRank}}, "/register_rank/{job_id}");
  } else if (n == 2 && s[0] == "schedule") {
    m.job_id = s[1];
    pick({{"GET", Route::kZeusSchedule}}, "/schedule/{job_id}");
  } else if (n == 2 && s[0] == "result") {
    m.job_id = s[1];
    pick({{"POST", Route::kZeusResult}}, "/result/{job_id}");
  } else {
    m.route = Route::kNotFound;
    m.template_name = "unknown";
  }
  return m;
}

std::size_t BodyLimit(Route route) {
  switch (route) {
    case Route::kPutProfile:
      return kMaxProfileBody;
    case Route::kCreateJob:
    case Route::kRegisterRank:
    case Route::kReportIteration:
    case Route::kZeusRegisterJob:
    case Route::kZeusRegisterRank:
    case Route::kZeusResult:
      return kMaxJsonBody;
    default:  // GET and DELETE routes, and paths that match none: no body
      return 0;
  }
}

}  // namespace joulepipe::serve
