#include "http_framing.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace joulepipe::daemon {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 &&
               HexDigit(s[i + 2]) >= 0) {
      out += static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

HttpCut CutRequest(std::string* buffer) {
  HttpCut cut;
  const std::size_t end = buffer->find("\r\n\r\n");
  if (end == std::string::npos) {
    if (buffer->size() > kMaxHeadBytes) {
      cut.refusal = HttpRefusal{431, "the request's head is over 16 KiB"};
    }
    return cut;
  }
  if (end + 4 > kMaxHeadBytes) {
    cut.refusal = HttpRefusal{431, "the request's head is over 16 KiB"};
    return cut;
  }
  const std::string_view head(buffer->data(), end);
  const std::size_t line_end = head.find("\r\n");
  const std::string_view line = head.substr(0, line_end);
  // "METHOD TARGET HTTP/1.x"
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 ||
      sp2 == sp1 + 1 || line.find(' ', sp2 + 1) != std::string_view::npos) {
    cut.refusal = HttpRefusal{400, "the request line is not \"METHOD /path HTTP/1.1\""};
    return cut;
  }
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    cut.refusal = HttpRefusal{400, "only HTTP/1.1 and HTTP/1.0 are spoken here"};
    return cut;
  }
  HttpRequest request;
  request.method = std::string(line.substr(0, sp1));
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (target.empty() || target.front() != '/') {
    cut.refusal = HttpRefusal{400, "the request target must be a path (\"/discover\")"};
    return cut;
  }
  const std::size_t q = target.find('?');
  request.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) request.query = std::string(target.substr(q + 1));
  request.keep_alive = version == "HTTP/1.1";

  std::size_t body_bytes = 0;
  bool has_length = false;
  std::size_t at = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (at < head.size()) {
    std::size_t next = head.find("\r\n", at);
    if (next == std::string_view::npos) next = head.size();
    const std::string_view field = head.substr(at, next - at);
    at = next + 2;
    const std::size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      cut.refusal = HttpRefusal{400, "a header line has no \"name: value\" form"};
      return cut;
    }
    const std::string name = Lower(field.substr(0, colon));
    const std::string_view value = Trim(field.substr(colon + 1));
    if (name == "content-length") {
      std::size_t n = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || ptr != value.data() + value.size() || value.empty() ||
          (has_length && n != body_bytes)) {
        cut.refusal = HttpRefusal{400, "Content-Length is not one decimal number"};
        return cut;
      }
      has_length = true;
      body_bytes = n;
    } else if (name == "transfer-encoding") {
      cut.refusal = HttpRefusal{
          411, "bodies are framed by Content-Length here (zeusd's routes take no body)"};
      return cut;
    } else if (name == "connection") {
      const std::string v = Lower(value);
      if (v.find("close") != std::string::npos) request.keep_alive = false;
      if (v.find("keep-alive") != std::string::npos) request.keep_alive = true;
    }
  }
  if (body_bytes > kMaxBodyBytes) {
    cut.refusal = HttpRefusal{413, "the request's body is over 64 KiB"};
    return cut;
  }
  if (buffer->size() < end + 4 + body_bytes) return cut;  // the body is still coming
  buffer->erase(0, end + 4 + body_bytes);
  cut.request = std::move(request);
  return cut;
}

std::string HttpAnswer(int status, std::string_view content_type, std::string_view body,
                       bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + Reason(status) +
                    "\r\nContent-Type: " + std::string(content_type) +
                    "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  out += body;
  return out;
}

std::string HttpEventStreamHead() {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         "Connection: close\r\n\r\n";
}

std::optional<std::string> QueryValue(std::string_view query, std::string_view key) {
  std::size_t at = 0;
  while (at <= query.size()) {
    std::size_t next = query.find('&', at);
    if (next == std::string_view::npos) next = query.size();
    const std::string_view pair = query.substr(at, next - at);
    const std::size_t eq = pair.find('=');
    const std::string name = PercentDecode(pair.substr(0, eq));
    if (name == key) {
      return eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1));
    }
    at = next + 1;
  }
  return std::nullopt;
}

}  // namespace joulepipe::daemon
