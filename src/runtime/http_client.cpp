// The HTTP client's URL parsing, encoding and names (http_client.hpp has
// the contract; Send is http_send.cpp, over libcurl).
#include "http_client.hpp"

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

char Lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::string LowerCase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = Lower(c);
  return out;
}

std::string Endpoint::Url(const std::string& target) const {
  return std::string(tls ? "https://" : "http://") + Authority() + prefix + target;
}

std::string Endpoint::Authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Endpoint ParseHttpUrl(const std::string& url, const char* field) {
  const auto fail = [&](const std::string& problem) {
    throw model::InputError(field, std::string(field) + " '" + url + "' " + problem);
  };
  const std::string lower = LowerCase(url);
  const bool tls = lower.rfind("https://", 0) == 0;
  if (!tls && lower.rfind("http://", 0) != 0) {
    fail("must start with http:// or https:// (e.g. http://127.0.0.1:8470)");
  }
  if (std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    fail("must not contain spaces or control characters");
  }
  std::string_view rest = std::string_view(url).substr(tls ? 8 : 7);
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
  endpoint.tls = tls;
  endpoint.port = tls ? 443 : 80;
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

}  // namespace joulepipe::runtime::http
