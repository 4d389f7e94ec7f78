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
// Zeus's sessions (OpenShared; the zeusd face, zeusd_api.hpp) hold claims
// instead of leases: one per GPU and setting (SM clocks, memory clocks,
// power limit). Several live sessions may claim one setting of one GPU;
// the newest claim is in force. When a session withdraws its claim (a
// reset) or closes (its process exited), the GPU runs the newest claim
// left, or its default when none is: a restore never undoes another live
// session's setting. A GPU with claims refuses the exclusive sessions'
// changes, and one an exclusive session holds refuses claims
// (ChangeRefused, naming the holder).
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
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/daemon/audit_log.hpp"
#include "joulepipe/daemon/peer.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"
#include "joulepipe/gpu/device.hpp"
#include "joulepipe/gpu/error.hpp"

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

  // ---- Zeus's sessions (claims) ----
  enum class Setting { kSmClocks, kMemoryClocks, kPowerLimit };
  struct ClaimValue {
    int min_mhz = 0, max_mhz = 0;  // clocks
    double watts = 0;              // power limit
  };
  // A change refused for who holds the GPU (another session's lease or
  // claims) or what it is (MIG mode): zeusd's 403.
  class ChangeRefused : public gpu::GpuError {
   public:
    using gpu::GpuError::GpuError;
  };
  // A session that claims instead of leasing; it needs no hello.
  SessionId OpenShared(const Peer& peer);
  // Applies `value` to `setting` of GPU `index` as `session`'s claim, the
  // newest (clocks clamped and snapped as set_locked_clocks, a power limit
  // clamped to the GPU's constraints); replies what was applied. Throws
  // gpu::GpuArgumentError (no such GPU), ChangeRefused, gpu::GpuError
  // (NVML). Audited either way.
  nlohmann::json Claim(SessionId session, unsigned index, Setting setting, ClaimValue value);
  // Withdraws `session`'s claim of `setting` on GPU `index`: the GPU runs
  // the newest claim left or its default. Throws as Claim.
  nlohmann::json Unclaim(SessionId session, unsigned index, Setting setting);
  // Persistence mode (a node setting kept by the driver, not a job's: it is
  // set and audited, never claimed nor restored).
  nlohmann::json SetPersistence(SessionId session, unsigned index, bool enabled);
  // GPU `index` for reads; throws gpu::GpuArgumentError when none.
  const gpu::Device& device(unsigned index) const;

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
    bool shared = false;        // claims (Zeus) instead of leases
    std::set<unsigned> leased;  // NVML indices this session holds
    std::set<std::pair<unsigned, Setting>> claimed;
  };
  // One claim; a GPU's setting keeps them oldest first.
  struct Claimant {
    SessionId session = 0;
    ClaimValue value;
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
  // Throws ChangeRefused unless shared session `id` may claim `gpu`.
  void CheckClaimable(SessionId id, const GpuInfo& gpu) const;
  // Sets `setting` of `gpu` to `value` (nullopt: its default); returns
  // what was applied, as audit text.
  std::string Apply(const GpuInfo& gpu, Setting setting, const std::optional<ClaimValue>& value,
                    nlohmann::json* reply);
  // Removes `id`'s claim; when it was in force, applies the newest left (or
  // the default) and audits it as `op` with `why`.
  void Withdraw(SessionId id, unsigned index, Setting setting, const Peer& peer,
                const std::string& op, const std::string& why);

  AuditLog* audit_;
  std::vector<GpuInfo> devices_;
  std::map<SessionId, Session> sessions_;
  std::map<unsigned, Lease> leases_;
  std::map<std::pair<unsigned, Setting>, std::vector<Claimant>> claims_;
  SessionId next_id_ = 1;
};

}  // namespace joulepipe::daemon
