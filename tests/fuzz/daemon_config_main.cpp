// fuzz_daemon_config: joulepiped's configuration reader
// (daemon::LoadConfigFile, which reads through model::ParseJsonBounded, then
// daemon::ApplyConfigJson) and daemon::ParseSocketMode, under random,
// mutated and hostile input (tests/fuzz/fuzz_engine.hpp has the flags and
// the exit status).
//
// Invariants, for every input:
//   * LoadConfigFile (on the input written to a file) either fills a Config
//     or throws model::InputError, nothing else; a rejection's message is
//     short and carries no JSON library text;
//   * an accepted Config holds only values in the documented ranges
//     (docs/daemon.md): a non-empty socket path, a mode <= 0777, 1..4096
//     clients, non-empty user and group entries;
//   * ApplyConfigJson on the same document built without the depth limit
//     (a caller may pass any DOM) also ends in a Config or an InputError
//     (every input up to 64 KiB, one larger input in 16);
//   * ParseSocketMode on the input's first line accepts only modes <= 0777;
//   * no input takes longer than --max-seconds.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_engine.hpp"
#include "joulepipe/daemon/config.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"

namespace {

using joulepipe::daemon::Config;
using joulepipe::fuzz::Generator;
using joulepipe::fuzz::Input;
using joulepipe::fuzz::MixedInput;
using joulepipe::model::InputError;

const std::vector<std::string> kSeeds = {
    "{}",
    R"({"socket": "/run/joulepiped.sock", "socket_mode": "0660", "socket_group": "joulepipe",
 "allow_users": ["alice", 1001], "allow_groups": ["joulepipe"],
 "audit_log": "/var/log/joulepiped.log", "max_clients": 64})",
    R"({"socket_mode": "0o600", "allow_users": [], "audit_log": "", "max_clients": 1})",
    R"({"socket_mode": "777", "allow_groups": [0, "wheel"], "max_clients": 4096})",
};

const std::vector<std::string> kKeys = {
    "socket",      "socket_mode", "socket_group", "allow_users", "allow_groups",
    "audit_log",   "max_clients", "allow_user",   "",            "\xff\xfe",
    std::string("max_clients\0", 12)};

const std::vector<std::string> kJsonValues = {
    "null", "true", "0", "-1", "1", "64", "4096", "4097", "0.5", "1e308", "1e309", "-1e308",
    "2147483648", "18446744073709551615", "18446744073709551616", "\"\"", "\"0660\"",
    "\"0o777\"", "\"1000\"", "\"0999\"", "\"07777\"", "\"-1\"", "\"\\u0000\"", "\"\\ud800\"",
    "\"\xff\"", "[]", "[\"\"]", "[0]", "[-1]", "[1.5]", "[null]",
    "[\"alice\", 18446744073709551615]",
    "{}", "{\"a\": 1}"};

std::string Value(Generator& g) {
  switch (g.Below(8)) {
    case 0:  // deep nesting, inside a list as in the reported crash
      return (g.OneIn(2) ? "[" : "") +
             Generator::Nested(g.NestingDepth(), g.OneIn(2), !g.OneIn(10)) +
             (g.OneIn(2) ? "]" : "");
    case 1:
      return "\"" + g.LongRun(g.OneIn(10) ? 1 << 20 : 2000) + "\"";
    case 2: {  // a long list of ids
      std::string list = "[";
      for (std::size_t i = g.Below(g.OneIn(10) ? 10000 : 100); i > 0; --i) {
        list += std::to_string(i) + ",";
      }
      return list + "\"x\"]";
    }
    default:
      return g.Pick(kJsonValues);
  }
}

// A document of known and unknown keys with hostile values.
std::string Structured(Generator& g) {
  std::string text = "{";
  for (std::size_t i = g.Below(5); i > 0; --i) {
    std::string key = g.OneIn(20) ? g.LongRun(5000) : g.Pick(kKeys);
    text += "\"" + key + "\": " + Value(g) + (i > 1 ? ", " : "");
  }
  return text + (g.OneIn(10) ? "" : "}");
}

std::string DeepNesting(Generator& g) {
  return Generator::Nested(g.NestingDepth(), g.OneIn(2), g.OneIn(2));
}

Input Next(Generator& g) { return MixedInput(g, Structured, DeepNesting, "deep nesting"); }

std::string CheckConfig(const Config& c) {
  if (c.socket.empty()) return "an empty socket path was accepted";
  if (c.socket_mode > 0777) return "a socket mode above 0777 was accepted";
  if (c.max_clients < 1 || c.max_clients > 4096) return "max_clients outside [1, 4096]";
  for (const auto* list : {&c.allow_users, &c.allow_groups}) {
    for (const std::string& entry : *list) {
      if (entry.empty()) return "an empty user or group entry was accepted";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const joulepipe::fuzz::Options options =
      joulepipe::fuzz::ParseOptions(argc, argv, "fuzz_daemon_config");
  // Each input is written to a file: in memory (/dev/shm) where there is one.
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm", ec)
                                        ? std::filesystem::path("/dev/shm")
                                        : std::filesystem::temp_directory_path();
  const std::string path =
      (dir / ("fuzz-daemon-config-" + std::to_string(::getpid()) + ".json")).string();
  joulepipe::fuzz::Driver driver("fuzz_daemon_config", options);
  long long inputs = 0;
  const int status = driver.Run(
      Next,
      [&](const std::string& text) -> std::string {
        // 1. The file, as joulepiped reads it.
        {
          std::ofstream out(path, std::ios::binary | std::ios::trunc);
          out << text;
        }
        Config config;
        try {
          joulepipe::daemon::LoadConfigFile(path, true, &config);
          driver.Accepted();
          if (std::string broken = CheckConfig(config); !broken.empty()) return broken;
        } catch (const InputError& e) {
          driver.Rejected(e.what());
          if (std::string broken = joulepipe::fuzz::CheckMessage(e.what()); !broken.empty()) {
            return broken;
          }
        }
        // 2. The first line as a --socket-mode value.
        const std::string mode = text.substr(0, text.find('\n'));
        try {
          if (joulepipe::daemon::ParseSocketMode(mode) > 0777) return "ParseSocketMode > 0777";
        } catch (const InputError& e) {
          if (std::string broken = joulepipe::fuzz::CheckMessage(e.what()); !broken.empty()) {
            return "ParseSocketMode: " + broken;
          }
        }
        // 3. The same document as a DOM of any depth (the parser's own
        //    iterative build), given to ApplyConfigJson directly; for one
        //    large input in 16 (building a DOM 100,000 levels deep is slow).
        ++inputs;
        if (text.size() > 65536 && inputs % 16 != 0) return "";
        nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
        if (!document.is_discarded()) {
          Config direct;
          try {
            joulepipe::daemon::ApplyConfigJson(document, "dom.json", &direct);
            if (std::string broken = CheckConfig(direct); !broken.empty()) return broken;
          } catch (const InputError& e) {
            if (std::string broken = joulepipe::fuzz::CheckMessage(e.what()); !broken.empty()) {
              return "ApplyConfigJson: " + broken;
            }
          }
        }
        return "";
      },
      kSeeds);
  std::filesystem::remove(path);
  return status;
}
