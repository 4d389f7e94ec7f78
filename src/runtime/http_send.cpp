// http::Send over libcurl's multi interface (http_client.hpp has the
// contract).
//
// Each thread keeps one multi handle and one easy handle (thread_local):
// libcurl's connection cache lives in the multi handle, so consecutive
// requests from a thread reuse their connection. A request is driven by
// curl_multi_poll in slices of at most kCancelSliceMs, so Options::cancelled
// is polled that often whatever the server does.
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "http_client.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::runtime::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kCancelSliceMs = 50;
constexpr int kMaxInterimResponses = 8;

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool HasLineBreak(std::string_view text) {
  return text.find('\r') != std::string_view::npos || text.find('\n') != std::string_view::npos;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r' ||
                           text.front() == '\n')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' ||
                           text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// This thread's handles (see the file comment).
struct Handles {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  Handles() {
    GlobalInit();
    multi = curl_multi_init();
    easy = curl_easy_init();
  }
  ~Handles() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
  Handles(const Handles&) = delete;
  Handles& operator=(const Handles&) = delete;
};

Handles& ThreadHandles() {
  thread_local Handles handles;
  return handles;
}

// What the callbacks collect, with the bounds they enforce.
struct Exchange {
  const Options* options = nullptr;
  std::string authority;
  Response response;
  std::size_t header_bytes = 0;
  int interim = 0;
  bool too_large = false;
  std::string too_large_what;
  bool bad_status = false;
};

std::size_t OnHeader(char* data, std::size_t size, std::size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::size_t bytes = size * n;
  x->header_bytes += bytes;
  if (x->header_bytes > x->options->max_header_bytes) {
    x->too_large = true;
    x->too_large_what = model::Format(
        "the response's status line and headers from %s exceed "
        "the limit of %zu bytes",
        x->authority.c_str(), x->options->max_header_bytes);
    return 0;  // aborts the transfer
  }
  const std::string_view line = Trim(std::string_view(data, bytes));
  if (line.rfind("HTTP/", 0) == 0) {
    // A status line: a new response (after a 1xx, the real one).
    const std::size_t space = line.find(' ');
    int status = 0;
    if (space != std::string_view::npos && line.size() >= space + 4) {
      const std::string_view code = line.substr(space + 1, 3);
      if (std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
      }
    }
    if (status < 100 || status > 599) {
      x->bad_status = true;
      return 0;
    }
    if (x->response.status >= 100 && x->response.status < 200 &&
        ++x->interim > kMaxInterimResponses) {
      x->bad_status = true;
      return 0;
    }
    x->response = Response{};
    x->response.status = status;
    x->response.reason = std::string(space != std::string_view::npos && line.size() > space + 5
                                         ? Trim(line.substr(space + 5))
                                         : std::string_view());
    return bytes;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return bytes;  // the blank line, or junk
  x->response.headers.emplace_back(LowerCase(Trim(line.substr(0, colon))),
                                   std::string(Trim(line.substr(colon + 1))));
  return bytes;
}

std::size_t OnBody(char* data, std::size_t size, std::size_t n, void* user) {
  auto* x = static_cast<Exchange*>(user);
  const std::size_t bytes = size * n;
  if (x->response.body.size() + bytes > x->options->max_body_bytes) {
    x->too_large = true;
    x->too_large_what = model::Format("the response body from %s exceeds the limit of %zu bytes",
                                      x->authority.c_str(), x->options->max_body_bytes);
    return 0;
  }
  x->response.body.append(data, bytes);
  return bytes;
}

// libcurl's result as one of ours.
Failure FailureOf(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_HOST:
      return Failure::kResolve;
    case CURLE_COULDNT_CONNECT:
      return Failure::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return Failure::kTimeout;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
      return Failure::kClosed;
    case CURLE_FILESIZE_EXCEEDED:
      return Failure::kTooLarge;
    default:
      return Failure::kProtocol;  // malformed answers, TLS and certificate failures, ...
  }
}

struct SlistFree {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

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
  std::unique_ptr<curl_slist, SlistFree> headers;
  auto add_header = [&](const std::string& line) {
    curl_slist* grown = curl_slist_append(headers.get(), line.c_str());
    if (grown == nullptr) throw HttpError(Failure::kProtocol, "out of memory for a header");
    (void)headers.release();
    headers.reset(grown);
  };
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), IsTokenChar) ||
        HasLineBreak(value)) {
      throw HttpError(Failure::kProtocol, "invalid request header '" + name + "'");
    }
    add_header(name + ": " + value);
  }
  add_header("Expect:");  // no 100-continue round trip before a large upload
  add_header("Accept:");

  Handles& h = ThreadHandles();
  if (h.multi == nullptr || h.easy == nullptr) {
    throw HttpError(Failure::kProtocol, "libcurl could not be initialised");
  }
  CURL* easy = h.easy;
  curl_easy_reset(easy);  // keeps the connections, forgets the last request's options
  Exchange x;
  x.options = &options;
  x.authority = authority;
  char error_text[CURL_ERROR_SIZE] = "";
  const std::string url = endpoint.Url(request.target);
  const auto ms = [](double s) { return static_cast<long>(std::max(1.0, s * 1000)); };
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, ms(options.connect_timeout_s));
  // A backstop: the exchange's own limit (timeout_s from the moment the
  // request can go out) is enforced in the loop below.
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, ms(options.connect_timeout_s + options.timeout_s + 1));
  curl_easy_setopt(easy, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(options.max_body_bytes));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error_text);
  // A reply without a status line arrives as an HTTP/0.9 body, so that it
  // can be named below (not a bare "unsupported protocol").
  curl_easy_setopt(easy, CURLOPT_HTTP09_ALLOWED, 1L);
  if (!options.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, options.ca_file.c_str());
  const bool send_body =
      !request.body.empty() || (request.method != "GET" && request.method != "HEAD");
  if (request.method == "HEAD") {
    curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (send_body) {
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    if (request.method != "POST") {
      curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
  } else if (request.method != "GET") {
    curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  curl_multi_add_handle(h.multi, easy);
  struct Remove {
    CURLM* multi;
    CURL* easy;
    ~Remove() { curl_multi_remove_handle(multi, easy); }
  } remove{h.multi, easy};
  std::optional<CURLcode> done;
  const Clock::time_point started = Clock::now();
  std::optional<Clock::time_point> exchange_deadline;
  for (;;) {
    int running = 0;
    const CURLMcode m = curl_multi_perform(h.multi, &running);
    if (m != CURLM_OK) {
      throw HttpError(Failure::kProtocol,
                      authority + ": libcurl failed: " + curl_multi_strerror(m));
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(h.multi, &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) done = msg->data.result;
    }
    if (done) break;
    if (options.cancelled && options.cancelled()) {
      throw HttpError(Failure::kCancelled, "request to " + authority + " cancelled");
    }
    if (!exchange_deadline) {
      // Connected (or on a kept connection): the request can go out now.
      curl_off_t pretransfer_us = 0;
      curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
      if (pretransfer_us > 0) {
        exchange_deadline = started + std::chrono::microseconds(pretransfer_us) +
                            std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(std::max(0.0, options.timeout_s)));
      }
    } else if (Clock::now() > *exchange_deadline) {
      throw HttpError(Failure::kTimeout,
                      (x.response.status == 0 ? "no answer from " : "incomplete answer from ") +
                          authority + " within " + model::Format("%g s", options.timeout_s));
    }
    curl_multi_poll(h.multi, nullptr, 0, kCancelSliceMs, nullptr);
  }
  if (x.too_large) {
    throw HttpError(Failure::kTooLarge, authority + ": " + x.too_large_what);
  }
  if (x.bad_status) {
    throw HttpError(Failure::kProtocol, authority + ": not a well-formed HTTP/1.x status line");
  }
  if (*done != CURLE_OK) {
    const Failure failure = FailureOf(*done);
    const std::string detail = error_text[0] != '\0' ? error_text : curl_easy_strerror(*done);
    switch (*done) {
      case CURLE_FILESIZE_EXCEEDED: {
        const std::string* length = x.response.Header("content-length");
        throw HttpError(
            failure, model::Format("%s announced a response body of %s bytes, over "
                                   "the limit of %zu bytes",
                                   authority.c_str(), length != nullptr ? length->c_str() : "more",
                                   options.max_body_bytes));
      }
      case CURLE_OPERATION_TIMEDOUT:
        throw HttpError(failure, model::Format("connecting to %s timed out after %g s",
                                               authority.c_str(), options.connect_timeout_s));
      case CURLE_COULDNT_CONNECT: {
        long os_errno = 0;
        curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
        throw HttpError(failure,
                        "cannot connect to " + authority + ": " +
                            (os_errno != 0 ? std::strerror(static_cast<int>(os_errno)) : detail));
      }
      case CURLE_COULDNT_RESOLVE_HOST:
        throw HttpError(failure, "cannot resolve host '" + endpoint.host + "': " + detail);
      case CURLE_GOT_NOTHING:
        throw HttpError(failure, authority + " closed the connection without answering");
      default:
        throw HttpError(failure, authority + ": " + detail);
    }
  }
  if (x.response.status < 200 && x.response.status != 0 && x.response.status >= 100) {
    throw HttpError(Failure::kProtocol, authority + ": the answer ended after an interim response");
  }
  if (x.response.status == 0) {
    if (x.response.body.empty()) {
      throw HttpError(Failure::kClosed, authority + " closed the connection without answering");
    }
    const std::string first = x.response.body.substr(0, x.response.body.find_first_of("\r\n"));
    throw HttpError(Failure::kProtocol, authority +
                                            " did not answer with HTTP/1.x: bad status "
                                            "line '" +
                                            first.substr(0, 60) + "'");
  }
  return std::move(x.response);
}

}  // namespace joulepipe::runtime::http
