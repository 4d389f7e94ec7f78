// HTTP/1.1 framing for joulepiped's zeusd face: requests cut from a byte
// stream, answers written whole. Only what Zeus's client (httpx over a Unix
// socket) sends is accepted: a request line, headers, and a body framed by
// Content-Length (read and ignored: zeusd's routes take their arguments in
// the query). Private to the daemon part.
//
// Bounded: a request head of at most kMaxHeadBytes, a body of at most
// kMaxBodyBytes. Chunked bodies and other transfer codings are refused
// (411): Zeus sends none. Whatever arrives is either a request, a refusal
// with its status (after which the stream cannot be re-framed: the
// connection is closed), or "need more bytes".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace joulepipe::daemon {

inline constexpr std::size_t kMaxHeadBytes = 16 * 1024;
inline constexpr std::size_t kMaxBodyBytes = 64 * 1024;

struct HttpRequest {
  std::string method;      // "GET", "POST", ...
  std::string path;        // "/gpu/get_power", percent-decoding not applied
  std::string query;       // after '?', "" if none
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close"
};

struct HttpRefusal {
  int status = 400;
  std::string message;
};

// Takes the first whole request off the front of `buffer`. Returns it (and
// erases its bytes), a refusal, or neither when more bytes are needed.
struct HttpCut {
  std::optional<HttpRequest> request;
  std::optional<HttpRefusal> refusal;
};
HttpCut CutRequest(std::string* buffer);

// An answer with a JSON (or any) body and Content-Length; `close` adds
// "Connection: close".
std::string HttpAnswer(int status, std::string_view content_type, std::string_view body,
                       bool close);
// The head of a server-sent event stream (no length: it ends when either
// side closes).
std::string HttpEventStreamHead();

// The value of `key` in a query string ("a=1&b=2"), percent-decoded; nullopt
// when absent. A key given twice is the first.
std::optional<std::string> QueryValue(std::string_view query, std::string_view key);

}  // namespace joulepipe::daemon
