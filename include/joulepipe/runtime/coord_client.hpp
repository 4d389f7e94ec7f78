// CoordinatorClient: a training rank's side of `joulepipe serve`, the
// coordinator that hands each rank its frequency plan and switches plans
// when a straggler appears (docs/runtime.md, "The coordinator client").
//
//   runtime::CoordinatorOptions options;
//   options.url = "http://10.0.0.1:8470";
//   options.token = secret;                      // optional bearer token
//   runtime::CoordinatorClient client(options);  // InputError for a bad URL
//   client.RegisterRank(job, {rank, dp, pp, tp, clocks});
//   if (auto plan = client.WaitForPlan(job, rank, 0, 30)) agent.SetPlan(plan->instructions);
//   int newest = client.ReportIteration(job, {rank, i, time_s, energy_j});
//
// A training loop normally uses CoordinatedPlan (coordinated_plan.hpp),
// which calls this client off the training thread and never lets an error
// reach the loop. The client itself throws.
//
// Transport: HTTP/1.1 over libcurl, http:// or https://host:port[/prefix]
// (TLS verified against the system's CAs or CoordinatorOptions::ca_file),
// one kept connection per thread (src/runtime/http_client.hpp). With plain
// http a token travels in clear text.
//
// Retries. Every call makes up to RetryPolicy::max_attempts attempts. It
// retries what may pass: a connection refused, reset or closed early, a
// name that did not resolve, a timeout, and the statuses 408, 429 and 5xx.
// Between attempts it sleeps (CoordinatorOptions::sleep):
//   * after a 429 or 503 carrying Retry-After (seconds or an HTTP date):
//     exactly that long, at most RetryPolicy::max_retry_after_s;
//   * otherwise attempt k (1-based) waits
//       d_k = min(max_backoff_s, initial_backoff_s * multiplier^(k-1))
//     shortened by jitter: d_k * (1 - jitter * u), u uniform in [0, 1)
//     (CoordinatorOptions::random), so ranks that failed together spread
//     out and no wait ever exceeds max_backoff_s.
// Registering a job or a rank is idempotent on the server, so retrying it
// is safe; an iteration report names its iteration, so a report retried
// after a lost answer arrives twice with the same identity.
//
// Errors: CoordinatorError (kind() says which):
//   kUnreachable  every attempt failed with a transient error; the message
//                 names the URL, the route, the attempts and the last error;
//   kRejected     a 4xx (other than 408/429) or any other status that is not
//                 retried: not retried; the message names the route, the
//                 status and the server's own "error" text, and field() is
//                 the server's "field" ("Struct::member" or "");
//   kBadResponse  an answer that is not what the route promises (malformed
//                 HTTP, JSON or plan; over the size bounds): not retried;
//   kCancelled    CoordinatorOptions::cancelled returned true.
// Bad arguments (an options value, a NaN measurement) throw
// model::InputError naming the field ("CoordinatorOptions::url",
// "IterationReport::time_s") before anything is sent.
//
// Threads: a CoordinatorClient is a value: copy it freely. One object must
// not be used by two threads at once (its random source has state); give
// each thread its own copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/protocol/job.hpp"
#include "joulepipe/protocol/messages.hpp"

namespace joulepipe::runtime {

// The coordinator's longest long poll, protocol::kMaxPlanWaitS: WaitForPlan's
// wait_s and CoordinatedPlanOptions' waits are 0..that (the one coord
// answers by).

struct RetryPolicy {
  int max_attempts = 5;  // >= 1; 1 = no retries
  double initial_backoff_s = 0.2;
  double max_backoff_s = 10;
  double multiplier = 2;          // >= 1
  double jitter = 0.5;            // 0..1: the fraction a wait may be shortened by
  double max_retry_after_s = 60;  // a server's Retry-After is capped at this
  std::uint64_t seed = 0;         // the default random source's seed; 0: from the OS
};

struct CoordinatorOptions {
  std::string url;      // "http[s]://host:port" with an optional path prefix
  std::string ca_file;  // https: PEM CA certificates to verify the server ("": the system's)
  std::string token;    // "" = none; else sent as "Authorization: Bearer <token>"
  double connect_timeout_s = 5;
  // The whole exchange after connecting (send, wait, read). A plan's long
  // poll adds its wait_s to it.
  double request_timeout_s = 30;
  std::size_t max_response_bytes = 64u << 20;
  RetryPolicy retry;
  // Sleeps between attempts; default: std::this_thread::sleep_for. Tests
  // record the waits instead; CoordinatedPlan, when none is given, uses
  // one its destructor (or Start()'s deadline) interrupts.
  std::function<void(double seconds)> sleep;
  // Uniform in [0, 1), for the jitter; default: a std::mt19937_64 seeded
  // with RetryPolicy::seed.
  std::function<double()> random;
  // Polled before each attempt and at least every 50 ms while waiting on the
  // network; true: the call throws CoordinatorError kCancelled. Empty: never.
  std::function<bool()> cancelled;
};

// What a job and its ranks send and receive: the protocol's messages, one
// definition for both ends (protocol/job.hpp, protocol/messages.hpp), named
// protocol::X. POST /jobs sends a JobConfig (its request form: an empty job_id lets the
// server assign one, members at their defaults are left out); POST
// /jobs/{job_id}/ranks a RankInfo. A report's time_s is from the
// iteration's start until this rank's pipeline work ended; energy_j unset
// is "not measured". A plan's `frequencies` (Zeus's shape) always agree
// with its `instructions`.

class CoordinatorError : public std::runtime_error {
 public:
  enum class Kind { kUnreachable, kRejected, kBadResponse, kCancelled };

  CoordinatorError(Kind kind, const std::string& message, int status = 0, std::string field = "",
                   int attempts = 0, std::string last_error = "")
      : std::runtime_error(message),
        kind_(kind),
        status_(status),
        field_(std::move(field)),
        attempts_(attempts),
        last_error_(std::move(last_error)) {}

  Kind kind() const { return kind_; }
  int status() const { return status_; }               // the last HTTP status; 0: none
  const std::string& field() const { return field_; }  // the server's "field", or ""
  int attempts() const { return attempts_; }           // attempts made
  // kUnreachable, kCancelled: what the last failed attempt ran into
  // ("cannot connect to 10.0.0.1:8470: Connection refused"); "" if none.
  const std::string& last_error() const { return last_error_; }

 private:
  Kind kind_;
  int status_;
  std::string field_;
  int attempts_;
  std::string last_error_;
};

const char* CoordinatorErrorKindName(CoordinatorError::Kind kind);  // "unreachable", ...

class CoordinatorClient {
 public:
  // Checks the options: model::InputError naming "CoordinatorOptions::url",
  // "CoordinatorOptions::token", "CoordinatorOptions::connect_timeout_s",
  // "CoordinatorOptions::request_timeout_s", "RetryPolicy::max_attempts", ...
  explicit CoordinatorClient(CoordinatorOptions options);

  // The job's id: `job.job_id`, or the one the server assigned. Refuses a
  // p_block_w or slowdown JSON cannot carry, or out of range, before
  // sending (InputError naming JobConfig::p_block_w, JobConfig::slowdown);
  // the other ranges come back as the coordinator's 400.
  std::string RegisterJob(const protocol::JobConfig& job);
  void RegisterRank(const std::string& job_id, const protocol::RankInfo& rank);
  // The profile CSV, as is (Content-Type text/csv). Returns the rows the
  // server read.
  int UploadProfile(const std::string& job_id, const std::string& csv);
  // Long poll: the rank's plan as soon as the job has one whose version is
  // above `after_version`, or nullopt after `wait_s` (0..kMaxPlanWaitS)
  // without one.
  // The request's timeout is request_timeout_s + wait_s.
  std::optional<protocol::RankPlan> WaitForPlan(const std::string& job_id, int rank,
                                                int after_version, double wait_s);
  // The version of the plan the rank should run (0: the job has none yet).
  // InputError here only for a time or energy JSON cannot carry (NaN,
  // infinity); the coordinator's range rules come back as its 400.
  int ReportIteration(const std::string& job_id, const protocol::IterationReport& report);

  // The URL as configured (for messages).
  const std::string& url() const;

  struct State;  // coord_client.cpp

 private:
  std::shared_ptr<const State> state_;  // immutable after construction
  std::function<double()> random_;      // per copy
};

}  // namespace joulepipe::runtime
