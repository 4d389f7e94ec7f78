// What the transport (http_server.hpp) and the service (service.hpp) hand
// each other: a decoded request, its answer, a request the service may
// park, and the bounds the transport enforces before a byte of a body is
// read. Private to the serve part.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace joulepipe::serve {

using SteadyClock = std::chrono::steady_clock;

struct Api;        // router.hpp: one API's route table (native, Zeus)
struct RouteSpec;  // router.hpp: one route of it

// Which route a method and path name (router.hpp, RouteOf).
struct RouteMatch {
  const Api* api = nullptr;         // the table the path is in; null: no route has it
  const RouteSpec* spec = nullptr;  // null: no such path, or a method it does not take
  std::string template_name;        // "GET /jobs/{id}/plan": the metrics label
  std::string job_id;               // decoded, for routes with one
  std::string allowed;              // a known path with another method: "GET, DELETE"
};

// The largest body a route accepts: 64 MiB for PUT /jobs/{id}/profile,
// 1 MiB for Zeus's POST /result, 64 KiB for the other POST routes, 0 for
// routes that take none (GET,
// DELETE, unknown paths): their bodies are refused before a byte is read.
inline constexpr std::size_t kMaxProfileBody = 64u << 20;
inline constexpr std::size_t kMaxJsonBody = 1u << 20;
// The routes whose bodies are a few hundred bytes (a job, a rank, an
// iteration report): parsed on the one HTTP thread, so bounded tighter
// (1 MiB bodies there, many at once, held /healthz for 6.2 s). Zeus's
// results (a whole profiling window) keep kMaxJsonBody.
inline constexpr std::size_t kMaxSmallJsonBody = 64u << 10;
// Profile uploads queued for parsing hold at most this many body bytes; a
// further upload is answered 503 with Retry-After (two whole uploads: one
// being parsed, one waiting, is the most a healthy job needs).
inline constexpr std::size_t kMaxIntakeBytes = 2 * kMaxProfileBody;
// Bodies being received hold at most this many bytes at once, all requests
// together (a request reserves its declared length once its headers and
// token are in; one that would pass it is answered 503 with Retry-After
// before a byte of its body is read): eight unfinished 60 MiB uploads held
// 553 MB until their deadline.
inline constexpr std::size_t kMaxReceivingBytes = 2 * kMaxProfileBody;

// The connection slots the transport keeps free for new clients (it closes
// the longest-waiting idle connection below this many, http_server.hpp):
// what waiting ranks may hold is max_connections less these.
inline int FreeConnectionRoom(int max_connections) {
  return max_connections / 16 > 1 ? max_connections / 16 : 1;
}
// Zeus's GET /schedule waits (its client cannot be told to come back: it
// waits with no timeout, and anything but 200 fails the rank) may hold at
// most this many connections at once.
inline int ZeusWaitLimit(int max_connections) {
  return max_connections - FreeConnectionRoom(max_connections);
}

struct Request {
  std::string method;
  RouteMatch match;
  std::vector<std::pair<std::string, std::string>> query;  // decoded
  std::string body;
};

struct Reply {
  int status = 200;
  std::string body;  // JSON unless content_type says otherwise; empty for 204
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

// {"error": message, "field": field or null} with `status`.
Reply ErrorReply(int status, const std::string& message, const std::string& field = "");

// A request the service may park; implemented by the transport.
class Parked {
 public:
  virtual ~Parked() = default;
  // Stops serving the connection. Called by the service, from the request's
  // handler, with the waiters' lock held (waiters.hpp).
  virtual void Suspend() = 0;
  // Serves it again (the transport then calls Service::Resumed). Called by
  // the service from any thread, holding none of its locks, once per Suspend.
  virtual void Resume() = 0;
  // The connection's socket, polled for a hang-up while parked; -1: unknown.
  virtual int Socket() const = 0;

  // The service's record of the wait (guarded by the waiters' lock).
  enum class Outcome { kNone, kReady, kDeadline, kJobGone, kStopping, kHungUp };
  struct Wait {
    // What the request waits for: a newer plan than `after` (GET
    // /jobs/{id}/plan), Zeus's schedule barrier (GET /schedule/{job_id}:
    // no deadline, never told to come back), or its profile upload's
    // check (PUT /jobs/{id}/profile, numbered `upload`).
    enum class For { kPlan, kSchedule, kUpload };
    For what = For::kPlan;
    bool registered = false;
    std::string job_id;
    int rank = 0;
    int after = 0;
    std::uint64_t upload = 0;
    std::optional<SteadyClock::time_point> deadline;
    Outcome outcome = Outcome::kNone;
    std::string gone_reason;  // kJobGone: "deleted" or "evicted"
    bool pending = false;     // claimed and resumed, its answer not yet sent
    // kReady: the answer, made by whoever woke it.
    std::optional<Reply> reply;
  } wait;
};

}  // namespace joulepipe::serve
