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
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
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

class DaemonClockControl final : public ClockControl {
 public:
  explicit DaemonClockControl(std::string socket_path) : socket_path_(std::move(socket_path)) {
    Connect();
    try {
      DaemonRequest hello;
      hello.op = DaemonOp::kHello;
      hello.version = kDaemonProtocolVersion;
      Call(hello, "hello");
      DaemonRequest list;
      list.op = DaemonOp::kListDevices;
      ReadDevices(Call(list, "list_devices"));
    } catch (...) {
      ::close(fd_);
      fd_ = -1;
      throw;
    }
  }

  ~DaemonClockControl() override {
    Restore();
    if (fd_ >= 0) ::close(fd_);
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

  // Sends `request`, returns the ok reply; throws GpuError with `what` and
  // the daemon's message otherwise.
  json Call(const DaemonRequest& request, const std::string& what) {
    const std::string prefix = "joulepiped (" + socket_path_ + "): " + what + ": ";
    if (fd_ < 0) throw GpuError(prefix + "the connection to the daemon is closed");
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
        ::close(fd_);
        fd_ = -1;
        throw GpuError(prefix + (send_failed ? "cannot send the request; " : "") + reason);
      }
      input_.Append(std::string_view(buffer, static_cast<std::size_t>(n)));
    }
    DecodedReply decoded = DecodeReply(*reply_line);
    if (!decoded.reply) throw GpuError(prefix + "malformed reply: " + decoded.error);
    if (!(*decoded.reply)["ok"].get<bool>()) {
      throw GpuError(prefix + (*decoded.reply)["error"].get<std::string>());
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
  int fd_ = -1;
  LineBuffer input_;
  std::map<int, DeviceInfo> devices_;
  std::set<int> changed_clocks_;
  std::set<int> changed_power_;
};

}  // namespace

std::unique_ptr<ClockControl> MakeDaemonClockControl(const std::string& socket_path) {
  return std::make_unique<DaemonClockControl>(socket_path);
}

}  // namespace joulepipe::gpu
