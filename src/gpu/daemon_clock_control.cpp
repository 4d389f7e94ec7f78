// ClockControl through joulepiped (clock_control.hpp has the contract, and
// daemon_protocol.hpp the wire format).
//
// One blocking connection, opened at construction, kept for the object's
// life: it is the lease. Each call is one request line and one reply line;
// send and receive time out (kIoTimeout) so a wedged daemon cannot hang the
// training job's controller thread forever. The devices' supported clocks
// and power ranges are read once (list_devices) so that out-of-range values
// are refused here, as the contract requires ("clamps nothing"), instead of
// being clamped by the daemon.
//
// Reconnecting: the daemon closes a connection that holds no lease after
// its idle timeout (and a restarted daemon has dropped every connection).
// Nothing may be readable between two requests on a healthy connection, so
// before each request a readable socket (the daemon's closing line, or EOF)
// means it was closed; a closing line with "closed" in answer to a request
// means the same. While this object holds no change (so no lease), it
// connects again, says hello and sends the request once more: nothing is
// lost. Holding a change, it reports the closed connection instead (the
// daemon has then restored the GPUs).
//
// Fork: a forked child (a data-loader worker) inherits the socket. It must
// never speak on it — its requests would act under the parent's lease, and
// its destructor's Restore() would reset the parent's GPUs. So the socket
// is SOCK_CLOEXEC (an exec'd child never has it), a pthread_atfork child
// handler closes it in the child for every live object and marks the object
// as the parent's, and every call also compares getpid() with the process
// that created the object (a raw clone() skips atfork handlers). In the
// child, requests throw GpuError, Restore() and the destructor do nothing;
// SupportedSmClocks still answers from what was read at construction.
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "clock_range.hpp"
#include "joulepipe/gpu/clock_control.hpp"
#include "joulepipe/gpu/daemon_protocol.hpp"
#include "joulepipe/gpu/error.hpp"

namespace joulepipe::gpu {
namespace {

using nlohmann::json;

constexpr int kIoTimeoutSeconds = 10;

struct DeviceInfo {
  std::string uuid;
  bool mig = false;
  std::vector<int> clocks;  // highest first
  double min_w = 0;
  double max_w = 0;
};

class DaemonClockControl;

// Every live DaemonClockControl, for the atfork child handler. The mutex is
// held across fork() (prepare/parent/child handlers), so the child never
// sees the set half-changed; the set is never destroyed, so objects that
// outlive static destruction can still unregister.
std::mutex g_registry_mutex;  // constant-initialised

std::set<DaemonClockControl*>& Registry() {
  static auto* registry = new std::set<DaemonClockControl*>;
  return *registry;
}

void LockRegistry() {
  g_registry_mutex.lock();
}
void UnlockRegistry() {
  g_registry_mutex.unlock();
}
void ForgetConnectionsInChild();

void Register(DaemonClockControl* control) {
  static std::once_flag handlers;
  std::call_once(handlers,
                 [] { ::pthread_atfork(LockRegistry, UnlockRegistry, ForgetConnectionsInChild); });
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  Registry().insert(control);
}

void Unregister(DaemonClockControl* control) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  Registry().erase(control);
}

class DaemonClockControl final : public ClockControl {
 public:
  explicit DaemonClockControl(std::string socket_path)
      : socket_path_(std::move(socket_path)), owner_pid_(::getpid()) {
    Register(this);  // first: a fork from here on closes the socket in the child
    try {
      Connect();
      Hello();
      DaemonRequest list;
      list.op = DaemonOp::kListDevices;
      ReadDevices(Call(list, "list_devices"));
    } catch (...) {
      CloseConnection();
      Unregister(this);
      throw;
    }
  }

  ~DaemonClockControl() override {
    Unregister(this);
    if (InForkedChild()) return;  // the parent's connection and lease: not ours
    Restore();
    CloseConnection();
  }

  // The atfork child handler: runs in the child, alone, before fork() returns.
  void ForgetConnectionInChild() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    forked_ = true;
  }

  std::string Describe() const override { return "joulepiped (" + socket_path_ + ")"; }

  std::vector<int> SupportedSmClocks(int nvml_index) override {
    return Info(nvml_index, "read the supported clocks of").clocks;
  }

  void SetLockedClocks(int nvml_index, int min_mhz, int max_mhz) override {
    const DeviceInfo& info = Info(nvml_index, "lock the clocks of");
    CheckLockableRange("GPU " + std::to_string(nvml_index), info.clocks, min_mhz, max_mhz);
    DaemonRequest request;
    request.op = DaemonOp::kSetLockedClocks;
    request.device = static_cast<unsigned>(nvml_index);
    request.min_mhz = min_mhz;
    request.max_mhz = max_mhz;
    Call(request, "set_locked_clocks on GPU " + std::to_string(nvml_index));
    changed_clocks_.insert(nvml_index);
  }

  void ResetLockedClocks(int nvml_index) override {
    Info(nvml_index, "reset the clocks of");
    Call(DeviceRequest(DaemonOp::kResetLockedClocks, nvml_index),
         "reset_locked_clocks on GPU " + std::to_string(nvml_index));
    changed_clocks_.erase(nvml_index);
  }

  void SetPowerLimit(int nvml_index, double watts) override {
    const DeviceInfo& info = Info(nvml_index, "set the power limit of");
    const double mw = std::round(watts * 1e3);
    if (!std::isfinite(watts) || mw < std::round(info.min_w * 1e3) ||
        mw > std::round(info.max_w * 1e3)) {
      throw GpuArgumentError("power limit " + std::to_string(watts) + " W for GPU " +
                             std::to_string(nvml_index) + " is outside the range it accepts, [" +
                             std::to_string(info.min_w) + ", " + std::to_string(info.max_w) +
                             "] W");
    }
    DaemonRequest request = DeviceRequest(DaemonOp::kSetPowerLimit, nvml_index);
    request.watts = watts;
    Call(request, "set_power_limit on GPU " + std::to_string(nvml_index));
    changed_power_.insert(nvml_index);
  }

  void ResetPowerLimit(int nvml_index) override {
    Info(nvml_index, "reset the power limit of");
    Call(DeviceRequest(DaemonOp::kResetPowerLimit, nvml_index),
         "reset_power_limit on GPU " + std::to_string(nvml_index));
    changed_power_.erase(nvml_index);
  }

  void Restore() noexcept override {
    if (InForkedChild()) {  // the parent's changes are the parent's to restore
      changed_clocks_.clear();
      changed_power_.clear();
      return;
    }
    // Best effort; if the connection is gone the daemon has restored them.
    for (int index : std::set<int>(changed_clocks_)) {
      try {
        ResetLockedClocks(index);
      } catch (...) {
      }
    }
    for (int index : std::set<int>(changed_power_)) {
      try {
        ResetPowerLimit(index);
      } catch (...) {
      }
    }
    changed_clocks_.clear();
    changed_power_.clear();
  }

 private:
  static DaemonRequest DeviceRequest(DaemonOp op, int nvml_index) {
    DaemonRequest request;
    request.op = op;
    request.device = static_cast<unsigned>(nvml_index);
    return request;
  }

  std::string NoDaemon(const std::string& reason) const {
    return "no joulepiped at " + socket_path_ + ": " + reason +
           "; start it with `systemctl start joulepiped` (or run joulepiped as root), or set "
           "clocks directly as root";
  }

  // True in a forked child of the process that created this object; then
  // the inherited connection is closed here (if the atfork handler has not).
  bool InForkedChild() noexcept {
    if (!forked_ && ::getpid() != owner_pid_) ForgetConnectionInChild();
    return forked_;
  }

  void CloseConnection() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    input_ = LineBuffer();
  }

  void Hello() {
    DaemonRequest hello;
    hello.op = DaemonOp::kHello;
    hello.version = kDaemonProtocolVersion;
    Call(hello, "hello", /*may_reconnect=*/false);
  }

  // Whether the connection is still open as far as can be told without a
  // request: readable now means the daemon closed it (its closing line or
  // EOF), since no reply is due. Closes it then, keeping the daemon's
  // message in `why`.
  bool StillConnected(std::string* why) {
    if (fd_ < 0) {
      *why = "the connection to the daemon is closed";
      return false;
    }
    pollfd entry{fd_, POLLIN, 0};
    if (::poll(&entry, 1, 0) <= 0) return true;
    *why = "the daemon closed the connection";
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      input_.Append(std::string_view(buffer, static_cast<std::size_t>(n)));
      if (const auto line = input_.Next()) {
        const DecodedReply decoded = DecodeReply(*line);
        if (decoded.reply && decoded.reply->contains("error") &&
            (*decoded.reply)["error"].is_string()) {
          *why += ": " + (*decoded.reply)["error"].get<std::string>();
        }
      }
    }
    CloseConnection();
    return false;
  }

  void Connect() {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (socket_path_.size() >= sizeof(address.sun_path)) {
      throw GpuError(NoDaemon("the socket path is too long"));
    }
    std::memcpy(address.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw GpuError(NoDaemon(std::string("socket failed: ") + std::strerror(errno)));
    const timeval timeout{kIoTimeoutSeconds, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
      const std::string reason = std::string("connect failed: ") + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      throw GpuError(NoDaemon(reason));
    }
  }

  bool HoldsChanges() const { return !changed_clocks_.empty() || !changed_power_.empty(); }

  // Connects again after the daemon closed a lease-free connection; throws
  // GpuError with `prefix`, `why` and the reason if it cannot.
  void Reconnect(const std::string& prefix, const std::string& why) {
    try {
      Connect();
      Hello();
    } catch (const GpuError& e) {
      CloseConnection();
      throw GpuError(prefix + why + ", and connecting again failed: " + e.what());
    }
  }

  // Sends `request`, returns the ok reply; throws GpuError with `what` and
  // the daemon's message otherwise. `may_reconnect`: see the file comment.
  json Call(const DaemonRequest& request, const std::string& what, bool may_reconnect = true) {
    const std::string prefix = "joulepiped (" + socket_path_ + "): " + what + ": ";
    if (InForkedChild()) {
      throw GpuError(prefix + "this ClockControl was created by process " +
                     std::to_string(owner_pid_) + " and this is a forked child (pid " +
                     std::to_string(::getpid()) +
                     "); a child never uses its parent's connection to joulepiped (the parent's "
                     "lease): create its own with MakeDaemonClockControl");
    }
    std::string why;
    if (!StillConnected(&why)) {
      if (!may_reconnect || HoldsChanges()) {
        throw GpuError(
            prefix + why +
            (HoldsChanges() ? "; the daemon has restored the GPUs this client changed" : ""));
      }
      Reconnect(prefix, why);
    }
    json reply = Exchange(request, prefix);
    for (bool retried = false; reply.contains("closed"); retried = true) {
      // The daemon closed the connection as the request arrived (its idle
      // timeout); this line is its reason, not the reply. Sent again once.
      const std::string closed_why =
          "the daemon closed the connection: " + reply["error"].get<std::string>();
      CloseConnection();
      if (retried || !may_reconnect || HoldsChanges()) throw GpuError(prefix + closed_why);
      Reconnect(prefix, closed_why);
      reply = Exchange(request, prefix);
    }
    if (!reply["ok"].get<bool>()) throw GpuError(prefix + reply["error"].get<std::string>());
    return reply;
  }

  // One request line out, one reply line back (ok or not); throws GpuError
  // if the exchange itself fails.
  json Exchange(const DaemonRequest& request, const std::string& prefix) {
    const std::string line = EncodeRequest(request);
    std::size_t sent = 0;
    bool send_failed = false;
    while (sent < line.size()) {
      const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        send_failed = true;  // the daemon may have refused us: read its reason below
        break;
      }
      sent += static_cast<std::size_t>(n);
    }
    std::optional<std::string> reply_line;
    while (!(reply_line = input_.Next())) {
      if (input_.overflowed()) throw GpuError(prefix + "reply longer than the protocol allows");
      char buffer[8192];
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const std::string reason =
            n == 0 ? "the daemon closed the connection"
                   : (errno == EAGAIN || errno == EWOULDBLOCK
                          ? "no reply within " + std::to_string(kIoTimeoutSeconds) + " s"
                          : std::string("receive failed: ") + std::strerror(errno));
        CloseConnection();
        throw GpuError(prefix + (send_failed ? "cannot send the request; " : "") + reason);
      }
      input_.Append(std::string_view(buffer, static_cast<std::size_t>(n)));
    }
    DecodedReply decoded = DecodeReply(*reply_line);
    if (!decoded.reply) throw GpuError(prefix + "malformed reply: " + decoded.error);
    if (decoded.reply->contains("closed") && (*decoded.reply)["ok"].get<bool>()) {
      throw GpuError(prefix + "malformed reply: \"closed\" in an ok reply");
    }
    return std::move(*decoded.reply);
  }

  void ReadDevices(const json& reply) {
    const std::string prefix = "joulepiped (" + socket_path_ + "): list_devices: ";
    try {
      for (const json& entry : reply.at("devices")) {
        DeviceInfo info;
        info.uuid = entry.at("uuid").get<std::string>();
        info.mig = entry.at("mig").get<bool>();
        info.clocks = entry.at("supported_sm_clocks_mhz").get<std::vector<int>>();
        const json& power = entry.at("power_limit_w");
        if (power.is_object()) {
          info.min_w = power.at("min").get<double>();
          info.max_w = power.at("max").get<double>();
        }
        devices_[entry.at("index").get<int>()] = std::move(info);
      }
    } catch (const json::exception& e) {
      throw GpuError(prefix + "malformed reply: " + e.what());
    }
  }

  const DeviceInfo& Info(int nvml_index, const std::string& action) {
    const auto it = devices_.find(nvml_index);
    if (it == devices_.end()) {
      throw GpuArgumentError("cannot " + action + " GPU " + std::to_string(nvml_index) +
                             ": joulepiped (" + socket_path_ + ") has no GPU with that NVML index");
    }
    if (it->second.mig) {
      throw MigError("cannot " + action + " GPU " + std::to_string(nvml_index) + " (" +
                     it->second.uuid + "): it is in MIG mode; disable MIG (`nvidia-smi -i " +
                     std::to_string(nvml_index) + " -mig 0`)");
    }
    return it->second;
  }

  std::string socket_path_;
  pid_t owner_pid_;      // the process that created this object
  bool forked_ = false;  // this is a forked child of owner_pid_
  int fd_ = -1;
  LineBuffer input_;
  std::map<int, DeviceInfo> devices_;
  std::set<int> changed_clocks_;
  std::set<int> changed_power_;
};

void ForgetConnectionsInChild() {
  for (DaemonClockControl* control : Registry()) control->ForgetConnectionInChild();
  g_registry_mutex.unlock();
}

}  // namespace

std::unique_ptr<ClockControl> MakeDaemonClockControl(const std::string& socket_path) {
  return std::make_unique<DaemonClockControl>(socket_path);
}

}  // namespace joulepipe::gpu
