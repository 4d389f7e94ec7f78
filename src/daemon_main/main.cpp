// joulepiped: the privileged clock daemon (docs/daemon.md).
//
// Signals: SIGTERM, SIGINT and SIGHUP are blocked and read through a
// signalfd that the server polls, so shutdown (restoring every GPU) runs in
// the normal flow of the program, not in a signal handler. SIGPIPE is
// ignored (replies use MSG_NOSIGNAL; the audit log may be a pipe).
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include <CLI/CLI.hpp>

#include "joulepipe/daemon/audit_log.hpp"
#include "joulepipe/daemon/config.hpp"
#include "joulepipe/daemon/handler.hpp"
#include "joulepipe/daemon/server.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"
#include "joulepipe/gpu/nvml.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/number_form.hpp"

namespace {

using joulepipe::daemon::Config;

// The daemon library names its configuration fields ("Config::socket"); the
// file calls them "socket" and joulepiped's flags override them. An error
// about one names both places it can be set.
std::string WhereSet(const std::string& field) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"Config::socket", "--socket"},
      {"Config::zeusd_socket", "--zeusd-socket"},
      {"Config::socket_group", "--socket-group"},
      {"Config::socket_mode", "--socket-mode"},
      {"Config::audit_log", "--audit-log"},
      {"Config::max_clients", "--max-clients"},
      {"Config::max_clients_per_uid", "--max-clients-per-uid"},
      {"Config::hello_timeout_s", "--hello-timeout"},
      {"Config::idle_timeout_s", "--idle-timeout"},
  };
  for (const auto& [name, flag] : kFlags) {
    if (field == name) {
      return std::string(" (\"") + (name + std::string_view("Config::").size()) +
             "\" in the configuration file, or " + flag + ")";
    }
  }
  return "";
}

// A flag value that must be a number of seconds in [lo, hi]; `range` spells
// the interval for messages. (CLI::Range would print "0.010000 to
// 86400.000000" and call a non-number out of range.)
CLI::Validator SecondsIn(double lo, double hi, const std::string& range) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !(value >= lo && value <= hi)) {
          return "must be a number of seconds in " + range + " (got \"" +
                 joulepipe::model::ExcerptText(text) + "\")";
        }
        return "";
      },
      "SECONDS in " + range);
}

// Numbers in decimal only (model/number_form.hpp): CLI11 would read
// --max-clients 0x10 as 16 and 010 as 8.
CLI::Validator DecimalOnly() {
  return CLI::Validator([](std::string& text) { return joulepipe::model::NonDecimalProblem(text); },
                        "");
}

int Serve(const Config& config, const std::string& config_source) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  if (::sigprocmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    std::perror("joulepiped: sigprocmask");
    return 1;
  }
  ::signal(SIGPIPE, SIG_IGN);
  const int stop_fd = ::signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (stop_fd < 0) {
    std::perror("joulepiped: signalfd");
    return 1;
  }

  // Each client takes two descriptors (its socket and a pidfd watching its
  // process): raise the soft limit to the hard one so max_clients fit.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }

  joulepipe::daemon::AuditLog audit(config.audit_log);
  const joulepipe::gpu::NvmlInfo& nvml = joulepipe::gpu::Nvml();
  joulepipe::daemon::Handler handler(&audit);
  {
    joulepipe::daemon::Server server(config, config_source, &handler);
    std::fprintf(stderr,
                 "joulepiped: listening on %s (mode %04o, protocol %d), %zu GPU(s) via %s%s; "
                 "audit log %s; at most %d clients, %d per uid (root exempt); hello within "
                 "%g s, idle clients without a lease closed after %g s\n",
                 config.socket.c_str(), config.socket_mode, joulepipe::gpu::kDaemonProtocolVersion,
                 handler.device_count(), nvml.path.c_str(), nvml.simulated ? " (simulated)" : "",
                 config.audit_log.empty() ? "stderr" : config.audit_log.c_str(), config.max_clients,
                 config.max_clients_per_uid, config.hello_timeout_s, config.idle_timeout_s);
    if (!config.zeusd_socket.empty()) {
      std::fprintf(stderr,
                   "joulepiped: zeusd API on %s (Zeus: ZEUSD_SOCK_PATH=%s); a Zeus process's "
                   "settings are restored when it exits\n",
                   config.zeusd_socket.c_str(), config.zeusd_socket.c_str());
    }
    std::fflush(stderr);
    server.Run(stop_fd);
  }  // the Server's destructor restores remaining GPUs and unlinks the socket
  handler.RestoreAll("daemon shutdown");
  signalfd_siginfo info{};
  const bool got_signal = ::read(stop_fd, &info, sizeof(info)) == sizeof(info);
  std::fprintf(stderr, "joulepiped: %s; every GPU changed through it was restored\n",
               got_signal
                   ? (std::string("stopped by signal ") + std::to_string(info.ssi_signo)).c_str()
                   : "stopped");
  ::close(stop_fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "joulepiped: lets unprivileged training jobs set GPU SM clocks and power limits.\n"
      "Listens on a Unix socket; clients allowed by --allow-user/--allow-group (root always)\n"
      "may lock clocks and set power limits; every change is restored to the default when\n"
      "the client's connection closes (exit, crash, kill -9) and when the daemon stops.\n"
      "See docs/daemon.md.",
      "joulepiped"};
  std::string config_path = joulepipe::daemon::kDefaultConfigPath;
  std::string socket;
  std::string zeusd_socket;
  std::vector<std::string> allow_users;
  std::vector<std::string> allow_groups;
  std::string audit_log;
  std::string socket_mode;
  std::string socket_group;
  int max_clients = 0;
  int max_clients_per_uid = 0;
  double hello_timeout_s = 0;
  double idle_timeout_s = 0;
  auto* config_option =
      app.add_option(
             "--config", config_path,
             "JSON configuration file (fields: socket, zeusd_socket, socket_mode, socket_group, "
             "allow_users, allow_groups, audit_log, max_clients, max_clients_per_uid, "
             "hello_timeout_s, idle_timeout_s); flags override it")
          ->capture_default_str();
  app.add_option("--socket", socket, "Unix socket path (default /run/joulepiped.sock)");
  app.add_option("--zeusd-socket", zeusd_socket,
                 "also serve Zeus's daemon API (HTTP) on this Unix socket, for Zeus processes "
                 "run with ZEUSD_SOCK_PATH=PATH; their clocks and power limits are restored when "
                 "the process that set them exits (default: off)");
  app.add_option("--allow-user", allow_users,
                 "user name or uid allowed to connect (repeatable; adds to the file's list)");
  app.add_option("--allow-group", allow_groups,
                 "group name or gid whose members may connect (repeatable; adds to the file's)");
  app.add_option("--audit-log", audit_log,
                 "append one line per GPU change to this file (default: stderr)");
  app.add_option("--socket-mode", socket_mode, "octal mode of the socket file (default 0660)");
  app.add_option("--socket-group", socket_group, "group owning the socket file");
  app.add_option("--max-clients", max_clients, "most clients served at once (default 64)")
      ->check(DecimalOnly())
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-clients-per-uid", max_clients_per_uid,
                 "most connections of one uid at once; root is exempt (default 16)")
      ->check(DecimalOnly())
      ->check(CLI::Range(1, 4096));
  app.add_option("--hello-timeout", hello_timeout_s,
                 "seconds a new connection has to say hello before it is closed (default 5)")
      ->check(DecimalOnly())
      ->check(SecondsIn(0.01, 3600, "[0.01, 3600]"));
  app.add_option("--idle-timeout", idle_timeout_s,
                 "seconds a client holding no GPU lease may send no request before it is "
                 "closed (default 60; clients holding a lease are never closed for idleness)")
      ->check(DecimalOnly())
      ->check(SecondsIn(0.01, 86400, "[0.01, 86400]"));
  app.footer(
      "Environment: JOULEPIPE_NVML_LIBRARY selects the NVML library (e.g. build/sim-nvml/"
      "libnvidia-ml.so.1 to run against simulated GPUs).\n"
      "Example: joulepiped --socket /run/joulepiped.sock --allow-group joulepipe "
      "--audit-log /var/log/joulepiped.log");
  // Usage errors exit 2 like every other start-up error (CLI11's own exit
  // codes, 100 and up, would mean nothing to systemd or a script); --help
  // prints and exits 0.
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "joulepiped: error: %s; see joulepiped --help\n", e.what());
    return 2;
  }

  try {
    Config config;
    joulepipe::daemon::LoadConfigFile(config_path, config_option->count() > 0, &config);
    if (!socket.empty()) config.socket = socket;
    if (!zeusd_socket.empty()) config.zeusd_socket = zeusd_socket;
    for (const auto& user : allow_users) config.allow_users.push_back(user);
    for (const auto& group : allow_groups) config.allow_groups.push_back(group);
    if (!audit_log.empty()) config.audit_log = audit_log;
    if (!socket_mode.empty()) config.socket_mode = joulepipe::daemon::ParseSocketMode(socket_mode);
    if (!socket_group.empty()) config.socket_group = socket_group;
    if (max_clients > 0) config.max_clients = max_clients;
    if (max_clients_per_uid > 0) config.max_clients_per_uid = max_clients_per_uid;
    if (hello_timeout_s > 0) config.hello_timeout_s = hello_timeout_s;
    if (idle_timeout_s > 0) config.idle_timeout_s = idle_timeout_s;
    return Serve(config, config_path);
  } catch (const joulepipe::model::InputError& e) {
    std::fprintf(stderr, "joulepiped: error: %s%s\n", e.what(), WhereSet(e.field()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "joulepiped: internal error: %s\n", e.what());
    return 1;
  }
}
