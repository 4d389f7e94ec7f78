// HttpServer: the libmicrohttpd transport of `joulepipe serve` (server.hpp
// says why libmicrohttpd). Private to the serve part.
//
// Per request, on MHD's one polling thread:
//   1. headers: the path is split at '/' and each segment percent-decoded
//      (MHD's own unescaping is off, so "%2F" cannot split a segment and
//      "%2B" is a '+'); a "/t/<token>" prefix is taken off and counts as the
//      bearer token; the route is matched; a missing or wrong token is
//      answered 401 and a declared Content-Length over the route's limit
//      413, both before any body is read;
//   2. body: kept up to the route's limit; beyond it (chunked uploads) the
//      rest is read and dropped, and the answer is 413;
//   3. the complete request goes to Service::Handle; when it parks, the
//      connection is suspended (no thread waits) until Service resumes it,
//      and then Service::Resumed answers.
// While more than ServerOptions::keep_alive_connections connections are
// open, every answer carries "Connection: close": a rank keeps a connection
// between its requests only while the server has room for it.
// Every answered request is timed into the service's metrics by route.
//
// What one client can hold (server.hpp, ServerOptions::connection_timeout_s):
// every open connection has a Slot. A slot waiting for a request's headers
// (just accepted, or kept alive after an answer) is in `waiting_`, oldest
// first; a request whose headers are in leaves it until its answer is sent.
// On MHD's thread, at each new connection and each request, Sweep closes
// (shutdown(2); MHD then finds the end of the stream and frees it) the
// waiting slots whose headers are overdue, and, while fewer than
// max_connections / 16 slots are free, the oldest waiting ones: so a
// trickle of bytes never extends a deadline, and half-sent requests can
// never take every slot. Requests being handled and parked waits are never
// closed this way.
#pragma once

#include <microhttpd.h>

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "service.hpp"

namespace joulepipe::serve {

class HttpServer {
 public:
  // Binds and starts the polling thread. Throws model::InputError naming
  // ServerOptions::host / ::port / ::max_connections.
  HttpServer(
      const ServerOptions& options, Service* service, std::function<void(const std::string&)> log,
      std::function<void(const std::string& route, int status, double handling_s, double parked_s)>
          observe);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void Stop();  // closes the socket and every connection; idempotent
  int port() const { return port_; }

  struct Connection;  // http_server.cpp: one request
  struct Slot;        // http_server.cpp: one open connection
  struct MhdLog;      // http_server.cpp

 private:
  static MHD_Result OnRequest(void* cls, MHD_Connection* connection, const char* url,
                              const char* method, const char* version, const char* upload_data,
                              size_t* upload_data_size, void** context);
  static void OnCompleted(void* cls, MHD_Connection* connection, void** context,
                          MHD_RequestTerminationCode code);
  static void OnConnection(void* cls, MHD_Connection* connection, void** socket_context,
                           MHD_ConnectionNotificationCode code);
  MHD_Result Answer(Connection* c, const Reply& reply);
  bool Authorized(MHD_Connection* connection, const std::string& path_token, bool has_path_token,
                  Reply* refusal) const;
  // A refusal of the request's framing before its body is read, if any.
  std::optional<Reply> FramingRefusal(MHD_Connection* connection, const Connection& c) const;
  // MHD's thread only (as are waiting_ and closing_).
  void Sweep(SteadyClock::time_point now);
  void StartWaiting(Slot* slot, SteadyClock::time_point now);
  void StopWaiting(Slot* slot);
  // Closes a connection waiting for a request's headers.
  void Shed(Slot* slot);
  // Closes the longest-silent connection of `address` when the address
  // has per_client_ silent ones and it was silent past its grace.
  void ShedCrowdedAddress(const std::string& address, SteadyClock::time_point now);

  Service* service_;
  std::string token_;
  std::function<void(const std::string&)> log_;
  std::function<void(const std::string&, int, double, double)> observe_;
  // What MHD logs: kept while starting (the reason a start failed), then
  // passed to log_. Heap-allocated: MHD holds its address.
  std::unique_ptr<MhdLog> mhd_log_;
  MHD_Daemon* daemon_ = nullptr;
  // Above this many open connections (Service::open_connections) each
  // answer closes its connection.
  int keep_alive_connections_ = 0;
  int port_ = 0;
  // Slot deadlines and room (see above).
  SteadyClock::duration header_timeout_{};
  int max_connections_ = 0;
  int room_ = 0;              // slots kept free for new clients
  std::list<Slot*> waiting_;  // waiting for a request's headers, oldest first
  std::list<Slot*> silent_;   // of them, those whose client never spoke, oldest first
  std::list<Slot*> idle_;     // and those whose client did (kept alive), oldest first
  int closing_ = 0;           // slots shut down by Sweep, not yet closed by MHD
  // Connections waiting for a request's headers, per client address, and
  // the most one address may have (ServerOptions::max_connections_per_client).
  std::unordered_map<std::string, int> waiting_by_address_;
  int per_client_ = 0;
  // Body bytes reserved by requests being received (kMaxReceivingBytes);
  // MHD's polling thread only.
  std::size_t receiving_bytes_ = 0;
  // Connection c's reservation grown to `bytes` (false: over the budget),
  // or given back (Release).
  bool Reserve(Connection* c, std::size_t bytes);
  void Release(Connection* c);
};

}  // namespace joulepipe::serve
