// A tiny blocking HTTP/1.1 client for the tests of `joulepipe serve`
// (tests/serve, tests/cli/serve_command_test.cpp): one request per
// connection ("Connection: close"), the answer read until the server closes.
// Split into Send and Read so a test can hold many requests open at once.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace joulepipe::serve::testing {

struct HttpResponse {
  int status = 0;                              // 0: no answer (connection failed or closed early)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  nlohmann::json Json() const { return nlohmann::json::parse(body); }
  std::string Header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

// A connected socket to 127.0.0.1:port, or -1.
inline int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Sends one request; Content-Length is added for a non-empty body unless
// `headers` set Content-Length or Transfer-Encoding themselves.
inline bool SendRequest(int fd, const std::string& method, const std::string& target,
                        const std::string& body = "", const Headers& headers = {}) {
  std::string request = method + " " + target +
                        " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Connection: close\r\n";
  bool framed = false;
  for (const auto& [name, value] : headers) {
    request += name + ": " + value + "\r\n";
    std::string lower;
    for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    framed = framed || lower == "content-length" || lower == "transfer-encoding";
  }
  if (!framed && (!body.empty() || method == "POST" || method == "PUT")) {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  return SendAll(fd, request);
}

// Reads the answer until the server closes (or `timeout_s` passes: status
// 0), then closes `fd`.
inline HttpResponse ReadResponse(int fd, double timeout_s = 30) {
  HttpResponse r;
  std::string raw;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      ::close(fd);
      return HttpResponse{};
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const std::size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.compare(0, 9, "HTTP/1.1 ") != 0) return r;
  r.status = std::stoi(raw.substr(9, 3));
  std::size_t at = raw.find("\r\n") + 2;
  while (at < end) {
    const std::size_t eol = raw.find("\r\n", at);
    const std::string line = raw.substr(at, eol - at);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name;
      for (char c : line.substr(0, colon)) {
        name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      std::size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers[name] = line.substr(v);
    }
    at = eol + 2;
  }
  r.body = raw.substr(end + 4);
  return r;
}

// One whole exchange.
inline HttpResponse Http(int port, const std::string& method, const std::string& target,
                         const std::string& body = "", const Headers& headers = {},
                         double timeout_s = 30) {
  const int fd = Connect(port);
  if (fd < 0) return HttpResponse{};
  if (!SendRequest(fd, method, target, body, headers)) {
    // The server may answer (401, 413) before the whole body went out.
    return ReadResponse(fd, timeout_s);
  }
  return ReadResponse(fd, timeout_s);
}

// `text` with every byte outside [A-Za-z0-9-._~] as %XX.
inline std::string Encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// A 2-stage profile (three SM clocks; stage 1 is the slower one) that plans
// in milliseconds. Without p_block_w metadata: jobs give p_block_w.
inline std::string TinyProfileCsv() {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  const int clocks[] = {1410, 1200, 1000};
  const double forward_s[] = {0.010, 0.0112, 0.0130};
  const double forward_j[] = {2.6, 2.1, 1.8};
  for (int stage = 0; stage < 2; ++stage) {
    const double scale = stage == 0 ? 1.0 : 1.25;
    for (int k = 0; k < 3; ++k) {
      csv += std::to_string(stage) + ",forward," + std::to_string(clocks[k]) + "," +
             std::to_string(forward_s[k] * scale) + "," + std::to_string(forward_j[k] * scale) +
             "\n";
      csv += std::to_string(stage) + ",backward," + std::to_string(clocks[k]) + "," +
             std::to_string(2 * forward_s[k] * scale) + "," +
             std::to_string(2 * forward_j[k] * scale) + "\n";
    }
  }
  return csv;
}

// A profile of `stages` stages measured at `settings` clocks from 600 to
// 1980 MHz (a plausible GPU curve: every clock on the cost hull), for jobs
// whose solve cost grows with the clock settings.
inline std::string WideProfileCsv(int stages, int settings) {
  std::string csv = "stage,instruction,frequency,time,energy\n";
  char line[160];
  for (int stage = 0; stage < stages; ++stage) {
    for (int backward = 0; backward < 2; ++backward) {
      const double t_top = (backward ? 0.020 : 0.010) * (1 + 0.03 * stage);
      for (int k = 0; k < settings; ++k) {
        const int mhz = 600 + static_cast<int>(1380.0 * k / (settings - 1) + 0.5);
        const double x = mhz / 1980.0;
        const double time_s = t_top * (0.35 + 0.65 / x);
        const double energy_j = (90 + 300 * std::pow(x, 2.4)) * time_s;
        std::snprintf(line, sizeof line, "%d,%s,%d,%.9g,%.9g\n", stage,
                      backward ? "backward" : "forward", mhz, time_s, energy_j);
        csv += line;
      }
    }
  }
  return csv;
}

}  // namespace joulepipe::serve::testing
