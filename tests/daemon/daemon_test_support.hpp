// Running the built joulepiped (JOULEPIPE_DAEMON) against the simulated NVML
// library in a child process, with its socket, configuration, audit log and
// the simulated library's state file and call log in a temporary directory.
// The test process never loads NVML itself: it observes the GPUs through the
// daemon (list_devices) and the simulated library's call log.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace joulepipe::daemon::testing {

using nlohmann::json;

#define EXPECT_CONTAINS(text, needle)                          \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) \
      << "\"" << (needle) << "\" not in: " << (text)

inline std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Polls `done` every 10 ms for up to `seconds`.
inline bool WaitFor(const std::function<bool()>& done, double seconds = 10) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// A raw protocol connection (blocking, 10 s timeouts).
class RawClient {
 public:
  explicit RawClient(const std::string& socket_path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
    const timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Sends bytes as they are (no newline added); false if the send failed.
  bool SendRaw(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }
  // The next reply line; "" at EOF or timeout.
  std::string ReadLine() {
    for (;;) {
      const std::size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      char chunk[65536];
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // The next `n` bytes (fewer at EOF or timeout).
  std::string ReadBytes(std::size_t n) {
    while (buffer_.size() < n) {
      char chunk[65536];
      const ssize_t got = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (got <= 0) break;
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
    std::string bytes = buffer_.substr(0, std::min(n, buffer_.size()));
    buffer_.erase(0, bytes.size());
    return bytes;
  }
  // True when the daemon has closed the connection within 10 s: EOF, or a
  // reset when it closed with our unread bytes in its queue.
  bool AtEof() {
    char byte;
    if (!buffer_.empty()) return false;
    const ssize_t n = ::recv(fd_, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  // Sends `line` and reads the reply; a failed send still reads, since a
  // refusing daemon may have answered and closed before the request.
  json Request(const std::string& line) {
    SendRaw(line + "\n");
    const std::string reply = ReadLine();
    if (reply.empty()) return json{{"ok", false}, {"error", "<no reply>"}};
    return json::parse(reply);
  }
  json Request(const json& request) { return Request(request.dump()); }
  json Hello() { return Request(json{{"op", "hello"}, {"version", 1}}); }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

struct DaemonOptions {
  json daemon_config = json::object();  // merged into {"socket": ..., "audit_log": ...}
  std::vector<std::string> extra_args;
  int gpus = 3;        // the last one in MIG mode when >= 3
  bool zeusd = false;  // also serve the zeusd API, on zeusd_socket()
};

// A temporary directory holding the daemon's files, removed at the end.
class DaemonFixture {
 public:
  using Options = DaemonOptions;

  // Options with `config` merged into the daemon's configuration.
  static Options With(json config, std::vector<std::string> args = {}) {
    Options options;
    options.daemon_config = std::move(config);
    options.extra_args = std::move(args);
    return options;
  }

  explicit DaemonFixture(const Options& options = Options()) {
    std::random_device random;
    dir_ = std::filesystem::temp_directory_path() /
           ("joulepiped-test-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms::all);  // nobody may connect
    json sim = {{"count", options.gpus},
                {"permissions", {{"clocks", true}, {"power_limit", true}}},
                {"state_file", (dir_ / "state.json").string()},
                {"call_log", call_log().string()}};
    if (options.gpus >= 3) {
      sim["devices"] = json::array();
      for (int i = 0; i < options.gpus; ++i) {
        sim["devices"].push_back(i == options.gpus - 1 ? json{{"mig", true}} : json::object());
      }
    }
    std::ofstream(dir_ / "sim.json") << sim.dump();
    json config = {{"socket", socket()}, {"audit_log", audit_log().string()}};
    if (options.zeusd) config["zeusd_socket"] = zeusd_socket();
    for (const auto& [key, value] : options.daemon_config.items()) config[key] = value;
    std::ofstream(dir_ / "joulepiped.json") << config.dump();
    Start(options.extra_args);
  }

  ~DaemonFixture() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  DaemonFixture(const DaemonFixture&) = delete;
  DaemonFixture& operator=(const DaemonFixture&) = delete;

  std::string socket() const { return (dir_ / "d.sock").string(); }
  std::string zeusd_socket() const { return (dir_ / "z.sock").string(); }
  std::filesystem::path dir() const { return dir_; }
  std::filesystem::path call_log() const { return dir_ / "calls.jsonl"; }
  std::filesystem::path audit_log() const { return dir_ / "audit.log"; }
  std::string stderr_text() const { return ReadText(dir_ / "stderr.txt"); }
  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }

  // The simulated library's call log, one JSON object per setter call.
  std::vector<json> Calls() const {
    std::vector<json> calls;
    std::ifstream in(call_log());
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) calls.push_back(json::parse(line));
    }
    return calls;
  }
  // Calls of `function` on NVML device `device` with NVML_SUCCESS.
  int CountCalls(const std::string& function, int device) const {
    int count = 0;
    for (const json& call : Calls()) {
      if (call["function"] == function && call["device"] == device && call["result"] == 0) ++count;
    }
    return count;
  }

  // SIGTERM, then the exit status (waitpid's).
  int Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  void Start(const std::vector<std::string>& extra_args) {
    std::vector<std::string> args = {JOULEPIPE_DAEMON, "--config",
                                     (dir_ / "joulepiped.json").string()};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const std::string err = (dir_ / "stderr.txt").string();
    const std::string sim = (dir_ / "sim.json").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setenv("JOULEPIPE_NVML_LIBRARY", JOULEPIPE_SIM_NVML, 1);
      ::setenv("JOULEPIPE_SIM_NVML_CONFIG", sim.c_str(), 1);
      ::unsetenv("JOULEPIPE_SIM_NVML_GPU");
      ::unsetenv("JOULEPIPE_SIM_NVML_COUNT");
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ready_ = WaitFor([&] {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return true;  // exited: not ready
      }
      return std::filesystem::exists(socket()) &&
             stderr_text().find("listening") != std::string::npos;
    });
    ready_ = ready_ && pid_ > 0;
  }

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace joulepipe::daemon::testing
