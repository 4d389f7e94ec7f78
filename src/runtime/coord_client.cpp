// CoordinatorClient (coord_client.hpp has the contract): the routes of
// `joulepipe serve`, the retry loop and the checks of every answer.
//
// Every answer is checked field by field as the plan reader does
// (src/model/plan.cpp): a bad one names the route and the JSON path
// ("instructions[3].frequency must be an integer >= 1, got string \"x\""),
// so a server bug shows up as a precise message rather than a wrong clock.
#include "joulepipe/runtime/coord_client.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_client.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/protocol/answer_reader.hpp"
#include "joulepipe/protocol/json.hpp"

namespace joulepipe::runtime {

namespace {

using nlohmann::json;

void CheckOptions(const CoordinatorOptions& o) {
  if (std::any_of(o.token.begin(), o.token.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    throw model::InputError("CoordinatorOptions::token",
                            "CoordinatorOptions::token must not contain line breaks or other "
                            "control characters (it is sent in an HTTP header)");
  }
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  model::Require(positive(o.connect_timeout_s), "CoordinatorOptions::connect_timeout_s",
                 model::Format("CoordinatorOptions::connect_timeout_s must be a positive number of "
                               "seconds (got %g s)",
                               o.connect_timeout_s));
  model::Require(positive(o.request_timeout_s), "CoordinatorOptions::request_timeout_s",
                 model::Format("CoordinatorOptions::request_timeout_s must be a positive number of "
                               "seconds (got %g s)",
                               o.request_timeout_s));
  model::Require(o.max_response_bytes >= 1024, "CoordinatorOptions::max_response_bytes",
                 "CoordinatorOptions::max_response_bytes must be at least 1024 (got " +
                     std::to_string(o.max_response_bytes) + ")");
  const RetryPolicy& r = o.retry;
  model::Require(r.max_attempts >= 1, "RetryPolicy::max_attempts",
                 "RetryPolicy::max_attempts must be at least 1 (got " +
                     std::to_string(r.max_attempts) + "); 1 makes one attempt and no retries");
  auto non_negative = [](double v) { return std::isfinite(v) && v >= 0; };
  model::Require(non_negative(r.initial_backoff_s), "RetryPolicy::initial_backoff_s",
                 model::Format("RetryPolicy::initial_backoff_s must be a finite number of seconds "
                               ">= 0 (got %g s)",
                               r.initial_backoff_s));
  model::Require(non_negative(r.max_backoff_s) && r.max_backoff_s >= r.initial_backoff_s,
                 "RetryPolicy::max_backoff_s",
                 model::Format("RetryPolicy::max_backoff_s must be a finite number of seconds >= "
                               "RetryPolicy::initial_backoff_s (got %g s and %g s)",
                               r.max_backoff_s, r.initial_backoff_s));
  model::Require(
      std::isfinite(r.multiplier) && r.multiplier >= 1, "RetryPolicy::multiplier",
      model::Format("RetryPolicy::multiplier must be at least 1 (got %g)", r.multiplier));
  model::Require(std::isfinite(r.jitter) && r.jitter >= 0 && r.jitter <= 1, "RetryPolicy::jitter",
                 model::Format("RetryPolicy::jitter must be between 0 and 1, the fraction a wait "
                               "may be shortened by (got %g)",
                               r.jitter));
  model::Require(non_negative(r.max_retry_after_s), "RetryPolicy::max_retry_after_s",
                 model::Format("RetryPolicy::max_retry_after_s must be a finite number of seconds "
                               ">= 0 (got %g s)",
                               r.max_retry_after_s));
}

// A server's Retry-After: delta-seconds or an HTTP date (RFC 9110 10.2.3).
std::optional<double> RetryAfterSeconds(const std::string& value) {
  if (!value.empty() && value.size() <= 9 &&
      std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::stod(value);
  }
  std::tm tm{};
  const char* end = ::strptime(value.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  const std::time_t when = ::timegm(&tm);
  if (when == static_cast<std::time_t>(-1)) return std::nullopt;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

// "503 Service Unavailable"
std::string StatusText(const http::Response& response) {
  return std::to_string(response.status) +
         (response.reason.empty() ? "" : " " + model::ExcerptText(response.reason, 60));
}

// The server's {"error": ..., "field": ...}, or an excerpt of whatever the
// body was.
std::pair<std::string, std::string> ServerError(const http::Response& response) {
  try {
    const json body = model::ParseJsonBounded(response.body, "error body", 8);
    if (body.is_object()) {
      auto error = body.find("error");
      if (error != body.end() && error->is_string()) {
        std::string field;
        auto f = body.find("field");
        if (f != body.end() && f->is_string()) {
          field = model::ExcerptText(f->get_ref<const std::string&>(), 100);
        }
        return {model::ExcerptText(error->get_ref<const std::string&>(), 1000), field};
      }
    }
  } catch (const std::exception&) {
    // Not JSON: quote it below.
  }
  if (response.body.empty()) return {"(no error message in the answer)", ""};
  return {"(answer body: " + model::ExcerptText(response.body, 200) + ")", ""};
}

// One answer of `context` (e.g. "POST http://.../jobs"): its JSON read with
// the protocol's reader; every failure is kBadResponse naming the route and
// the field's path.
class AnswerReader {
 public:
  AnswerReader(std::string context, int status) : context_(std::move(context)), status_(status) {}

  json Parse(const std::string& body) const {
    try {
      return model::ParseJsonBounded(body, "the answer");
    } catch (const model::InputError& e) {
      throw Bad(e.what());
    }
  }

  // f(const protocol::AnswerReader&), its InputError made kBadResponse.
  template <typename F>
  auto Read(F f) const {
    try {
      return f(protocol::AnswerReader());
    } catch (const model::InputError& e) {
      throw Bad(e.what());
    }
  }

  [[noreturn]] void Fail(const std::string& path, const std::string& problem) const {
    throw Bad(path + " " + problem);
  }

 private:
  CoordinatorError Bad(const std::string& what) const {
    return CoordinatorError(CoordinatorError::Kind::kBadResponse, context_ + ": " + what, status_);
  }

  std::string context_;
  int status_;
};

}  // namespace

struct CoordinatorClient::State {
  CoordinatorOptions options;
  http::Endpoint endpoint;
  std::vector<std::pair<std::string, std::string>> headers;  // on every request

  // One exchange with retries. Returns a 2xx response; throws
  // CoordinatorError otherwise. `extra_timeout_s` extends the request
  // timeout (long polls).
  http::Response Call(const std::string& method, const std::string& target, std::string body,
                      const char* content_type, double extra_timeout_s,
                      const std::function<double()>& random) const {
    const std::string route = method + " " + target;
    http::Request request;
    request.method = method;
    request.target = target;
    request.headers = headers;
    if (content_type != nullptr) request.headers.emplace_back("Content-Type", content_type);
    request.body = std::move(body);
    http::Options http_options;
    http_options.connect_timeout_s = options.connect_timeout_s;
    http_options.timeout_s = options.request_timeout_s + extra_timeout_s;
    http_options.max_body_bytes = options.max_response_bytes;
    http_options.cancelled = options.cancelled;
    http_options.ca_file = options.ca_file;

    const RetryPolicy& retry = options.retry;
    std::string last_error;
    int last_status = 0;
    double backoff = retry.initial_backoff_s;
    for (int attempt = 1;; ++attempt) {
      if (options.cancelled && options.cancelled()) {
        throw CoordinatorError(CoordinatorError::Kind::kCancelled,
                               Cancelled(route, attempt - 1, last_error), last_status, "",
                               attempt - 1, last_error);
      }
      std::optional<double> retry_after;
      try {
        http::Response response = http::Send(endpoint, request, http_options);
        last_status = response.status;
        if (response.status >= 200 && response.status < 300) return response;
        const auto [message, field] = ServerError(response);
        const bool transient =
            response.status >= 500 || response.status == 408 || response.status == 429;
        if (!transient) {
          std::string text = "coordinator at " + options.url + " rejected " + route + ": " +
                             StatusText(response) + ": " + message;
          if (response.status >= 300 && response.status < 400) {
            text += "; redirects are not followed: use the final address as the coordinator URL";
          }
          throw CoordinatorError(CoordinatorError::Kind::kRejected, text, response.status, field,
                                 attempt);
        }
        last_error = StatusText(response) + ": " + message;
        if (response.status == 429 || response.status == 503) {
          if (const std::string* value = response.Header("retry-after")) {
            retry_after = RetryAfterSeconds(*value);
          }
        }
      } catch (const http::HttpError& e) {
        if (e.failure() == http::Failure::kCancelled) {
          throw CoordinatorError(CoordinatorError::Kind::kCancelled,
                                 Cancelled(route, attempt, last_error), last_status, "", attempt,
                                 last_error);
        }
        if (!http::IsTransient(e.failure())) {
          throw CoordinatorError(
              CoordinatorError::Kind::kBadResponse,
              "coordinator at " + options.url + " gave a bad answer to " + route + ": " + e.what(),
              last_status, "", attempt);
        }
        last_error = e.what();
        last_status = 0;
      }
      if (attempt >= retry.max_attempts) {
        throw CoordinatorError(CoordinatorError::Kind::kUnreachable,
                               "coordinator unreachable at " + options.url + ": " + route +
                                   " failed after " + std::to_string(attempt) + " attempt" +
                                   (attempt == 1 ? "" : "s") + "; last error: " + last_error,
                               last_status, "", attempt, last_error);
      }
      double delay = 0;
      if (retry_after) {
        delay = std::min(*retry_after, retry.max_retry_after_s);
      } else {
        double u = random ? random() : 0.0;
        if (!(u >= 0)) u = 0;  // NaN too
        if (u >= 1) u = std::nextafter(1.0, 0.0);
        delay = std::min(backoff, retry.max_backoff_s) * (1 - retry.jitter * u);
      }
      backoff = std::min(retry.max_backoff_s, backoff * retry.multiplier);
      Sleep(delay);
    }
  }

  void Sleep(double seconds) const {
    if (options.sleep) {
      options.sleep(seconds);
    } else {
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    }
  }

  std::string Cancelled(const std::string& route, int attempts, const std::string& last) const {
    std::string text = route + " to the coordinator at " + options.url + " cancelled after " +
                       std::to_string(attempts) + " attempt" + (attempts == 1 ? "" : "s");
    if (!last.empty()) text += "; last error: " + last;
    return text;
  }

  std::string Context(const std::string& route) const {
    return "coordinator at " + options.url + " answered " + route + " with a bad body";
  }
};

const char* CoordinatorErrorKindName(CoordinatorError::Kind kind) {
  switch (kind) {
    case CoordinatorError::Kind::kUnreachable:
      return "unreachable";
    case CoordinatorError::Kind::kRejected:
      return "rejected";
    case CoordinatorError::Kind::kBadResponse:
      return "bad-response";
    case CoordinatorError::Kind::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

CoordinatorClient::CoordinatorClient(CoordinatorOptions options) {
  auto state = std::make_shared<State>();
  state->endpoint = http::ParseHttpUrl(options.url, "CoordinatorOptions::url");
  CheckOptions(options);
  state->headers.emplace_back("User-Agent", "joulepipe/" + std::string(model::Version()));
  state->headers.emplace_back("Accept", "application/json");
  if (!options.token.empty()) {
    state->headers.emplace_back("Authorization", "Bearer " + options.token);
  }
  if (options.random) {
    random_ = options.random;
  } else {
    const std::uint64_t seed =
        options.retry.seed != 0
            ? options.retry.seed
            : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    // Captured by value: each copy of the client draws on its own engine.
    random_ = [engine = std::mt19937_64(seed)]() mutable {
      return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    };
  }
  state->options = std::move(options);
  state_ = std::move(state);
}

const std::string& CoordinatorClient::url() const {
  return state_->options.url;
}

std::string CoordinatorClient::RegisterJob(const protocol::JobConfig& job) {
  if (job.p_block_w) {
    model::Require(std::isfinite(*job.p_block_w) && *job.p_block_w > 0, "JobConfig::p_block_w",
                   model::Format("JobConfig::p_block_w must be a positive number of watts "
                                 "when set (got %g W)",
                                 *job.p_block_w));
  }
  model::Require(std::isfinite(job.slowdown) && job.slowdown >= 0, "JobConfig::slowdown",
                 model::Format("JobConfig::slowdown must be a fraction >= 0 (got %g); 0.05 "
                               "allows a plan 5 %% slower than all-max clocks",
                               job.slowdown));
  const json body = protocol::JobConfigToJson(job, protocol::Form::kRequest);
  const std::string target = "/jobs";
  const http::Response response =
      state_->Call("POST", target, body.dump(-1, ' ', false, json::error_handler_t::replace),
                   "application/json", 0, random_);
  AnswerReader in(state_->Context("POST " + target), response.status);
  const json root = in.Parse(response.body);
  const std::string id = in.Read([&](const protocol::AnswerReader& r) {
    r.Object(root, "the answer");
    return r.String(r.Require(root, "job_id", ""), "job_id");
  });
  if (id.empty()) in.Fail("job_id", "is empty");
  if (!job.job_id.empty() && id != job.job_id) {
    in.Fail("job_id", "is '" + model::ExcerptText(id) + "' but the request registered '" +
                          model::ExcerptText(job.job_id) + "'");
  }
  return id;
}

void CoordinatorClient::RegisterRank(const std::string& job_id, const protocol::RankInfo& rank) {
  const json body = protocol::RankInfoToJson(rank);
  state_->Call("POST", "/jobs/" + http::PercentEncode(job_id) + "/ranks", body.dump(),
               "application/json", 0, random_);
}

int CoordinatorClient::UploadProfile(const std::string& job_id, const std::string& csv) {
  const std::string target = "/jobs/" + http::PercentEncode(job_id) + "/profile";
  const http::Response response = state_->Call("PUT", target, csv, "text/csv", 0, random_);
  AnswerReader in(state_->Context("PUT " + target), response.status);
  const json root = in.Parse(response.body);
  return in.Read([&](const protocol::AnswerReader& r) {
    r.Object(root, "the answer");
    return static_cast<int>(r.Integer(r.Require(root, "rows", ""), "rows", 0));
  });
}

std::optional<protocol::RankPlan> CoordinatorClient::WaitForPlan(const std::string& job_id,
                                                                 int rank, int after_version,
                                                                 double wait_s) {
  if (rank < 0 || after_version < 0) {
    throw model::InputError("WaitForPlan: rank and after_version must be >= 0 (got rank " +
                            std::to_string(rank) + ", after_version " +
                            std::to_string(after_version) + ")");
  }
  if (!std::isfinite(wait_s) || wait_s < 0 || wait_s > protocol::kMaxPlanWaitS) {
    throw model::InputError(
        model::Format("WaitForPlan: wait_s must be between 0 and %g seconds, "
                      "the coordinator's longest long poll (got %g s)",
                      protocol::kMaxPlanWaitS, wait_s));
  }
  // A server holding as many waits as it may answers 204 with Retry-After
  // at once (and closes the connection): the wait goes on here, without a
  // connection, and asks again then, for what is left of wait_s. A 204
  // without Retry-After is the end of the wait.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(wait_s));
  auto left_s = [&] {
    return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
  };
  double ask_s = wait_s;
  for (;;) {
    const std::string target =
        "/jobs/" + http::PercentEncode(job_id) + "/plan?rank=" + std::to_string(rank) +
        "&after=" + std::to_string(after_version) + "&wait_s=" + model::Format("%g", ask_s);
    const http::Response response = state_->Call("GET", target, "", nullptr, ask_s, random_);
    AnswerReader in(state_->Context("GET " + target), response.status);
    if (response.status == 204) {
      const std::string* value = response.Header("retry-after");
      const std::optional<double> after_s =
          value != nullptr ? RetryAfterSeconds(*value) : std::nullopt;
      if (!after_s || left_s() <= 0) return std::nullopt;
      state_->Sleep(std::min({*after_s, state_->options.retry.max_retry_after_s, left_s()}));
      if (state_->options.cancelled && state_->options.cancelled()) {
        throw CoordinatorError(CoordinatorError::Kind::kCancelled,
                               "GET " + target + " to the coordinator at " + url() +
                                   " cancelled while waiting to ask again (Retry-After)");
      }
      ask_s = left_s();
      continue;
    }
    if (response.status != 200) {
      in.Fail("the answer", "has status " + std::to_string(response.status) +
                                "; a plan comes with 200, no newer plan with 204");
    }
    const json root = in.Parse(response.body);
    return in.Read([&](const protocol::AnswerReader&) {
      return protocol::RankPlanFromJson(root, rank, after_version);
    });
  }
}

int CoordinatorClient::ReportIteration(const std::string& job_id,
                                       const protocol::IterationReport& report) {
  // Only what JSON cannot carry (NaN, infinity) is refused here; the ranges
  // are the coordinator's rules (protocol::CheckIterationReport), answered 400
  // with the field.
  model::Require(std::isfinite(report.time_s), "IterationReport::time_s",
                 model::Format("IterationReport::time_s must be a finite number of seconds (got "
                               "%g s); JSON has no NaN or infinity",
                               report.time_s));
  if (report.energy_j) {
    model::Require(std::isfinite(*report.energy_j), "IterationReport::energy_j",
                   model::Format("IterationReport::energy_j must be a finite number of joules "
                                 "when measured (got %g J); leave it unset when not measured",
                                 *report.energy_j));
  }
  const json body = protocol::IterationReportToJson(report);
  const std::string target = "/jobs/" + http::PercentEncode(job_id) + "/iterations";
  const http::Response response =
      state_->Call("POST", target, body.dump(), "application/json", 0, random_);
  AnswerReader in(state_->Context("POST " + target), response.status);
  const json root = in.Parse(response.body);
  return in.Read([&](const protocol::AnswerReader& r) {
    r.Object(root, "the answer");
    return static_cast<int>(r.Integer(r.Require(root, "plan_version", ""), "plan_version", 0));
  });
}

}  // namespace joulepipe::runtime
