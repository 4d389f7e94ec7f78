// The HTTP/1.1 client (http_client.hpp has the contract).
//
// Reading is one buffer and a read position: Fill() appends what recv()
// gives, the parsers consume from the position. Every wait goes through
// WaitReady(), which polls in slices of at most kCancelSliceMs when a cancel
// predicate is set, so a caller shutting down is never held longer than that
// by a slow server.
#include "http_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::runtime::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCancelSliceMs = 50;
constexpr std::size_t kMaxChunkLine = 1024;
constexpr int kMaxInterimResponses = 8;

std::string ErrnoText(int error) {
  return std::strerror(error);
}

std::string Seconds(double s) {
  return model::Format("%g s", s);
}

Clock::time_point DeadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, seconds)));
}

char Lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string LowerCase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = Lower(c);
  return out;
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// RFC 9110 token characters (header names).
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c)) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool HasLineBreak(std::string_view text) {
  return text.find('\r') != std::string_view::npos || text.find('\n') != std::string_view::npos;
}

// Closes the socket on every path out of Send().
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or `deadline` passes (false).
// Throws kCancelled when the cancel predicate says so.
bool WaitReady(int fd, short events, Clock::time_point deadline, const Options& options,
               const std::string& authority) {
  for (;;) {
    if (options.cancelled && options.cancelled()) {
      throw HttpError(Failure::kCancelled, "request to " + authority + " cancelled");
    }
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return false;
    // Round up, so a wait never ends a hair before the deadline and spins.
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    ms = std::min<decltype(ms)>(ms, INT_MAX);
    if (options.cancelled) ms = std::min<decltype(ms)>(ms, kCancelSliceMs);
    pollfd entry{fd, events, 0};
    const int rc = ::poll(&entry, 1, static_cast<int>(ms));
    if (rc > 0) return true;  // ready, or an error the next call reports
    if (rc < 0 && errno != EINTR) {
      throw HttpError(Failure::kClosed,
                      "waiting on the connection to " + authority + " failed: " + ErrnoText(errno));
    }
  }
}

int Connect(const Endpoint& endpoint, const Options& options, const std::string& authority) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(endpoint.port);
  const int rc = ::getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    const std::string why = rc == EAI_SYSTEM ? ErrnoText(errno) : ::gai_strerror(rc);
    throw HttpError(Failure::kResolve, "cannot resolve host '" + endpoint.host + "': " + why);
  }
  struct Free {
    void operator()(addrinfo* p) const { ::freeaddrinfo(p); }
  };
  std::unique_ptr<addrinfo, Free> guard(list);

  const Clock::time_point deadline = DeadlineAfter(options.connect_timeout_s);
  std::string last_error = "no address";
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    Socket socket(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    const int fd = socket.fd();
    if (fd < 0) {
      last_error = ErrnoText(errno);
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return socket.Release();
    if (errno != EINPROGRESS && errno != EINTR) {
      last_error = ErrnoText(errno);
      continue;
    }
    if (!WaitReady(fd, POLLOUT, deadline, options, authority)) {
      // The deadline covers every address: none is left for the others.
      throw HttpError(Failure::kTimeout, "connecting to " + authority + " timed out after " +
                                             Seconds(options.connect_timeout_s));
    }
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error == 0) return socket.Release();
    last_error = ErrnoText(error);
  }
  throw HttpError(Failure::kConnect, "cannot connect to " + authority + ": " + last_error);
}

void SendAll(int fd, const std::string& data, Clock::time_point deadline, const Options& options,
             const std::string& authority) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!WaitReady(fd, POLLOUT, deadline, options, authority)) {
        throw HttpError(Failure::kTimeout, "sending the request to " + authority +
                                               " timed out after " + Seconds(options.timeout_s));
      }
      continue;
    }
    throw HttpError(Failure::kClosed,
                    "connection to " + authority +
                        " closed while sending the request: " + ErrnoText(n < 0 ? errno : EPIPE));
  }
}

// The response side of one connection.
class Reader {
 public:
  Reader(int fd, Clock::time_point deadline, const Options& options, const std::string& authority)
      : fd_(fd), deadline_(deadline), options_(options), authority_(authority) {}

  Response Read(bool head_request) {
    Response response;
    for (int interim = 0;; ++interim) {
      ReadHead(&response);
      if (response.status >= 200) break;
      if (interim == kMaxInterimResponses) {
        throw HttpError(Failure::kProtocol, authority_ + " sent more than " +
                                                std::to_string(kMaxInterimResponses) +
                                                " interim (1xx) responses");
      }
    }
    if (head_request || response.status == 204 || response.status == 304) return response;

    const std::string* encoding = response.Header("transfer-encoding");
    std::optional<std::size_t> length = ContentLength(response);
    if (encoding != nullptr) {
      const std::string codings = LowerCase(*encoding);
      const std::size_t comma = codings.rfind(',');
      const std::string_view last =
          Trim(std::string_view(codings).substr(comma == std::string::npos ? 0 : comma + 1));
      if (last == "chunked") {
        ReadChunked(&response.body);
      } else {
        ReadToEnd(&response.body);  // RFC 9112 6.3: framed by the connection's end
      }
    } else if (length) {
      ReadExactly(*length, &response.body);
    } else {
      ReadToEnd(&response.body);
    }
    return response;
  }

 private:
  std::size_t Available() const { return buffer_.size() - position_; }

  // Appends what the socket has; false at the end of the connection.
  bool Fill() {
    if (position_ > 0 && position_ == buffer_.size()) {
      buffer_.clear();
      position_ = 0;
    }
    char chunk[64 * 1024];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        received_ += static_cast<std::size_t>(n);
        buffer_.append(chunk, static_cast<std::size_t>(n));
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!WaitReady(fd_, POLLIN, deadline_, options_, authority_)) {
          throw HttpError(Failure::kTimeout,
                          (received_ == 0 ? "no answer from " : "incomplete answer from ") +
                              authority_ + " within " + Seconds(options_.timeout_s));
        }
        continue;
      }
      throw HttpError(Failure::kClosed,
                      "connection to " + authority_ +
                          " failed while reading the response: " + ErrnoText(errno));
    }
  }

  [[noreturn]] void ClosedEarly(const std::string& while_doing) const {
    throw HttpError(Failure::kClosed,
                    received_ == 0 ? authority_ + " closed the connection without answering"
                                   : "connection closed by " + authority_ + " " + while_doing);
  }

  // One line without its LF (and CR); longer than `budget` bytes: kTooLarge
  // with `what`.
  std::string ReadLine(std::size_t budget, const char* what, const char* while_doing) {
    std::size_t scanned = position_;
    for (;;) {
      const std::size_t newline = buffer_.find('\n', scanned);
      if (newline != std::string::npos) {
        std::size_t length = newline - position_;
        if (length > budget) TooLarge(what, budget);
        std::string line = buffer_.substr(position_, length);
        position_ = newline + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return line;
      }
      if (Available() > budget) TooLarge(what, budget);
      scanned = buffer_.size();
      const std::size_t before = position_;
      if (!Fill()) ClosedEarly(while_doing);
      if (position_ != before) scanned = position_;  // Fill compacted
    }
  }

  [[noreturn]] void TooLarge(const char* what, std::size_t limit) const {
    throw HttpError(Failure::kTooLarge, std::string(what) + " from " + authority_ +
                                            " exceed the limit of " + std::to_string(limit) +
                                            " bytes");
  }

  [[noreturn]] void Malformed(const std::string& problem) const {
    throw HttpError(Failure::kProtocol, authority_ + " did not answer with HTTP/1.x: " + problem);
  }

  // The status line and headers; `budget` counts them all.
  void ReadHead(Response* response) {
    std::size_t budget = options_.max_header_bytes;
    auto next = [&](const char* what) {
      std::string line = ReadLine(budget, what, "before the response headers ended");
      budget -= std::min(budget, line.size() + 2);
      return line;
    };
    const std::string status = next("the response's status line and headers");
    // "HTTP/1.1 200 OK": version, one space, three digits, then a space and
    // the reason (or nothing).
    if (status.size() < 12 || status.compare(0, 7, "HTTP/1.") != 0 || !IsDigit(status[7]) ||
        status[8] != ' ' || !IsDigit(status[9]) || !IsDigit(status[10]) || !IsDigit(status[11]) ||
        (status.size() > 12 && status[12] != ' ')) {
      Malformed("bad status line '" + Printable(status) + "'");
    }
    response->status = (status[9] - '0') * 100 + (status[10] - '0') * 10 + (status[11] - '0');
    if (response->status < 100) Malformed("status " + std::to_string(response->status));
    response->reason = status.size() > 13 ? status.substr(13) : "";
    response->headers.clear();
    for (;;) {
      const std::string line = next("the response's status line and headers");
      if (line.empty()) break;
      if (line.front() == ' ' || line.front() == '\t') Malformed("folded header line");
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos || colon == 0) {
        Malformed("header line without a name '" + Printable(line) + "'");
      }
      const std::string_view name(line.data(), colon);
      if (!std::all_of(name.begin(), name.end(), IsTokenChar)) {
        Malformed("bad header name '" + Printable(std::string(name)) + "'");
      }
      response->headers.emplace_back(LowerCase(name),
                                     std::string(Trim(std::string_view(line).substr(colon + 1))));
    }
  }

  std::optional<std::size_t> ContentLength(const Response& response) const {
    std::optional<std::size_t> length;
    for (const auto& [name, value] : response.headers) {
      if (name != "content-length") continue;
      std::size_t parsed = 0;
      if (value.empty() || value.size() > 18 || !std::all_of(value.begin(), value.end(), IsDigit)) {
        Malformed("bad Content-Length '" + Printable(value) + "'");
      }
      for (char c : value) parsed = parsed * 10 + static_cast<std::size_t>(c - '0');
      if (length && *length != parsed) Malformed("conflicting Content-Length headers");
      length = parsed;
    }
    if (length && *length > options_.max_body_bytes) {
      throw HttpError(Failure::kTooLarge, authority_ + " announced a response body of " +
                                              std::to_string(*length) +
                                              " bytes, over the limit of " +
                                              std::to_string(options_.max_body_bytes) + " bytes");
    }
    return length;
  }

  void ReadExactly(std::size_t length, std::string* body) {
    while (Available() < length) {
      if (!Fill()) {
        ClosedEarly("after " + std::to_string(Available()) + " of " + std::to_string(length) +
                    " body bytes");
      }
    }
    body->append(buffer_, position_, length);
    position_ += length;
  }

  void ReadToEnd(std::string* body) {
    for (;;) {
      if (Available() > options_.max_body_bytes) {
        TooLarge("the response body", options_.max_body_bytes);
      }
      if (!Fill()) break;
    }
    body->append(buffer_, position_, std::string::npos);
    position_ = buffer_.size();
  }

  void ReadChunked(std::string* body) {
    for (;;) {
      const std::string line = ReadLine(kMaxChunkLine, "a chunk-size line", "inside a chunk");
      const std::string_view size_text = Trim(std::string_view(line).substr(0, line.find(';')));
      if (size_text.empty() || size_text.size() > 15) {
        Malformed("bad chunk size '" + Printable(line) + "'");
      }
      std::size_t size = 0;
      for (char c : size_text) {
        const char l = Lower(c);
        int digit = 0;
        if (IsDigit(l)) {
          digit = l - '0';
        } else if (l >= 'a' && l <= 'f') {
          digit = l - 'a' + 10;
        } else {
          Malformed("bad chunk size '" + Printable(line) + "'");
        }
        size = size * 16 + static_cast<std::size_t>(digit);
      }
      if (size == 0) break;
      if (size > options_.max_body_bytes - std::min(body->size(), options_.max_body_bytes)) {
        TooLarge("the response body", options_.max_body_bytes);
      }
      ReadExactly(size, body);
      if (!ReadLine(2, "a chunk's end", "inside a chunk").empty()) {
        Malformed("chunk not followed by CRLF");
      }
    }
    // Trailer fields, up to the empty line; ignored.
    std::size_t budget = options_.max_header_bytes;
    for (;;) {
      const std::string line = ReadLine(budget, "the response's trailer", "inside the trailer");
      if (line.empty()) break;
      budget -= std::min(budget, line.size() + 2);
    }
  }

  // At most 80 bytes of `text`, other bytes than printable ASCII as '?'.
  static std::string Printable(const std::string& text) {
    std::string out = text.substr(0, 80);
    for (char& c : out) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    if (text.size() > 80) out += "...";
    return out;
  }

  const int fd_;
  const Clock::time_point deadline_;
  const Options& options_;
  const std::string& authority_;
  std::string buffer_;
  std::size_t position_ = 0;
  std::size_t received_ = 0;
};

}  // namespace

std::string Endpoint::Authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Endpoint ParseHttpUrl(const std::string& url, const char* field) {
  const auto fail = [&](const std::string& problem) {
    throw model::InputError(field, std::string(field) + " '" + url + "' " + problem);
  };
  const std::string lower = LowerCase(url);
  if (lower.rfind("https://", 0) == 0) {
    fail(
        "uses https, which this client does not speak (no TLS); use http://host:port, "
        "through a local TLS-terminating proxy if the network is not trusted");
  }
  if (lower.rfind("http://", 0) != 0) fail("must start with http:// (e.g. http://127.0.0.1:8470)");
  if (std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    fail("must not contain spaces or control characters");
  }
  std::string_view rest = std::string_view(url).substr(7);
  const std::size_t path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path = path_start == std::string_view::npos ? "" : rest.substr(path_start);
  if (authority.find('@') != std::string_view::npos) {
    fail("must not contain user information (put the token in the token setting instead)");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    fail("must not contain a query or fragment");
  }
  Endpoint endpoint;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) fail("has an unterminated IPv6 address ('[' without ']')");
    endpoint.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail("has text after the IPv6 address");
      port = after.substr(1);
      if (port.empty()) fail("has an empty port");
    }
    if (endpoint.host.empty() ||
        !std::all_of(endpoint.host.begin(), endpoint.host.end(), [](char c) {
          return IsDigit(c) || (Lower(c) >= 'a' && Lower(c) <= 'f') || c == ':' || c == '.';
        })) {
      fail("has a bad IPv6 address");
    }
  } else {
    const std::size_t colon = authority.find(':');
    endpoint.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) fail("has an empty port");
    }
    if (endpoint.host.empty()) fail("has no host");
    if (!std::all_of(endpoint.host.begin(), endpoint.host.end(), [](char c) {
          return IsDigit(c) || (Lower(c) >= 'a' && Lower(c) <= 'z') || c == '-' || c == '.' ||
                 c == '_';
        })) {
      fail("has a bad host name '" + endpoint.host + "'");
    }
  }
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), IsDigit)) {
      fail("has a bad port '" + std::string(port) + "' (must be 1 to 65535)");
    }
    const int number = std::stoi(std::string(port));
    if (number < 1 || number > 65535) {
      fail("has a bad port '" + std::string(port) + "' (must be 1 to 65535)");
    }
    endpoint.port = number;
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  endpoint.prefix = std::string(path);
  return endpoint;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (IsDigit(c) || (Lower(c) >= 'a' && Lower(c) <= 'z') || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

const std::string* Response::Header(std::string_view name) const {
  const std::string* found = nullptr;
  for (const auto& [key, value] : headers) {
    if (key == name) found = &value;
  }
  return found;
}

const char* FailureName(Failure failure) {
  switch (failure) {
    case Failure::kResolve:
      return "resolve";
    case Failure::kConnect:
      return "connect";
    case Failure::kTimeout:
      return "timeout";
    case Failure::kClosed:
      return "closed";
    case Failure::kProtocol:
      return "protocol";
    case Failure::kTooLarge:
      return "too-large";
    case Failure::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

bool IsTransient(Failure failure) {
  return failure == Failure::kResolve || failure == Failure::kConnect ||
         failure == Failure::kTimeout || failure == Failure::kClosed;
}

Response Send(const Endpoint& endpoint, const Request& request, const Options& options) {
  const std::string authority = endpoint.Authority();
  const std::string target = endpoint.prefix + request.target;
  if (request.method.empty() ||
      !std::all_of(request.method.begin(), request.method.end(), IsTokenChar)) {
    throw HttpError(Failure::kProtocol, "invalid request method '" + request.method + "'");
  }
  if (request.target.empty() || request.target.front() != '/' ||
      std::any_of(target.begin(), target.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    throw HttpError(Failure::kProtocol, "invalid request target '" + request.target + "'");
  }
  std::string wire = request.method + " " + target + " HTTP/1.1\r\nHost: " + authority + "\r\n";
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), IsTokenChar) ||
        HasLineBreak(value)) {
      throw HttpError(Failure::kProtocol, "invalid request header '" + name + "'");
    }
    wire += name + ": " + value + "\r\n";
  }
  if (!request.body.empty() || (request.method != "GET" && request.method != "HEAD")) {
    wire += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  wire += "Connection: close\r\n\r\n";
  wire += request.body;

  Socket socket(Connect(endpoint, options, authority));
  const Clock::time_point deadline = DeadlineAfter(options.timeout_s);
  // A server may answer (e.g. 413) and close before taking the whole
  // request: a failed send still reads whatever answer came.
  std::optional<HttpError> send_error;
  try {
    SendAll(socket.fd(), wire, deadline, options, authority);
  } catch (const HttpError& e) {
    if (e.failure() != Failure::kClosed) throw;
    send_error = e;
  }
  try {
    Reader reader(socket.fd(), deadline, options, authority);
    return reader.Read(request.method == "HEAD");
  } catch (const HttpError&) {
    if (send_error) throw *send_error;
    throw;
  }
}

}  // namespace joulepipe::runtime::http
