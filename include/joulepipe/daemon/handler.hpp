// The request handler of joulepiped: decodes request lines, validates and
// clamps them against what each GPU supports, applies them through NVML
// (gpu::Device), keeps the leases and writes the audit log. It knows nothing
// of sockets (server.hpp owns those), so tests and the fuzz target drive it
// directly.
//
// Sessions: the server opens one per connection (Open) and closes it when
// the connection ends (Close). A session must say hello with the protocol
// version before anything else.
//
// Leases: the first session that changes a GPU (locked clocks or power
// limit) holds its lease. Another session trying to change that GPU gets an
// error naming the holder (pid, uid). The lease ends when the holder has
// reset both settings, or when its session closes: then the handler resets
// the GPU's locked clocks and power limit (whichever the session changed),
// logging each restore. RestoreAll does this for every session (shutdown).
//
// Clamping: set_locked_clocks clamps [min, max] to the supported SM clock
// range and snaps max down and min up to supported clocks (if that inverts
// the range, min = max); set_power_limit clamps to the GPU's constraints.
// The reply carries "requested" and "applied" and "clamped": true when they
// differ.
//
// Not thread-safe: one thread (the server's) calls it. Never throws out of
// HandleLine/Close/RestoreAll: every failure is an error reply or a log line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/daemon/audit_log.hpp"
#include "joulepipe/daemon/peer.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"
#include "joulepipe/gpu/device.hpp"

namespace joulepipe::daemon {

using SessionId = std::uint64_t;

class Handler {
 public:
  // Opens every NVML device (gpu::ListAllDevices; MIG ones are listed and
  // refused for changes). Throws gpu::GpuError if NVML is unusable.
  explicit Handler(AuditLog* audit);

  SessionId Open(const Peer& peer);
  // One request line (no newline) -> one reply line (with newline).
  std::string HandleLine(SessionId session, std::string_view line) noexcept;
  // Ends the session; restores every GPU it holds. `why` goes to the log
  // ("connection closed", "client process exited", "daemon shutdown").
  void Close(SessionId session, const std::string& why) noexcept;
  // Closes every session (shutdown).
  void RestoreAll(const std::string& why) noexcept;

  std::size_t device_count() const { return devices_.size(); }
  std::size_t session_count() const { return sessions_.size(); }
  // Whether `session` has said hello with the right version (false for an
  // unknown session). The server's hello timeout applies until it has.
  bool greeted(SessionId session) const;
  // Whether `session` holds a lease on any GPU. The server never closes such
  // a session for idleness: training may go minutes without a clock change.
  bool holds_lease(SessionId session) const;

 private:
  struct Session {
    Peer peer;
    bool greeted = false;
    std::set<unsigned> leased;  // NVML indices this session holds
  };
  struct Lease {
    SessionId holder = 0;
    bool clocks = false;  // locked clocks set through this lease
    bool power = false;   // power limit set through this lease
  };
  struct GpuInfo {
    gpu::Device device;
    std::vector<int> clocks;  // supported SM clocks, highest first ({} if unreadable)
  };

  nlohmann::json Dispatch(Session& session, SessionId id, const gpu::DaemonRequest& request);
  nlohmann::json ListDevices() const;
  // The GPU a request names; throws gpu::GpuError naming it if none.
  GpuInfo& Resolve(const gpu::DeviceRef& ref);
  // Throws unless `id` may change `gpu` (MIG, another session's lease).
  void CheckChangeable(SessionId id, const GpuInfo& gpu);
  void Restore(SessionId id, unsigned index, const Peer& peer, const std::string& why) noexcept;

  AuditLog* audit_;
  std::vector<GpuInfo> devices_;
  std::map<SessionId, Session> sessions_;
  std::map<unsigned, Lease> leases_;
  SessionId next_id_ = 1;
};

}  // namespace joulepipe::daemon
