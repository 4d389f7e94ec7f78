// The HTTP/1.1 client the coordinator client (coord_client.hpp) speaks to
// `joulepipe serve` with, over libcurl (Debian libcurl4-openssl-dev).
// Private to the runtime part.
//
//   * http:// and https:// (TLS with the system's CA store, or
//     Options::ca_file; the server's certificate and name are verified).
//   * connection reuse: each thread keeps its connections open between
//     requests (libcurl's cache, one per thread), so a rank's reports and
//     long polls use one connection; no redirects (a 3xx is returned to the
//     caller like any other status), no proxies from the environment.
//   * responses: status, headers and a body, chunked bodies decoded; 1xx
//     interim responses skipped.
//
// Bounds (hostile or broken servers): the headers at most
// Options::max_header_bytes, the body at most Options::max_body_bytes (a
// declared Content-Length above it is refused before any of the body is
// read).
//
// Time: connecting is bounded by connect_timeout_s, and the whole exchange
// by connect_timeout_s + timeout_s. Name resolution runs in libcurl's
// resolver thread, so it is bounded too. Cancellation is polled at least
// every 50 ms.
//
// Safety: libcurl is told never to raise signals (CURLOPT_NOSIGNAL), and a
// peer that closes never raises SIGPIPE in the training process.
//
// Threads: Send() may be called from any thread; each thread has its own
// connections.
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
  bool tls = false;    // https
  std::string host;    // name or address; an IPv6 literal without its brackets
  int port = 80;       // 443 by default with https
  std::string prefix;  // "" or "/some/prefix" (no trailing slash)

  // "host:port" ("[::1]:8470" for IPv6), for messages.
  std::string Authority() const;
  // "http[s]://authority" + prefix + target.
  std::string Url(const std::string& target) const;
};

// Parses `url`. Throws model::InputError(field, ...) naming `field` when it
// is not an http:// or https:// URL with a host, a port in 1..65535, no user
// info, query or fragment.
Endpoint ParseHttpUrl(const std::string& url, const char* field);

// `text` with ASCII letters lowercased (header names).
std::string LowerCase(std::string_view text);

// `text` with every byte outside RFC 3986's unreserved set percent-encoded:
// safe as one path segment or one query value.
std::string PercentEncode(std::string_view text);

struct Request {
  std::string method = "GET";
  std::string target = "/";  // path and query; Endpoint::prefix goes before it
  // Extra headers. Host and Content-Length are always written by Send();
  // names must be tokens and values must not contain CR or LF (Send()
  // refuses them as kProtocol).
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
  std::string ca_file;  // https: a PEM file of CA certificates ("": the system's)
  // Polled at least every 50 ms while waiting; when it returns true, Send()
  // gives up with Failure::kCancelled. Empty: never.
  std::function<bool()> cancelled;
};

// Why a request got no usable response. The first four are transient (the
// server may answer next time); the others are not.
enum class Failure {
  kResolve,    // the host name did not resolve
  kConnect,    // every address refused or was unreachable
  kTimeout,    // connect_timeout_s or timeout_s elapsed
  kClosed,     // the connection was reset or closed before a complete response
  kProtocol,   // not a well-formed HTTP/1.x response, a TLS failure, or an invalid request
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

// One request, one response. Any status is a response (the
// caller decides what 4xx/5xx mean); everything else throws HttpError whose
// message names the server ("127.0.0.1:8470") and what went wrong.
Response Send(const Endpoint& endpoint, const Request& request, const Options& options);

}  // namespace joulepipe::runtime::http
