// Server: coord::Job served over HTTP+JSON with persistent state, the
// library behind `joulepipe serve` (docs/coordination.md for the routes,
// docs/openapi.yaml for their shapes).
//
//   serve::ServerOptions options;
//   options.db_path = "state.sqlite";
//   serve::Server server(std::move(options));  // restores, binds, serves
//   ... server.port() ...
//   server.Stop();                             // or the destructor
//
// Transport: libmicrohttpd with one internal epoll thread (not its thread
// pool, which lost requests on kept-alive connections under load; see
// http_server.cpp) and suspend/resume. Why not
// cpp-httplib: its thread-per-connection pool cannot hold 1,024 long-polling
// ranks on 2 cores without 1,024 threads; here a request waiting for its plan
// is a suspended connection (a socket and ~1 KiB of state, no thread). One
// timer thread ends waits at their deadline and notices clients that hung
// up; the planner thread resumes the waiters of a job when its plan appears
// or changes. Threads in all: the HTTP thread, the planner, the timer.
// A rank costs a connection only while there is room (max_waiting,
// keep_alive_connections below), so the number of ranks is bounded by the
// request rate, not by connections.
//
// Policy: the coord part's Job, fed by the routes; every state change is
// validated in full first, then applied to the Job and written to the Store
// (store.hpp) in one transaction. Should the write fail, the job is reloaded
// from the store, so memory and file never disagree. Planning
// (solver::PlanPipeline, seconds to minutes) runs on the one planner thread,
// never on a request thread, one job at a time in the order jobs became
// ready; on restart, jobs that were ready and not planned are planned again.
//
// Security: without a token, anyone who can connect may change any job:
// bind to loopback (the default) or set a token, which every route but
// GET /healthz then requires ("Authorization: Bearer <token>", compared in
// constant time; or a "/t/<token>" path prefix for clients that cannot send
// headers, such as Zeus's). A non-loopback address without a token is
// logged as a warning. No TLS: put a TLS proxy in front on untrusted
// networks.
//
// Errors: the constructor throws model::InputError naming the ServerOptions
// field (ServerOptions::port when the port is taken, ServerOptions::db_path
// for an unusable database, ...); routes answer errors as JSON
// {"error": "<message>", "field": "<Struct::member>" | null}.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe::serve {

// What jobs registered through Zeus's POST /register_job plan with: Zeus's
// JobInfo has only the parallel degrees. Without `microbatches`, Zeus
// registration is refused (the schedule is unknown). With a profile, each
// Zeus job gets it at registration (its stages must equal the job's
// pp_degree); without one, an operator uploads a profile with
// PUT /jobs/{id}/profile while the ranks wait in GET /schedule.
struct ZeusDefaults {
  schedule::Kind kind = schedule::Kind::k1F1B;
  int microbatches = 0;  // 0: Zeus jobs cannot be registered
  int chunks = 1;
  std::optional<double> p_block_w;  // unset: the profile's metadata
  std::optional<model::Profile> profile;
  std::string profile_name;  // for messages and GET /info, e.g. its path
};

// The shortest bearer token the service accepts (16 bytes: 128 bits when
// random, e.g. base64 of 12 random bytes).
inline constexpr std::size_t kMinTokenBytes = 16;

struct ServerOptions {
  std::string host = "127.0.0.1";  // an address or a name; "0.0.0.0" / "::" for all
  int port = 8470;                 // 0: any free port (port() says which)
  std::string db_path;             // "" or ":memory:": in memory, nothing persists
  // "" = no authentication; otherwise at least kMinTokenBytes (refused at
  // start: InputError "ServerOptions::token").
  std::string token;
  double evict_after_s = 7 * 86400;   // idle jobs are deleted after this; 0 = never
  double evict_check_period_s = 60;   // how often idleness is checked (> 0)
  int max_connections = 4096;         // open connections, parked ones included
  double connection_timeout_s = 120;  // an idle (not parked) connection is closed
  // Connections from one address that have not sent a request yet
  // (half-open; 0: max_connections, i.e. only the server's own room
  // bounds them). A further one closes that address's longest-silent one
  // once it was silent past a 1 s grace; a new connection is never refused
  // for its address, and connections whose client spoke (requests being
  // handled, parked, idle kept-alive ones) never count, so an address with
  // many clients behind it (a proxy, a NAT, one host's 16,384 ranks) is
  // served. Short of room, the server closes silent connections past
  // their grace first, then the longest-idle ones.
  int max_connections_per_client = 0;
  // Jobs held at once (1..1,000,000): registering one more is answered 503
  // until a job is deleted or evicted. Restored jobs count too.
  int max_jobs = 1024;
  // What no client can hold, with or without a token (slowloris):
  //   * a request's headers must be complete within connection_timeout_s of
  //     the connection becoming ready for them (accepted, or the previous
  //     answer sent), however slowly they trickle in; a body within
  //     connection_timeout_s plus its length at 64 KiB/s;
  //   * when fewer than max_connections / 16 slots are left, each new
  //     connection closes the one that has waited longest for a request's
  //     headers (idle kept-alive connections and half-sent requests; never
  //     a request being handled or a parked wait), so real clients always
  //     find room.
  // What a rank costs the server is bounded by these, not by the job's size
  // (16,384-rank jobs with the defaults; docs/coordination.md, "Scale"):
  //   * at most max_waiting plan long polls are held at once (1..max_connections).
  //     A further one that cannot be answered at once is answered 204 with
  //     Retry-After (when to ask again, spread so that at most max_waiting
  //     come back per second) and "Connection: close": the rank waits
  //     without a connection. runtime::CoordinatorClient::WaitForPlan comes
  //     back by itself within its wait_s.
  //   * while more than keep_alive_connections connections are open
  //     (0..max_connections), each answer closes its connection, so ranks
  //     between iterations do not hold one; below it connections are kept.
  int max_waiting = 1024;
  int keep_alive_connections = 2048;
  // Planning: threads that solve frontiers, 1..64; one of them is kept for
  // light jobs (at most planners - 1 heavy ones at once, one if planners
  // is 1), and the queue is served lightest first, so a heavy job never
  // starves a light one. A heavy job's solve is estimated at more than
  // about a second (coord::PlanWork: the clock settings the solver weighs
  // per iteration x frontier deadlines).
  int planners = 2;
  // A job rated light whose solve runs longer than this (seconds, > 0)
  // while another job waits for a planner yields: it is cancelled and
  // queued again as heavy. So a wrong estimate delays light jobs by this
  // long at most.
  double light_solve_budget_s = 3;
  // Each job's solve may take this long (seconds, > 0); then it is
  // cancelled and the job fails with a message saying how to plan faster.
  // The failure is stored: a restart does not plan it again.
  double plan_time_limit_s = 600;
  ZeusDefaults zeus;
  // One line per event (job registered, planned, switched, evicted, ...;
  // warnings start with "warning: "). Called from any server thread, never
  // two at once. Empty: the lines are dropped.
  std::function<void(const std::string&)> log;
};

class Server {
 public:
  // Opens the store, restores every job in it (re-queuing those ready to
  // plan), raises the open-file limit to its hard limit and starts serving.
  // Throws model::InputError naming the ServerOptions field at fault.
  explicit Server(ServerOptions options);
  // Stop().
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Answers every parked request with 503 (Retry-After), stops the planner
  // (a solve in progress is cancelled; the job is planned again on restart),
  // closes every connection, writes the jobs' last-active times. Idempotent.
  void Stop();

  int port() const;         // the bound port
  std::string url() const;  // "http://127.0.0.1:8470"
  bool persistent() const;  // false for an in-memory store
  int restored_jobs() const;
  int jobs() const;
  int waiting_requests() const;  // parked right now

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether `host` (an address or "localhost") is a loopback address.
bool IsLoopbackHost(const std::string& host);

}  // namespace joulepipe::serve
