// ClockControl: how a process changes GPU clocks and power limits — directly
// through NVML (needs root or granted permission) or through the joulepiped
// daemon (unprivileged; the daemon restores the GPUs when the connection
// closes). The runtime's clock controller is written against this interface
// only, so both paths run the same code above it.
//
// Devices are named by their NVML index (gpu::Device::nvml_index()), which is
// what the daemon sees too (it does not share the client's
// CUDA_VISIBLE_DEVICES).
//
// Contract for every implementation:
//   * calls may come from any one thread at a time (the runtime uses a single
//     controller thread); implementations need not be thread-safe;
//   * a failed call throws gpu::GpuError (or a subclass) whose message names
//     the device, the operation and the reason (NVML's error string, or the
//     daemon's reply), and leaves the device as it was;
//   * SetLockedClocks clamps nothing: callers pass supported clocks; an
//     unsupported or inverted range is an error;
//   * Restore() returns every device this object changed to its defaults
//     (reset locked clocks and power limit), never throws, and is also run by
//     the destructor.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace joulepipe::gpu {

class ClockControl {
 public:
  virtual ~ClockControl() = default;

  // "nvml (/usr/lib/.../libnvidia-ml.so.1)" or "joulepiped (/run/joulepiped.sock)".
  virtual std::string Describe() const = 0;

  // Supported SM clocks of the device, highest first.
  virtual std::vector<int> SupportedSmClocks(int nvml_index) = 0;

  virtual void SetLockedClocks(int nvml_index, int min_mhz, int max_mhz) = 0;
  virtual void ResetLockedClocks(int nvml_index) = 0;
  virtual void SetPowerLimit(int nvml_index, double watts) = 0;
  virtual void ResetPowerLimit(int nvml_index) = 0;

  // Best effort: every device changed through this object back to defaults.
  virtual void Restore() noexcept = 0;

  // Why changes to the device's clocks (or, `power_limit`, its power limit)
  // would be refused, asked before a plan is said to run: "" when they would
  // not be, or when it cannot be known without making one (the default).
  // Direct NVML resets the setting (harmless while nothing is set: the
  // call needs the same permission as a change); the daemon checked its
  // client when it connected.
  virtual std::string WhyNotChangeable(int /*nvml_index*/, bool /*power_limit*/) { return ""; }
};

// Direct NVML control (the process-wide handle, gpu/nvml.hpp). Permission
// errors surface as NvmlPermissionError on the first setter call.
std::unique_ptr<ClockControl> MakeNvmlClockControl();

// Control through joulepiped listening on `socket_path` (the protocol is in
// gpu/daemon_protocol.hpp). Connects at once; throws GpuError with the reason
// (no daemon, not authorised, protocol version, too many connections) if it
// cannot. The connection is the lease: if this process dies, the daemon
// restores every device it changed — even while a forked child still has
// the socket open.
//
// While it holds no change, a connection the daemon closed (its idle
// timeout, a daemon restart) is opened again transparently on the next call.
//
// Fork: the object belongs to the process that created it. In a forked
// child its socket is closed at fork (pthread_atfork; SOCK_CLOEXEC for
// exec), every request throws GpuError, and Restore() and the destructor do
// nothing, so a child can neither act under the parent's lease nor reset the
// parent's GPUs. A child that needs clocks makes its own object.
std::unique_ptr<ClockControl> MakeDaemonClockControl(const std::string& socket_path);

// The socket joulepiped listens on by default.
inline constexpr char kDefaultDaemonSocket[] = "/run/joulepiped.sock";

}  // namespace joulepipe::gpu
