// joulepiped's configuration: a JSON file (default /etc/joulepiped.json)
// whose fields the command-line flags override. docs/daemon.md lists them.
//
//   {"socket": "/run/joulepiped.sock", "zeusd_socket": "/run/zeusd.sock",
//    "socket_mode": "0660",
//    "socket_group": "joulepipe", "allow_users": ["alice", 1001],
//    "allow_groups": ["joulepipe"], "audit_log": "/var/log/joulepiped.log",
//    "max_clients": 64, "max_clients_per_uid": 16, "hello_timeout_s": 5,
//    "idle_timeout_s": 60}
//
// Users and groups are kept as written (names or numeric ids) and resolved
// when a client connects, so accounts created after the start count.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace joulepipe::daemon {

inline constexpr char kDefaultConfigPath[] = "/etc/joulepiped.json";

struct Config {
  std::string socket = "/run/joulepiped.sock";
  // A second socket speaking zeusd's HTTP API (Zeus's ZEUSD_SOCK_PATH), with
  // the same mode, group and allow lists; "" = none.
  std::string zeusd_socket;
  unsigned socket_mode = 0660;               // permission bits of the socket file
  std::string socket_group;                  // group owning the socket; "" = root's
  std::vector<std::string> allow_users;      // names or decimal uids
  std::vector<std::string> allow_groups;     // names or decimal gids
  std::string audit_log;                     // file to append to; "" = stderr
  int max_clients = 64;                      // connections served at once
  int max_clients_per_uid = 16;              // of one non-root uid at once (root is exempt)
  double hello_timeout_s = 5;                // a new connection must say hello within this
  double idle_timeout_s = 60;                // a client holding no lease may be silent this long
  std::size_t max_buffered_bytes = 1 << 20;  // unsent reply bytes per client
};

// Applies the fields of `document` to `config`. Throws model::InputError
// naming `source` (the file) and the field for an unknown field, a wrong type
// or an out-of-range value.
void ApplyConfigJson(const nlohmann::json& document, const std::string& source, Config* config);

// Reads `path` and applies it. A missing file is an error only when
// `required` (it was named with --config); the default path may be absent.
void LoadConfigFile(const std::string& path, bool required, Config* config);

// "0660" / "660" / "0o660" -> 0660. Throws model::InputError unless octal in
// [0, 0777].
unsigned ParseSocketMode(const std::string& text);

}  // namespace joulepipe::daemon
