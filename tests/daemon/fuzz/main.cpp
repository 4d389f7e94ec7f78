// fuzz_daemon_protocol: a standalone, deterministic fuzzer of joulepiped's
// input path (g++ has no libFuzzer). Every input goes through
//   1. gpu::DecodeRequest (the protocol decoder),
//   2. gpu::LineBuffer (framing, fed in random chunks),
//   3. daemon::Handler::HandleLine for one of several sessions, on the
//      simulated NVML library (3 GPUs, the last in MIG mode, permissions
//      granted), with sessions closed and reopened at random so leases are
//      taken and restored,
// and every reply must decode as a protocol reply (one line, an object with
// "ok"). The zeusd face too: each input, and a mutated zeusd request, goes
// through the HTTP framing (CutRequest, in random chunks) and every request
// cut from it through AnswerZeusd for a Zeus session (claims taken and
// withdrawn); every answer must have a known status and a JSON body. Inputs: random bytes, mutated
// valid requests (bit flips, byte insertions and deletions, truncation, splicing, duplication), and
// structured hostile values (deep nesting, huge and non-finite numbers,
// unicode and invalid UTF-8, wrong types in every field).
//
//   fuzz_daemon_protocol [--iterations N] [--seed S]
//
// Exits 0 after N inputs, 1 if an invariant broke or one input took over 10 s
// (a hang); a crash is a signal, a leak an AddressSanitizer report
// when built with JOULEPIPE_FUZZ_SANITIZE. Prints the run's length and rate.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../../src/daemon/http_framing.hpp"
#include "../../../src/daemon/zeusd_api.hpp"
#include "joulepipe/daemon/audit_log.hpp"
#include "joulepipe/daemon/handler.hpp"
#include "joulepipe/daemon/peer.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"

namespace {

using joulepipe::gpu::DecodeReply;
using joulepipe::gpu::DecodeRequest;
using joulepipe::gpu::LineBuffer;

const std::vector<std::string> kSeeds = {
    R"({"op":"hello","version":1})",
    R"({"op":"list_devices"})",
    R"({"op":"set_locked_clocks","device":0,"min_mhz":900,"max_mhz":1410})",
    R"({"op":"set_locked_clocks","device":1,"min_mhz":1,"max_mhz":99999})",
    R"({"op":"set_locked_clocks","device":2,"min_mhz":900,"max_mhz":900})",
    R"({"op":"reset_locked_clocks","device":0})",
    R"({"op":"set_power_limit","device":1,"watts":250.5})",
    R"({"op":"set_power_limit","device":0,"watts":1e5})",
    R"({"op":"reset_power_limit","device":1})",
    R"({"op":"reset_locked_clocks","device":"GPU-00000000-0000-0000-0000-000000000000"})",
};

// zeusd requests (the head; a body now and then).
const std::vector<std::string> kHttpSeeds = {
    "GET /discover HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "GET /gpu/get_power?gpu_ids=0,1 HTTP/1.1\r\n\r\n",
    "GET /gpu/get_cumulative_energy?gpu_ids=1 HTTP/1.1\r\n\r\n",
    "POST /gpu/set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900&max_clock_mhz=1410&block=true "
    "HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    "POST /gpu/reset_gpu_locked_clocks?gpu_ids=0,1 HTTP/1.1\r\n\r\n",
    "POST /gpu/set_power_limit?gpu_ids=1&power_limit_mw=250000 HTTP/1.1\r\n\r\n",
    "POST /gpu/set_mem_locked_clocks?gpu_ids=1&min_clock_mhz=1593&max_clock_mhz=1593 "
    "HTTP/1.1\r\n\r\n",
    "POST /gpu/reset_mem_locked_clocks?gpu_ids=2 HTTP/1.1\r\nConnection: close\r\n\r\n",
    "POST /gpu/set_persistence_mode?gpu_ids=0&enabled=true HTTP/1.1\r\n\r\n",
    "GET /gpu/get_power_limit_constraints HTTP/1.1\r\n\r\n",
    "GET /gpu/stream_power?gpu_ids=0 HTTP/1.1\r\n\r\n",
    "POST /discover HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
};

const std::vector<std::string> kHostileValues = {
    "null",
    "true",
    "-1",
    "0",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "1e308",
    "1e309",
    "-1e309",
    "NaN",
    "Infinity",
    "-0.0",
    "1.5",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\xff\xfe\"",
    "\"\xe2\x82\xac\"",
    "[]",
    "{}",
    "[[[[[[[[[[]]]]]]]]]]",
    "{\"a\":{\"b\":{}}}",
    "\"GPU-\"",
    "0.000001",
    "1e-400",
};

const std::vector<std::string> kKeys = {"op",      "device", "min_mhz", "max_mhz", "watts",
                                        "version", "client", "",        "\xff"};

class Fuzzer {
 public:
  explicit Fuzzer(std::uint64_t seed) : random_(seed) {}

  std::size_t Below(std::size_t n) { return n == 0 ? 0 : random_() % n; }

  std::string RandomBytes() {
    std::string bytes(Below(Below(4) == 0 ? 2048 : 64), '\0');
    for (char& c : bytes) c = static_cast<char>(random_());
    return bytes;
  }

  std::string Mutate(std::string text) {
    const std::size_t rounds = 1 + Below(8);
    for (std::size_t r = 0; r < rounds && !text.empty(); ++r) {
      const std::size_t at = Below(text.size());
      switch (Below(7)) {
        case 0:
          text[at] = static_cast<char>(text[at] ^ (1 << Below(8)));
          break;
        case 1:
          text.insert(at, 1, static_cast<char>(random_()));
          break;
        case 2:
          text.erase(at, 1 + Below(4));
          break;
        case 3:
          text.resize(at);
          break;
        case 4:
          text.insert(at, kSeeds[Below(kSeeds.size())].substr(0, Below(40)));
          break;
        case 5:
          text.insert(at, kHostileValues[Below(kHostileValues.size())]);
          break;
        case 6:
          text += text.substr(at, Below(64));
          break;
      }
    }
    return text;
  }

  std::string Structured() {
    switch (Below(5)) {
      case 0: {  // deep nesting: now and then deep enough to overflow a recursive walk
        const std::size_t depth = 1 + (Below(20) == 0 ? Below(30000) : Below(200));
        const char* open = Below(2) ? "[" : "{\"a\":";
        std::string text;
        for (std::size_t i = 0; i < depth; ++i) text += open;
        if (Below(2)) {
          text += "1";
          for (std::size_t i = 0; i < depth; ++i) text += open[0] == '[' ? "]" : "}";
        }
        return text;
      }
      case 1: {  // a request object with hostile values in random fields
        std::string text =
            "{\"op\":\"" + std::string(Below(3) ? "set_locked_clocks" : "hello") + "\"";
        const std::size_t fields = Below(6);
        for (std::size_t i = 0; i < fields; ++i) {
          text += ",\"" + kKeys[Below(kKeys.size())] +
                  "\":" + kHostileValues[Below(kHostileValues.size())];
        }
        return text + "}";
      }
      case 2: {  // huge numbers
        std::string digits(1 + Below(5000), '9');
        return R"({"op":"set_power_limit","device":0,"watts":)" + digits + "}";
      }
      case 3: {  // long strings, escapes, unicode
        std::string s;
        const std::size_t n = Below(3000);
        for (std::size_t i = 0; i < n; ++i) {
          static const char* pieces[] = {
              "a",    "\\n",  "\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\xf0\x9f\x98\x80",
              "\xc3", "\\\"", "\\"};
          s += pieces[Below(9)];
        }
        return R"({"op":"reset_locked_clocks","device":")" + s + "\"}";
      }
      default:
        return kSeeds[Below(kSeeds.size())];
    }
  }

  std::string Next() {
    switch (Below(4)) {
      case 0:
        return RandomBytes();
      case 1:
        return Structured();
      default:
        return Mutate(kSeeds[Below(kSeeds.size())]);
    }
  }

  // A zeusd request: mutated, with hostile values in its query now and then.
  std::string NextHttp() {
    std::string text = kHttpSeeds[Below(kHttpSeeds.size())];
    if (Below(3) == 0) {
      const std::size_t q = text.find('=');
      if (q != std::string::npos) {
        text.insert(q + 1, kHostileValues[Below(kHostileValues.size())]);
      }
    }
    return Below(2) ? Mutate(text) : text;
  }

  std::mt19937_64& random() { return random_; }

 private:
  std::mt19937_64 random_;
};

bool CheckReply(const std::string& reply, const std::string& input) {
  if (reply.empty() || reply.back() != '\n' || reply.find('\n') != reply.size() - 1 ||
      !DecodeReply(std::string_view(reply).substr(0, reply.size() - 1)).reply) {
    std::fprintf(stderr, "bad reply %s\nto input of %zu bytes\n", reply.c_str(), input.size());
    return false;
  }
  return true;
}

bool CheckAnswer(const joulepipe::daemon::ZeusdAnswer& answer, const std::string& input) {
  static const int kStatuses[] = {200, 400, 403, 404, 405, 500};
  bool known = false;
  for (int status : kStatuses) known = known || answer.status == status;
  if (known && (answer.stream || nlohmann::json::accept(answer.body))) return true;
  std::fprintf(stderr, "bad zeusd answer %d %s\nto input of %zu bytes\n", answer.status,
               answer.body.c_str(), input.size());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  long long iterations = 1000000;
  std::uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::atoll(argv[i + 1]);
    if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  // The simulated library, in-process settings (no state file).
  const std::filesystem::path config =
      std::filesystem::temp_directory_path() / ("fuzz-sim-" + std::to_string(::getpid()) + ".json");
  std::ofstream(config) << R"({"count":3,"permissions":{"clocks":true,"power_limit":true},)"
                           R"("devices":[{},{},{"mig":true}]})";
  ::setenv("JOULEPIPE_NVML_LIBRARY", JOULEPIPE_SIM_NVML, 0);
  ::setenv("JOULEPIPE_SIM_NVML_CONFIG", config.c_str(), 1);

  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  double slowest = 0;
  long long done = 0;
  {
    joulepipe::daemon::AuditLog audit("/dev/null");
    joulepipe::daemon::Handler handler(&audit);
    std::filesystem::remove(config);
    Fuzzer fuzzer(seed);
    std::vector<joulepipe::daemon::SessionId> sessions;
    for (int i = 0; i < 3; ++i) {
      sessions.push_back(handler.Open(joulepipe::daemon::MakePeer(1000 + i, 1000 + i, 1000)));
      (void)handler.HandleLine(sessions.back(), kSeeds[0]);
    }
    LineBuffer framing;
    joulepipe::daemon::SessionId zeus =
        handler.OpenShared(joulepipe::daemon::MakePeer(3000, 1000, 1000));
    std::string http;  // bytes of the zeusd stream not yet cut
    for (long long i = 0; i < iterations && status == 0; ++i, ++done) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::string input = fuzzer.Next();
      (void)DecodeRequest(input);
      (void)DecodeReply(input);  // the client's side of the protocol
      const std::size_t which = fuzzer.Below(sessions.size());
      if (!CheckReply(handler.HandleLine(sessions[which], input), input)) status = 1;
      // Framing: the input in random chunks, with a newline now and then.
      std::size_t at = 0;
      while (at < input.size()) {
        const std::size_t n = 1 + fuzzer.Below(input.size() - at);
        framing.Append(std::string_view(input).substr(at, n));
        at += n;
        while (auto line = framing.Next()) {
          if (line->size() > joulepipe::gpu::kMaxLineBytes) status = 1;
        }
      }
      if (fuzzer.Below(3) == 0) framing.Append("\n");
      if (framing.overflowed()) framing = LineBuffer();
      // The zeusd face: this input or a zeusd request, in random chunks.
      const std::string bytes = fuzzer.Below(2) ? fuzzer.NextHttp() : input;
      for (std::size_t from = 0; from < bytes.size() && status == 0;) {
        const std::size_t n = 1 + fuzzer.Below(bytes.size() - from);
        http.append(bytes, from, n);
        from += n;
        for (;;) {
          const joulepipe::daemon::HttpCut cut = joulepipe::daemon::CutRequest(&http);
          if (cut.refusal) {
            if (cut.refusal->status < 400 || cut.refusal->status > 431) status = 1;
            http.clear();  // the server closes such a connection
            break;
          }
          if (!cut.request) break;
          if (!CheckAnswer(joulepipe::daemon::AnswerZeusd(handler, zeus, *cut.request), bytes)) {
            status = 1;
          }
        }
        if (http.size() > joulepipe::daemon::kMaxHeadBytes + joulepipe::daemon::kMaxBodyBytes) {
          status = 1;  // held past the bounds
        }
      }
      if (fuzzer.Below(500) == 0) {  // the Zeus process exits: its claims are withdrawn
        handler.Close(zeus, "fuzz");
        zeus = handler.OpenShared(joulepipe::daemon::MakePeer(4000 + i % 1000, 1000, 1000));
        http.clear();
      }
      // Sessions end (restoring their leases) and new ones start.
      if (fuzzer.Below(500) == 0) {
        handler.Close(sessions[which], "fuzz");
        sessions[which] = handler.Open(joulepipe::daemon::MakePeer(2000 + i % 1000, 0, 0));
        if (fuzzer.Below(2)) (void)handler.HandleLine(sessions[which], kSeeds[0]);
      }
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      slowest = std::max(slowest, took);
      if (took > 10.0) {
        std::fprintf(stderr, "input %lld took %.2f s (a hang?)\n", i, took);
        status = 1;
      }
    }
    handler.RestoreAll("fuzz end");
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "fuzz_daemon_protocol: %lld iterations, seed %llu, %.1f s (%.0f/s), slowest input "
      "%.1f ms: %s\n",
      done, static_cast<unsigned long long>(seed), seconds, done / seconds, slowest * 1e3,
      status == 0 ? "ok" : "FAILED");
  return status;
}
