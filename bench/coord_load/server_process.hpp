// The server under test: `joulepipe serve` started as a child process, its
// log read line by line, and its stop timed.
// Included by bench/coord_load.cpp only (one translation unit).
#pragma once

#include "common.hpp"

namespace {

// ---- The server process ----------------------------------------------------

std::atomic<pid_t> g_server_pid{-1};

// The server's output (stdout and stderr), kept in a file and its last lines.
class ServerLog {
 public:
  void Add(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    if (file_) std::fprintf(file_, "%s\n", line.c_str());
    tail_.push_back(line);
    if (tail_.size() > 40) tail_.pop_front();
  }
  void Open(const std::string& path) { file_ = std::fopen(path.c_str(), "we"); }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    if (file_) std::fclose(file_);
    file_ = nullptr;
  }
  std::vector<std::string> Tail() {
    std::lock_guard<std::mutex> lock(mu_);
    return {tail_.begin(), tail_.end()};
  }

 private:
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  std::deque<std::string> tail_;
};

struct ServerProcess {
  pid_t pid = -1;
  int out = -1;  // the read end of its stdout+stderr
  int port = 0;
  std::string pending;  // output read but not yet split into lines
  std::thread drain;
};

// Splits complete lines off `pending`.
void TakeLines(std::string* pending, const std::function<void(const std::string&)>& each) {
  for (std::size_t eol; (eol = pending->find('\n')) != std::string::npos;) {
    std::string line = pending->substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    pending->erase(0, eol + 1);
    each(line);
  }
}

// Starts the server and waits (up to 60 s) for the line naming its port.
bool StartServer(const std::string& binary, const std::string& db,
                 const std::vector<std::string>& extra, ServerProcess* server, ServerLog* log,
                 std::string* error) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(127);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    std::vector<const char*> argv = {binary.c_str(), "serve", "--host", "127.0.0.1", "--port", "0"};
    if (!db.empty()) {
      argv.push_back("--db");
      argv.push_back(db.c_str());
    }
    for (const std::string& a : extra) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), const_cast<char* const*>(argv.data()));
    const char message[] = "bench_coord_load: exec of the server failed\n";
    (void)!::write(2, message, sizeof message - 1);
    _exit(127);
  }
  ::close(fds[1]);
  server->pid = pid;
  server->out = fds[0];
  g_server_pid = pid;

  const SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::seconds(60);
  char buf[4096];
  while (server->port == 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    if (left.count() <= 0) {
      *error = "the server printed no \"listening on http://...\" line within 60 s";
      return false;
    }
    pollfd p{server->out, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(server->out, buf, sizeof buf);
    if (n <= 0) {
      *error = "the server exited before it listened";
      return false;
    }
    server->pending.append(buf, static_cast<std::size_t>(n));
    TakeLines(&server->pending, [&](const std::string& line) {
      log->Add(line);
      const std::size_t at = line.find("listening on http://");
      if (at == std::string::npos || server->port != 0) return;
      const std::size_t colon = line.find(':', at + std::strlen("listening on http://"));
      if (colon != std::string::npos) server->port = std::atoi(line.c_str() + colon + 1);
    });
  }
  server->drain = std::thread([server, log] {
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(server->out, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      server->pending.append(chunk, static_cast<std::size_t>(n));
      TakeLines(&server->pending, [&](const std::string& line) { log->Add(line); });
    }
    if (!server->pending.empty()) log->Add(server->pending);
  });
  return true;
}

// SIGTERM, then up to 15 s for the exit (SIGKILL after). Returns the time
// it took and how it ended.
std::string StopServer(ServerProcess* server, double* seconds) {
  std::string how;
  const double start = Now();
  if (server->pid > 0) {
    ::kill(server->pid, SIGTERM);
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(server->pid, &status, WNOHANG)) == 0 && Now() - start < 15) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (done == 0) {
      ::kill(server->pid, SIGKILL);
      ::waitpid(server->pid, &status, 0);
      how = "did not exit within 15 s of SIGTERM; killed";
    } else if (WIFEXITED(status)) {
      how = "exited with status " + std::to_string(WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
      how = std::string("ended by signal ") + strsignal(WTERMSIG(status));
    }
    g_server_pid = -1;
    server->pid = -1;
  }
  *seconds = Now() - start;
  if (server->drain.joinable()) server->drain.join();
  if (server->out >= 0) ::close(server->out);
  server->out = -1;
  return how;
}

}  // namespace
