// The ranks' HTTP client (the runtime's libcurl transport) and the latency
// records of each route.
// Included by bench/coord_load.cpp only (one translation unit).
#pragma once

#include "common.hpp"

namespace {

// ---- The client: the runtime's HTTP client (libcurl) ----------------------

struct HttpResponse {
  int status = 0;  // 0: no answer (error says why)
  std::string body;
  std::string error;
};

// The runtime coordinator client's transport (src/runtime/http_client.hpp:
// libcurl, one kept connection per thread), so the bench measures the
// server through the client the ranks use, not a protocol copy of its own.
// keep_alive false sends "Connection: close" (a connection per request).
class HttpClient {
 public:
  HttpClient(int port, bool keep_alive)
      : endpoint_(joulepipe::runtime::http::ParseHttpUrl("http://127.0.0.1:" + std::to_string(port),
                                                         "bench")),
        keep_alive_(keep_alive) {}

  HttpResponse Send(const char* method, const std::string& target, const std::string& body,
                    const char* content_type, double timeout_s) {
    namespace http = joulepipe::runtime::http;
    http::Request request;
    request.method = method;
    request.target = target;
    request.body = body;
    if (content_type != nullptr) request.headers.emplace_back("Content-Type", content_type);
    if (!keep_alive_) request.headers.emplace_back("Connection", "close");
    http::Options options;
    options.connect_timeout_s = timeout_s;
    options.timeout_s = timeout_s;
    HttpResponse out;
    try {
      http::Response r = http::Send(endpoint_, request, options);
      out.status = r.status;
      out.body = std::move(r.body);
    } catch (const http::HttpError& e) {
      out.error = e.what();
    }
    return out;
  }

 private:
  joulepipe::runtime::http::Endpoint endpoint_;
  bool keep_alive_;
};

// ---- Latency records -----------------------------------------------------

enum Route {
  kCreateJob,
  kUploadProfile,
  kRegisterRank,
  kPlanWait,
  kPlanFetch,
  kReportIteration,
  kJobStatus,
  kMetricsScrape,
  kRoutes
};

const char* const kRouteNames[kRoutes] = {
    "POST /jobs",
    "PUT /jobs/{id}/profile",
    "POST /jobs/{id}/ranks",
    "GET /jobs/{id}/plan (long poll)",
    "GET /jobs/{id}/plan (fetch)",
    "POST /jobs/{id}/iterations",
    "GET /jobs/{id} (every 100 ms)",
    "GET /metrics (every 500 ms)",
};

// What each thread records, merged after it ends (no lock on the hot path).
struct Recorder {
  struct Sample {
    double start_s, latency_s;
  };
  std::vector<Sample> samples[kRoutes];
  int failures[kRoutes] = {};
  std::string first_failure;

  HttpResponse Timed(Route route, HttpClient& http, const char* method, const std::string& target,
                     const std::string& body, const char* content_type, double timeout_s) {
    const double start = Now();
    HttpResponse r = http.Send(method, target, body, content_type, timeout_s);
    samples[route].push_back({start, Now() - start});
    if (r.status < 200 || r.status >= 300) {
      ++failures[route];
      if (first_failure.empty()) {
        const std::string what =
            r.status == 0 ? r.error
                          : "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 300);
        first_failure = std::string(method) + " " + target + ": " + what;
      }
    }
    return r;
  }
};

}  // namespace
