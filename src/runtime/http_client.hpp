// A small blocking HTTP/1.1 client over POSIX sockets: what the coordinator
// client (coord_client.hpp) speaks to `joulepipe serve`. Private to the
// runtime part.
//
// Scope, deliberately narrow:
//   * plain http://host[:port][/prefix] only. There is NO TLS: run the
//     coordinator on a trusted network, or put a TLS-terminating proxy on
//     the training node's loopback and point the URL at it. The bearer
//     token travels in clear text over plain http.
//   * one request per connection ("Connection: close"); no keep-alive, no
//     redirects (a 3xx is returned to the caller like any other status), no
//     proxies, no compression.
//   * responses: status line, headers, then a body framed by
//     Content-Length, by "Transfer-Encoding: chunked", or by the end of the
//     connection. 1xx interim responses are skipped.
//
// Bounds (hostile or broken servers): the status line and headers together
// are at most Options::max_header_bytes, the body at most
// Options::max_body_bytes (a declared Content-Length above it is refused
// before any of the body is read), a chunk-size line at most 1 KiB.
//
// Time: connecting (every address getaddrinfo returns, in turn) is bounded
// by connect_timeout_s, and the exchange after it (sending the request,
// waiting for the answer, reading it) by timeout_s. All waiting is poll():
// the socket is non-blocking. Name resolution (getaddrinfo) cannot be
// bounded that way; use a numeric address or a name the local resolver
// answers at once (/etc/hosts) on nodes whose DNS may hang.
//
// Safety: sockets are SOCK_CLOEXEC, and writes use MSG_NOSIGNAL, so a peer
// that closes never raises SIGPIPE in the training process.
//
// Threads: Send() holds no shared state; any thread may call it.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace joulepipe::runtime::http {

// Where requests go: the parts of "http://host[:port][/prefix]".
struct Endpoint {
  std::string host;  // name or address; an IPv6 literal without its brackets
  int port = 80;
  std::string prefix;  // "" or "/some/prefix" (no trailing slash)

  // "host:port" ("[::1]:8470" for IPv6), for the Host header and messages.
  std::string Authority() const;
};

// Parses `url`. Throws model::InputError(field, ...) naming `field` when it
// is not an http:// URL with a host (https:// is refused: no TLS here), a
// port in 1..65535, no user info, query or fragment.
Endpoint ParseHttpUrl(const std::string& url, const char* field);

// `text` with every byte outside RFC 3986's unreserved set percent-encoded:
// safe as one path segment or one query value.
std::string PercentEncode(std::string_view text);

struct Request {
  std::string method = "GET";
  std::string target = "/";  // path and query; Endpoint::prefix goes before it
  // Extra headers. Host, Content-Length and Connection are always written
  // by Send(); names and values must not contain CR or LF (checked by the
  // caller: Send() refuses them as kProtocol).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent with a Content-Length when non-empty or not GET
};

struct Response {
  int status = 0;      // 100..599
  std::string reason;  // the status line's reason phrase, may be empty
  // In arrival order; names lowercased, values trimmed.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // chunked bodies decoded

  // The last header named `name` (lowercase), or nullptr.
  const std::string* Header(std::string_view name) const;
};

struct Options {
  double connect_timeout_s = 5;  // TCP connect, each address in turn, all together
  double timeout_s = 30;         // after connecting: send, wait, read the whole response
  std::size_t max_header_bytes = 64 * 1024;
  std::size_t max_body_bytes = 64u << 20;
  // Polled at least every 50 ms while waiting; when it returns true, Send()
  // gives up with Failure::kCancelled. Empty: never.
  std::function<bool()> cancelled;
};

// Why a request got no usable response. The first four are transient (the
// server may answer next time); the others are not.
enum class Failure {
  kResolve,    // getaddrinfo failed
  kConnect,    // every address refused or was unreachable
  kTimeout,    // connect_timeout_s or timeout_s elapsed
  kClosed,     // the connection was reset or closed before a complete response
  kProtocol,   // not a well-formed HTTP/1.x response (or an invalid request)
  kTooLarge,   // headers or body over the bounds above
  kCancelled,  // Options::cancelled said so
};
const char* FailureName(Failure failure);  // "resolve", "connect", ...
bool IsTransient(Failure failure);         // kResolve, kConnect, kTimeout, kClosed

class HttpError : public std::runtime_error {
 public:
  HttpError(Failure failure, const std::string& message)
      : std::runtime_error(message), failure_(failure) {}
  Failure failure() const { return failure_; }

 private:
  Failure failure_;
};

// One request, one response, one connection. Any status is a response (the
// caller decides what 4xx/5xx mean); everything else throws HttpError whose
// message names the server ("127.0.0.1:8470") and what went wrong.
Response Send(const Endpoint& endpoint, const Request& request, const Options& options);

}  // namespace joulepipe::runtime::http
