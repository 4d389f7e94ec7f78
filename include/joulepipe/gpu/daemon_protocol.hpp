// The joulepiped wire protocol, shared by the daemon (src/daemon) and its
// client (MakeDaemonClockControl, clock_control.hpp). docs/daemon.md has the
// user-facing description.
//
// Transport: a SOCK_STREAM Unix socket carrying newline-delimited JSON. Each
// request is one JSON object on one line; the daemon answers each request
// with exactly one reply line, in order. A line may be at most
// kMaxLineBytes bytes (the newline excluded); the daemon answers a longer one
// with an error reply and closes the connection.
//
// Requests ("op" names the operation; devices are NVML indices or UUIDs):
//   {"op":"hello","version":1}                      must come first
//   {"op":"list_devices"}
//   {"op":"set_locked_clocks","device":0,"min_mhz":900,"max_mhz":1410}
//   {"op":"reset_locked_clocks","device":"GPU-..."}
//   {"op":"set_power_limit","device":0,"watts":300}
//   {"op":"reset_power_limit","device":0}
// Replies: {"ok":true, ...op-specific fields} or {"ok":false,"error":"..."}.
//
// Every function here is total: any byte string decodes to a request or to a
// precise error, never to a crash or an exception (the fuzz target in
// tests/daemon exercises exactly this).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

namespace joulepipe::gpu {

// Bumped on any incompatible change of requests or replies.
inline constexpr int kDaemonProtocolVersion = 1;
// Longest request or reply line, newline excluded.
inline constexpr std::size_t kMaxLineBytes = 64 * 1024;

enum class DaemonOp {
  kHello,
  kListDevices,
  kSetLockedClocks,
  kResetLockedClocks,
  kSetPowerLimit,
  kResetPowerLimit,
};

// "hello", "list_devices", ... (the wire names).
std::string_view DaemonOpName(DaemonOp op);

// A device as a request names it: an NVML index or a full UUID ("GPU-...").
using DeviceRef = std::variant<unsigned, std::string>;
// "GPU 3" or "GPU-8e5c..." (for messages).
std::string DescribeDeviceRef(const DeviceRef& ref);

struct DaemonRequest {
  DaemonOp op = DaemonOp::kHello;
  int version = 0;       // hello
  DeviceRef device{0u};  // every op but hello and list_devices
  int min_mhz = 0;       // set_locked_clocks
  int max_mhz = 0;       // set_locked_clocks
  double watts = 0;      // set_power_limit (finite)
};

// One request line (without the newline) -> the request, or the reason it is
// not one ("request is not valid JSON: ...", "unknown op \"x\"; expected one
// of ...", "set_locked_clocks: \"min_mhz\" must be an integer in [1, 100000]").
// Never throws.
struct DecodedRequest {
  std::optional<DaemonRequest> request;
  std::string error;  // set when !request
};
DecodedRequest DecodeRequest(std::string_view line);

// The request as one line, newline included. Round-trips through
// DecodeRequest.
std::string EncodeRequest(const DaemonRequest& request);

// A reply as one line, newline included; strings that are not valid UTF-8
// are repaired (U+FFFD), never a throw. `reply` must be an object.
std::string EncodeReply(const nlohmann::json& reply);
// {"ok":false,"error":message} as a line.
std::string EncodeErrorReply(std::string_view message);

// One reply line -> the reply object, or the reason it is not one. A reply
// must be an object with a boolean "ok"; when ok is false it must carry a
// string "error". Never throws.
struct DecodedReply {
  std::optional<nlohmann::json> reply;
  std::string error;
};
DecodedReply DecodeReply(std::string_view line);

// Splits a byte stream into lines of at most kMaxLineBytes (or `max_line`).
// Append() what was read, then take lines with Next() until it returns
// nullopt. Once a line grows past the limit, overflowed() is true and stays
// true: the stream can no longer be framed and the connection must close.
class LineBuffer {
 public:
  explicit LineBuffer(std::size_t max_line = kMaxLineBytes) : max_line_(max_line) {}

  void Append(std::string_view bytes);
  // The next complete line without its '\n' (a trailing '\r' is kept: it is
  // part of the JSON text and harmless as whitespace).
  std::optional<std::string> Next();
  bool overflowed() const { return overflowed_; }
  // Bytes of an unfinished line held.
  std::size_t pending() const { return buffer_.size() - start_; }

 private:
  std::size_t max_line_;
  std::string buffer_;
  std::size_t start_ = 0;  // first byte not yet returned
  std::size_t scan_ = 0;   // bytes before this hold no '\n' (from start_)
  bool overflowed_ = false;
};

}  // namespace joulepipe::gpu
