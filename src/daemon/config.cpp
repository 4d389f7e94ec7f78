#include "joulepipe/daemon/config.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/read_file.hpp"

namespace joulepipe::daemon {
namespace {

using model::InputError;
using nlohmann::json;

void IdList(const json& value, const std::string& where, std::vector<std::string>* out) {
  if (!value.is_array()) throw InputError(where + " must be a list of names or numeric ids");
  out->clear();
  for (const json& entry : value) {
    if (entry.is_string() && !entry.get<std::string>().empty()) {
      out->push_back(entry.get<std::string>());
    } else if (entry.is_number_unsigned()) {
      out->push_back(std::to_string(entry.get<unsigned long long>()));
    } else {
      throw InputError(where + ": each entry must be a name or a numeric id, got " +
                       model::Excerpt(entry));
    }
  }
}

}  // namespace

unsigned ParseSocketMode(const std::string& text) {
  std::string digits = text;
  if (digits.rfind("0o", 0) == 0) digits = digits.substr(2);
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("01234567") != std::string::npos) {
    throw InputError("socket mode " + model::Excerpt(json(text)) +
                     " is not an octal mode like 0660");
  }
  const unsigned mode = static_cast<unsigned>(std::stoul(digits, nullptr, 8));
  if (mode > 0777) {
    throw InputError("socket mode " + model::Excerpt(json(text)) + " is above 0777");
  }
  return mode;
}

void ApplyConfigJson(const json& document, const std::string& source, Config* config) {
  if (!document.is_object()) throw InputError(source + ": the configuration must be a JSON object");
  for (const auto& [key, value] : document.items()) {
    const std::string where = source + ": \"" + key + "\"";
    if (key == "socket") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        throw InputError(where + " must be a non-empty path");
      }
      config->socket = value.get<std::string>();
    } else if (key == "zeusd_socket") {
      if (!value.is_string()) throw InputError(where + " must be a path (\"\" for none)");
      config->zeusd_socket = value.get<std::string>();
    } else if (key == "socket_mode") {
      if (value.is_string()) {
        config->socket_mode = ParseSocketMode(value.get<std::string>());
      } else {
        throw InputError(where + " must be an octal string like \"0660\"");
      }
    } else if (key == "socket_group") {
      if (!value.is_string()) throw InputError(where + " must be a group name or numeric gid");
      config->socket_group = value.get<std::string>();
    } else if (key == "allow_users") {
      IdList(value, where, &config->allow_users);
    } else if (key == "allow_groups") {
      IdList(value, where, &config->allow_groups);
    } else if (key == "audit_log") {
      if (!value.is_string()) throw InputError(where + " must be a path (\"\" for stderr)");
      config->audit_log = value.get<std::string>();
    } else if (key == "max_clients") {
      if (!value.is_number_integer() || value.get<long long>() < 1 ||
          value.get<long long>() > 4096) {
        throw InputError(where + " must be an integer in [1, 4096]");
      }
      config->max_clients = value.get<int>();
    } else if (key == "max_clients_per_uid") {
      if (!value.is_number_integer() || value.get<long long>() < 1 ||
          value.get<long long>() > 4096) {
        throw InputError(where + " must be an integer in [1, 4096]");
      }
      config->max_clients_per_uid = value.get<int>();
    } else if (key == "hello_timeout_s" || key == "idle_timeout_s") {
      const double limit = key == "hello_timeout_s" ? 3600 : 86400;
      if (!value.is_number() || !(value.get<double>() >= 0.01 && value.get<double>() <= limit)) {
        throw InputError(where + " must be a number of seconds in [0.01, " +
                         std::to_string(static_cast<int>(limit)) + "]");
      }
      (key == "hello_timeout_s" ? config->hello_timeout_s : config->idle_timeout_s) =
          value.get<double>();
    } else {
      throw InputError(source + ": unknown field " + model::Excerpt(json(key)) +
                       "; known: socket, zeusd_socket, socket_mode, socket_group, allow_users, "
                       "allow_groups, audit_log, max_clients, max_clients_per_uid, "
                       "hello_timeout_s, idle_timeout_s");
    }
  }
}

void LoadConfigFile(const std::string& path, bool required, Config* config) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (required) throw InputError("configuration file " + path + " does not exist");
    return;
  }
  // Bounded size (1 MiB, checked before reading: --config /dev/zero ends)
  // and depth (the configuration nests 2 levels; refusing deeper ones before
  // building them keeps every later walk shallow).
  const std::string text =
      model::ReadWholeFile(path, "configuration file", model::kMaxConfigFileBytes);
  ApplyConfigJson(model::ParseJsonBounded(text, path), path, config);
}

}  // namespace joulepipe::daemon
