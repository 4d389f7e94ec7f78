#include "joulepipe/serve/server.hpp"

#include <arpa/inet.h>
#include <sys/resource.h>

#include <cstring>
#include <mutex>

#include "http_server.hpp"
#include "joulepipe/model/format.hpp"
#include "service.hpp"

namespace joulepipe::serve {

namespace {

using model::Format;

// Raises the soft open-file limit to the hard one: every parked rank holds
// a socket. Returns the soft limit in force.
rlim_t RaiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return raised.rlim_cur;
  }
  return limit.rlim_cur;
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

struct Server::Impl {
  ServerOptions options;
  std::unique_ptr<Service> service;
  std::unique_ptr<HttpServer> http;
  std::mutex stop_mu;
  bool stopped = false;
};

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  const rlim_t files = RaiseFileLimit();
  s.service = std::make_unique<Service>(s.options);
  Service* service = s.service.get();
  const std::string host = s.options.host;
  if (files != 0 && files != RLIM_INFINITY &&
      files < static_cast<rlim_t>(s.options.max_connections) + 64) {
    service->Log(
        Format("warning: the open-file limit is %llu, below ServerOptions::"
               "max_connections (%d) plus the server's own files; raise it (ulimit -n) "
               "or lower the connection limit",
               static_cast<unsigned long long>(files), s.options.max_connections));
  }
  // If this throws, ~Impl destroys the service, whose destructor stops it.
  s.http = std::make_unique<HttpServer>(
      s.options, service, [service](const std::string& line) { service->Log(line); },
      [service](const std::string& route, int status, double handling_s, double parked_s) {
        service->ObserveRequest(route, status, handling_s, parked_s);
      });
  if (s.options.token.empty() && !IsLoopbackHost(host)) {
    service->Log(
        Format("warning: listening on %s, which is not a loopback address, without a "
               "token (ServerOptions::token): anyone who can reach port %d can register "
               "jobs and change their plans",
               host.c_str(), s.http->port()));
  }
}

Server::~Server() {
  Stop();
}

void Server::Stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->service->BeginStop(5);  // parked requests are answered 503 first
  impl_->http->Stop();
  impl_->service->Finish();
}

int Server::port() const {
  return impl_->http->port();
}

std::string Server::url() const {
  const std::string& host = impl_->options.host;
  const bool v6 = host.find(':') != std::string::npos;
  return Format(v6 ? "http://[%s]:%d" : "http://%s:%d", host.c_str(), port());
}

bool Server::persistent() const {
  return impl_->service->persistent();
}
int Server::restored_jobs() const {
  return impl_->service->restored_jobs();
}
int Server::jobs() const {
  return impl_->service->jobs();
}
int Server::waiting_requests() const {
  return impl_->service->waiting();
}

}  // namespace joulepipe::serve
