// joulepiped's zeusd face: the HTTP routes Zeus 0.16.0's daemon client
// (zeus.utils.zeusd.ZeusdClient, used by its GPU layer when ZEUSD_SOCK_PATH
// is set) calls, answered from the Handler. Pure request -> answer: the
// server owns sockets, sessions and the process watch. Private to the
// daemon part; docs/daemon.md has the route table.
//
// Sessions are per caller process (Handler::OpenShared): Zeus opens a
// connection per request, so a lease per connection would end with every
// answer. Status codes as zeusd's: 400 (a bad or missing parameter, a GPU
// id the node has not), 403 (the GPU is held by a joulepipe client's
// exclusive lease, or in MIG mode), 404 (no such route, or a route this
// daemon refuses, with the reason), 405 (the route's other method), 500
// (NVML failed); the body is always {"error": "..."} then.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http_framing.hpp"
#include "joulepipe/daemon/handler.hpp"

namespace joulepipe::daemon {

// How often a power stream sends each GPU's power.
inline constexpr double kPowerStreamPeriodS = 0.1;

struct ZeusdAnswer {
  int status = 200;
  std::string body;  // JSON
  // GET /gpu/stream_power: the connection turns into an event stream of
  // these GPUs (the server sends the events).
  bool stream = false;
  std::vector<unsigned> stream_gpus;
};

ZeusdAnswer AnswerZeusd(Handler& handler, SessionId session, const HttpRequest& request);

// One event of the power stream: "data: {...}\n\n" with the daemon's time
// and each GPU's power, as zeusd's.
std::string ZeusdPowerEvent(const Handler& handler, const std::vector<unsigned>& gpus);

// Milliseconds since the Unix epoch (zeusd's timestamps).
long long UnixMillis();

}  // namespace joulepipe::daemon
