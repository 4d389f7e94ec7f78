#include "http_server.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::serve {

namespace {

using model::Format;
using model::InputError;

double Seconds(SteadyClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX-decodes `text`; with `plus_is_space` (query strings) '+' is a space.
// nullopt on a malformed escape.
std::optional<std::string> PercentDecode(const std::string& text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = HexDigit(text[i + 1]), lo = HexDigit(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// MHD's unescaping off: the raw path reaches OnRequest, decoded per segment.
size_t KeepEscapes(void*, MHD_Connection*, char* s) {
  return std::strlen(s);
}

// Constant time in the contents (the loop runs over the longer length).
bool SameToken(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

MHD_Result CollectArgument(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* args = static_cast<std::vector<std::pair<std::string, std::string>>*>(cls);
  args->emplace_back(key != nullptr ? key : "", value != nullptr ? value : "");
  return MHD_YES;
}

// How long a new connection may stay silent (no request's headers) before
// it counts as half-open when its address or the server is crowded.
constexpr SteadyClock::duration kSilentGrace = std::chrono::seconds(1);

// The kernel's send buffer of a client's socket (Linux doubles it).
constexpr std::size_t kSendBufferBytes = 64 * 1024;

// A body may take connection_timeout_s plus its length at this rate.
constexpr double kMinBodyBytesPerS = 64 * 1024;

struct FramingHeaders {
  int content_lengths = 0;
  bool lengths_differ = false;
  std::string content_length;  // the first
  int transfer_encodings = 0;
  std::string transfer_encoding;  // the first
};

MHD_Result CollectFraming(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* f = static_cast<FramingHeaders*>(cls);
  const std::string v = value != nullptr ? value : "";
  if (key != nullptr && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
    if (f->content_lengths++ == 0) {
      f->content_length = v;
    } else if (v != f->content_length) {
      f->lengths_differ = true;
    }
  } else if (key != nullptr && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    if (f->transfer_encodings++ == 0) f->transfer_encoding = v;
  }
  return MHD_YES;
}

// A client's IP address as bytes, without its port: what connections from
// one address share.
std::string AddressKey(const sockaddr* address) {
  if (address == nullptr) return {};
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    return std::string(reinterpret_cast<const char*>(&in->sin_addr), sizeof in->sin_addr);
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    return std::string(reinterpret_cast<const char*>(&in6->sin6_addr), sizeof in6->sin6_addr);
  }
  return {};
}

std::string Limit(std::size_t bytes) {
  return bytes >= (1u << 20) ? Format("%zu MiB (%zu bytes)", bytes >> 20, bytes)
                             : Format("%zu bytes", bytes);
}

}  // namespace

struct HttpServer::Slot {
  int fd = -1;
  std::string address;                  // the client's IP address, as bytes (no port)
  SteadyClock::time_point ready_since;  // waiting for a request's headers since
  std::list<Slot*>::iterator at;        // in waiting_, while `waiting`
  std::list<Slot*>::iterator kind_at;   // in silent_ (not `spoke`) or idle_, while `waiting`
  bool waiting = false;
  bool closing = false;  // shut down by Sweep
  // A request on it passed the token check (or needed none): a client
  // that spoke, not a half-open connection. Counted per address only
  // until then; shed after those when the server runs short.
  bool spoke = false;
};

struct HttpServer::Connection final : Parked {
  MHD_Connection* mhd = nullptr;
  Slot* slot = nullptr;  // null if MHD gave none
  SteadyClock::time_point body_deadline;
  Request request;
  std::size_t limit = kMaxJsonBody;
  std::size_t received = 0;  // body bytes seen, kept or dropped
  std::size_t reserved = 0;  // of HttpServer::receiving_bytes_
  bool bad_path = false;
  bool handled = false;  // Service::Handle was called
  int status = 0;        // of the answer, once queued
  SteadyClock::time_point start = SteadyClock::now();
  SteadyClock::time_point parked_at;
  double parked_s = 0;

  void Suspend() override {
    parked_at = SteadyClock::now();
    MHD_suspend_connection(mhd);
  }
  void Resume() override { MHD_resume_connection(mhd); }
  int Socket() const override {
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(mhd, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info != nullptr ? info->connect_fd : -1;
  }
};

struct HttpServer::MhdLog {
  std::mutex mu;
  std::string last;
  bool started = false;
  std::function<void(const std::string&)> log;
};

namespace {

void OnMhdLog(void* cls, const char* format, va_list args) {
  auto* s = static_cast<HttpServer::MhdLog*>(cls);
  std::string line = model::FormatV(format, args);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->started) {
    s->last = line;
  } else if (s->log) {
    s->log("microhttpd: " + line);
  }
}

}  // namespace

HttpServer::HttpServer(const ServerOptions& options, Service* service,
                       std::function<void(const std::string&)> log,
                       std::function<void(const std::string&, int, double, double)> observe)
    : service_(service),
      token_(options.token),
      log_(std::move(log)),
      observe_(std::move(observe)),
      keep_alive_connections_(options.keep_alive_connections) {
  model::Require(
      options.port >= 0 && options.port <= 65535, "ServerOptions::port",
      Format("ServerOptions::port must be 0..65535, 0 for any free port (got %d)", options.port));
  model::Require(options.max_connections >= 1 && options.max_connections <= 1'000'000,
                 "ServerOptions::max_connections",
                 Format("ServerOptions::max_connections must be 1..1000000 (got %d)",
                        options.max_connections));
  model::Require(options.connection_timeout_s >= 1 && options.connection_timeout_s <= 86400,
                 "ServerOptions::connection_timeout_s",
                 Format("ServerOptions::connection_timeout_s must be 1..86400 (got %g)",
                        options.connection_timeout_s));

  model::Require(
      options.max_connections_per_client >= 0 &&
          options.max_connections_per_client <= options.max_connections,
      "ServerOptions::max_connections_per_client",
      Format("ServerOptions::max_connections_per_client must be 0..ServerOptions::max_connections "
             "(%d), 0 for all of it (got %d)",
             options.max_connections, options.max_connections_per_client));
  header_timeout_ = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(options.connection_timeout_s));
  max_connections_ = options.max_connections;
  room_ = FreeConnectionRoom(options.max_connections);
  per_client_ = options.max_connections_per_client > 0 ? options.max_connections_per_client
                                                       : options.max_connections;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.port);
  const int gai = ::getaddrinfo(options.host.c_str(), port.c_str(), &hints, &found);
  if (gai != 0 || found == nullptr) {
    throw InputError("ServerOptions::host",
                     Format("cannot resolve ServerOptions::host '%s': %s; give an address such "
                            "as 127.0.0.1, ::1 or 0.0.0.0",
                            model::ExcerptText(options.host).c_str(), ::gai_strerror(gai)));
  }
  sockaddr_storage address{};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  const bool ipv6 = found->ai_family == AF_INET6;
  ::freeaddrinfo(found);

  mhd_log_ = std::make_unique<MhdLog>();
  mhd_log_->log = log_;
  MhdLog* logs = mhd_log_.get();
  // One epoll thread, no thread pool. With libmicrohttpd 0.9.75's thread
  // pool over epoll, requests on kept-alive connections were sometimes
  // never read under load (bench_coord_load: 7 of 20 runs left reports
  // unread in the socket for 30 s); poll() with the pool did not lose any
  // but cost 4x the CPU with 1,024 idle connections. One thread handles a
  // request in ~0.05 ms (25,000 reports/s) and never blocks: planning has
  // its own thread, waiting requests are suspended (docs/benchmarks.md).
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                   MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  daemon_ = MHD_start_daemon(
      flags, static_cast<uint16_t>(options.port), nullptr, nullptr, &HttpServer::OnRequest, this,
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<const sockaddr*>(&address),
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(options.max_connections),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(options.connection_timeout_s),
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096u, MHD_OPTION_NOTIFY_COMPLETED, &HttpServer::OnCompleted,
      this, MHD_OPTION_NOTIFY_CONNECTION, &HttpServer::OnConnection, this,
      MHD_OPTION_UNESCAPE_CALLBACK, &KeepEscapes, nullptr, MHD_OPTION_EXTERNAL_LOGGER, &OnMhdLog,
      logs, MHD_OPTION_END);
  std::string why;
  {
    std::lock_guard<std::mutex> lock(logs->mu);
    why = logs->last;
    logs->started = true;
  }
  const std::string where = ipv6 ? Format("[%s]:%d", options.host.c_str(), options.port)
                                 : Format("%s:%d", options.host.c_str(), options.port);
  if (daemon_ == nullptr) {
    throw InputError("ServerOptions::port",
                     Format("cannot listen on %s: %s; choose another ServerOptions::port (0 "
                            "picks a free one) or ServerOptions::host",
                            where.c_str(), why.empty() ? "the HTTP library refused" : why.c_str()));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  port_ = info != nullptr ? info->port : options.port;
}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Stop() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

bool HttpServer::Authorized(MHD_Connection* connection, const std::string& path_token,
                            bool has_path_token, Reply* refusal) const {
  if (token_.empty()) return true;
  auto refuse = [&](const std::string& message) {
    *refusal = ErrorReply(401, message);
    refusal->headers.emplace_back("WWW-Authenticate", "Bearer realm=\"joulepipe\"");
    return false;
  };
  if (has_path_token) {
    return SameToken(path_token, token_) ||
           refuse("the token in the path (/t/<token>/...) does not match this server's");
  }
  const char* header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, "Authorization");
  if (header == nullptr) {
    return refuse(
        "this server requires a bearer token: send the header 'Authorization: Bearer <token>' "
        "(or prefix the path with /t/<token>); only GET /healthz is open");
  }
  const std::string value = header;
  const std::size_t space = value.find(' ');
  const std::string scheme = value.substr(0, space);
  if (space == std::string::npos || strcasecmp(scheme.c_str(), "Bearer") != 0) {
    return refuse(
        Format("the Authorization header must be 'Bearer <token>' (got the scheme "
               "'%s')",
               model::ExcerptText(scheme, 20).c_str()));
  }
  std::size_t begin = space;
  while (begin < value.size() && value[begin] == ' ') ++begin;
  return SameToken(value.substr(begin), token_) ||
         refuse("the bearer token does not match this server's");
}

std::optional<Reply> HttpServer::FramingRefusal(MHD_Connection* connection,
                                                const Connection& c) const {
  FramingHeaders f;
  MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectFraming, &f);
  const std::string& route = c.request.match.template_name;
  if (f.lengths_differ) {
    return ErrorReply(400, "the request has two different Content-Length headers; send one");
  }
  if (f.transfer_encodings > 0) {
    if (f.content_lengths > 0) {
      return ErrorReply(400,
                        "the request has both Content-Length and Transfer-Encoding; send one "
                        "of them");
    }
    if (f.transfer_encodings > 1 || strcasecmp(f.transfer_encoding.c_str(), "chunked") != 0) {
      return ErrorReply(501, Format("Transfer-Encoding '%s' is not supported; send the body with "
                                    "a Content-Length header",
                                    model::ExcerptText(f.transfer_encoding, 40).c_str()));
    }
  }
  if (c.limit == 0) {
    // A method the path does not take is that, whatever its body (TRACE
    // with a body was 413, not 405: schemathesis ST204).
    const RouteMatch& m = c.request.match;
    if (m.spec == nullptr && m.api != nullptr) return MethodNotAllowed(c.request.method, m);
    const bool declared =
        f.content_lengths > 0 && std::strtoull(f.content_length.c_str(), nullptr, 10) > 0;
    if (declared || f.transfer_encodings > 0) {
      return ErrorReply(413, Format("%s takes no request body; send none",
                                    route == "unknown" ? "this path" : route.c_str()));
    }
  }
  if (f.transfer_encodings > 0) {
    // A chunked body is refused from its headers: its length is unknown
    // until its end (it cannot be reserved against kMaxReceivingBytes), and
    // a chunk line's extensions are unbounded (one longer than the
    // connection's pool made libmicrohttpd answer 500). Every client of the
    // service sends Content-Length.
    return ErrorReply(411,
                      "this server reads a request body by its Content-Length only (no "
                      "'Transfer-Encoding: chunked'); send the body with a Content-Length "
                      "header");
  }
  return std::nullopt;
}

void HttpServer::StartWaiting(Slot* slot, SteadyClock::time_point now) {
  if (slot == nullptr || slot->waiting || slot->closing) return;
  slot->ready_since = now;
  slot->at = waiting_.insert(waiting_.end(), slot);
  slot->waiting = true;
  if (slot->spoke) {
    slot->kind_at = idle_.insert(idle_.end(), slot);
  } else {
    slot->kind_at = silent_.insert(silent_.end(), slot);
    ++waiting_by_address_[slot->address];
  }
}

void HttpServer::StopWaiting(Slot* slot) {
  if (slot == nullptr || !slot->waiting) return;
  waiting_.erase(slot->at);
  slot->waiting = false;
  if (slot->spoke) {
    idle_.erase(slot->kind_at);
    return;
  }
  silent_.erase(slot->kind_at);
  const auto it = waiting_by_address_.find(slot->address);
  if (it != waiting_by_address_.end() && --it->second <= 0) waiting_by_address_.erase(it);
}

void HttpServer::Shed(Slot* slot) {
  StopWaiting(slot);
  slot->closing = true;
  ++closing_;
  // MHD reads the end of the stream and closes it (OnConnection then frees
  // the slot); the descriptor stays MHD's until then, so it is never reused
  // under us.
  if (slot->fd >= 0) ::shutdown(slot->fd, SHUT_RDWR);
  service_->CountClosedWaiting();
}

void HttpServer::ShedCrowdedAddress(const std::string& address, SteadyClock::time_point now) {
  const auto it = waiting_by_address_.find(address);
  if (it == waiting_by_address_.end() || it->second < per_client_) return;
  // The address's connection that has waited longest without a request
  // goes, once it has been silent past the grace a client that means to
  // speak needs (a burst of ranks behind one address connects and speaks
  // within it; a half-sent request does not). Requests being handled or
  // parked, and idle connections whose client spoke, never count, so a
  // crowded address (a proxy, a NAT, a job's ranks on one host) is served.
  for (Slot* s : silent_) {
    if (s->address != address) continue;
    if (now - s->ready_since > kSilentGrace) Shed(s);
    return;
  }
}

void HttpServer::Sweep(SteadyClock::time_point now) {
  while (!waiting_.empty()) {
    Slot* oldest = waiting_.front();
    const bool overdue = now - oldest->ready_since > header_timeout_;
    const bool crowded = service_->open_connections() - closing_ > max_connections_ - room_;
    if (!overdue && !crowded) return;
    // Short of room: a connection silent past its grace (most likely an
    // attack) goes first, then the longest idle one whose client spoke (a
    // kept-alive rank reconnects at its next request), and only then one
    // still in its grace.
    if (!overdue) {
      if (!silent_.empty() && now - silent_.front()->ready_since > kSilentGrace) {
        oldest = silent_.front();
      } else if (!idle_.empty()) {
        oldest = idle_.front();
      }
    }
    Shed(oldest);
  }
}

MHD_Result HttpServer::Answer(Connection* c, const Reply& reply) {
  MHD_Response* response = MHD_create_response_from_buffer(
      reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  if (reply.status != 204) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type.c_str());
  }
  bool closes = false;
  for (const auto& [name, value] : reply.headers) {
    MHD_add_response_header(response, name.c_str(), value.c_str());
    closes = closes || strcasecmp(name.c_str(), "Connection") == 0;
  }
  if (!closes && service_->open_connections() > keep_alive_connections_) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    service_->CountClosedForRoom();
  }
  const MHD_Result queued =
      MHD_queue_response(c->mhd, static_cast<unsigned>(reply.status), response);
  MHD_destroy_response(response);
  if (queued == MHD_YES) c->status = reply.status;
  return queued;
}

MHD_Result HttpServer::OnRequest(void* cls, MHD_Connection* connection, const char* url,
                                 const char* method, const char*, const char* upload_data,
                                 size_t* upload_data_size, void** context) {
  auto* self = static_cast<HttpServer*>(cls);
  auto* c = static_cast<Connection*>(*context);
  if (c == nullptr) {
    // 1. The headers are in.
    c = new Connection;
    *context = c;
    c->mhd = connection;
    c->request.method = method;
    const SteadyClock::time_point now = SteadyClock::now();
    if (const MHD_ConnectionInfo* info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT)) {
      c->slot = static_cast<Slot*>(info->socket_context);
    }
    self->StopWaiting(c->slot);  // the headers are in: a request being handled
    self->Sweep(now);
    std::vector<std::string> segments;
    const std::string path = url != nullptr ? url : "/";
    std::size_t begin = path.empty() || path[0] != '/' ? 0 : 1;
    while (begin <= path.size()) {
      std::size_t end = path.find('/', begin);
      if (end == std::string::npos) end = path.size();
      std::optional<std::string> segment = PercentDecode(path.substr(begin, end - begin), false);
      if (!segment) c->bad_path = true;
      segments.push_back(segment.value_or(""));
      begin = end + 1;
    }
    if (!segments.empty() && segments.back().empty()) segments.pop_back();  // trailing '/'
    std::string path_token;
    const bool has_path_token = segments.size() >= 2 && segments[0] == "t";
    if (has_path_token) {
      path_token = segments[1];
      segments.erase(segments.begin(), segments.begin() + 2);
    }
    c->request.match = RouteOf(c->request.method, segments);
    c->limit = BodyLimit(c->request.match);
    c->body_deadline =
        now + self->header_timeout_ +
        std::chrono::duration_cast<SteadyClock::duration>(
            std::chrono::duration<double>(static_cast<double>(c->limit) / kMinBodyBytesPerS));
    if (c->bad_path) {
      return self->Answer(c, ErrorReply(400,
                                        "the path has a malformed percent-escape (a '%' "
                                        "not followed by two hex digits)"));
    }
    // Framing first: a body that cannot be read right (or must not come at
    // all) is refused before any of it is read, token or not.
    if (std::optional<Reply> framing = self->FramingRefusal(connection, *c)) {
      return self->Answer(c, *framing);
    }
    Reply refusal;
    if (NeedsToken(c->request.match) &&
        !self->Authorized(connection, path_token, has_path_token, &refusal)) {
      return self->Answer(c, refusal);
    }
    if (c->slot != nullptr) c->slot->spoke = true;
    const char* length =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length != nullptr) {
      const unsigned long long declared = std::strtoull(length, nullptr, 10);
      if (declared > c->limit) {
        return self->Answer(
            c, ErrorReply(413,
                          Format("the request body is %llu bytes; %s takes at most %s", declared,
                                 c->request.match.template_name.c_str(), Limit(c->limit).c_str())));
      }
      // The body's bytes are reserved before any is read, and its deadline
      // is its own length's, not the route's largest.
      if (!self->Reserve(c, static_cast<std::size_t>(declared))) {
        Reply busy = ErrorReply(
            503, Format("the server is receiving %s of request bodies already (at most %s at "
                        "once); nothing was changed; retry in a moment",
                        Limit(self->receiving_bytes_).c_str(), Limit(kMaxReceivingBytes).c_str()));
        busy.headers.emplace_back("Retry-After", "2");
        return self->Answer(c, busy);
      }
      c->body_deadline =
          now + self->header_timeout_ +
          std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(
              static_cast<double>(std::max<unsigned long long>(declared, 1)) / kMinBodyBytesPerS));
    }
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    // 2. A piece of the body. One that trickles past its deadline ends the
    // connection (MHD_NO): a trickle cannot hold it. Nor can a body of no
    // declared length (chunked) pass the budget of bodies being received.
    if (SteadyClock::now() > c->body_deadline) return MHD_NO;
    c->received += *upload_data_size;
    if (c->received <= c->limit) {
      if (c->received > c->reserved && !self->Reserve(c, c->received)) return MHD_NO;
      c->request.body.append(upload_data, *upload_data_size);
    }
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (c->status != 0) return MHD_YES;  // answered already
  // 3. The whole request: its body goes to the service (which counts what
  // it keeps of it, e.g. profile uploads against kMaxIntakeBytes).
  self->Release(c);
  if (c->received > c->limit) {
    c->request.body.clear();
    return self->Answer(
        c, ErrorReply(413, Format("the request body is over %s; %s takes at most %s",
                                  Limit(c->limit).c_str(), c->request.match.template_name.c_str(),
                                  Limit(c->limit).c_str())));
  }
  std::optional<Reply> reply;
  if (!c->handled) {
    c->handled = true;
    std::vector<std::pair<std::string, std::string>> raw;
    MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectArgument, &raw);
    for (const auto& [key, value] : raw) {
      std::optional<std::string> k = PercentDecode(key, true), v = PercentDecode(value, true);
      if (!k || !v) {
        return self->Answer(c, ErrorReply(400,
                                          "the query string has a malformed "
                                          "percent-escape (a '%' not followed by two hex "
                                          "digits)"));
      }
      c->request.query.emplace_back(std::move(*k), std::move(*v));
    }
    reply = self->service_->Handle(c->request, c);
  } else {
    c->parked_s += Seconds(SteadyClock::now() - c->parked_at);
    reply = self->service_->Resumed(c->request, c);
  }
  if (!reply) return MHD_YES;  // parked: suspended by the service
  return self->Answer(c, *reply);
}

// MHD's polling thread (and, at stop, the stopping one).
void HttpServer::OnConnection(void* cls, MHD_Connection* connection, void** socket_context,
                              MHD_ConnectionNotificationCode code) {
  auto* self = static_cast<HttpServer*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    self->service_->AddOpenConnections(1);
    auto* slot = new Slot;
    if (const MHD_ConnectionInfo* info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD)) {
      slot->fd = info->connect_fd;
      // A client that never reads holds at most this much of its answers in
      // the kernel (autotuned, 2.2 MB per socket); the rest waits in MHD's
      // buffer until the connection's timeout.
      const int bytes = static_cast<int>(kSendBufferBytes);
      ::setsockopt(slot->fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    }
    if (const MHD_ConnectionInfo* info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS)) {
      slot->address = AddressKey(info->client_addr);
    }
    *socket_context = slot;
    const SteadyClock::time_point now = SteadyClock::now();
    // Before it waits itself: a newcomer is never the one closed.
    self->Sweep(now);
    self->ShedCrowdedAddress(slot->address, now);
    self->StartWaiting(slot, now);
    return;
  }
  self->service_->AddOpenConnections(-1);
  auto* slot = static_cast<Slot*>(*socket_context);
  if (slot == nullptr) return;
  self->StopWaiting(slot);
  if (slot->closing) --self->closing_;
  delete slot;
  *socket_context = nullptr;
}

bool HttpServer::Reserve(Connection* c, std::size_t bytes) {
  if (bytes <= c->reserved) return true;
  const std::size_t more = bytes - c->reserved;
  if (receiving_bytes_ + more > kMaxReceivingBytes) return false;
  receiving_bytes_ += more;
  c->reserved = bytes;
  return true;
}

void HttpServer::Release(Connection* c) {
  receiving_bytes_ -= c->reserved;
  c->reserved = 0;
}

void HttpServer::OnCompleted(void* cls, MHD_Connection*, void** context,
                             MHD_RequestTerminationCode) {
  auto* self = static_cast<HttpServer*>(cls);
  auto* c = static_cast<Connection*>(*context);
  if (c == nullptr) return;
  *context = nullptr;
  self->Release(c);                           // a body left unfinished
  if (c->handled) self->service_->Forget(c);  // a no-op unless it is still parked
  // Kept alive, the connection now waits for its next request's headers
  // (a closing one is freed by OnConnection right after).
  self->StartWaiting(c->slot, SteadyClock::now());
  if (c->status != 0 && self->observe_) {
    const double total = Seconds(SteadyClock::now() - c->start);
    self->observe_(c->request.match.template_name, c->status, total - c->parked_s, c->parked_s);
  }
  delete c;
}

}  // namespace joulepipe::serve
