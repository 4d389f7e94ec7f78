#include "joulepipe/daemon/handler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

#include "joulepipe/gpu/error.hpp"

namespace joulepipe::daemon {
namespace {

using gpu::DaemonOp;
using gpu::DaemonRequest;
using nlohmann::json;

std::string Mhz(int min_mhz, int max_mhz) {
  return std::to_string(min_mhz) + "-" + std::to_string(max_mhz) + "MHz";
}

std::string WattsText(double watts) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3fW", watts);
  return text;
}

json Error(const std::string& message) {
  return {{"ok", false}, {"error", message}};
}

}  // namespace

Handler::Handler(AuditLog* audit) : audit_(audit) {
  for (const gpu::Device& device : gpu::ListAllDevices()) {
    GpuInfo info{device, {}};
    if (!device.mig_enabled()) {
      try {
        info.clocks = device.SupportedSmClocks();
      } catch (const gpu::GpuError& e) {
        std::fprintf(stderr, "joulepiped: %s: cannot read supported clocks: %s\n",
                     device.Describe().c_str(), e.what());
      }
    }
    devices_.push_back(std::move(info));
  }
}

SessionId Handler::Open(const Peer& peer) {
  const SessionId id = next_id_++;
  sessions_[id].peer = peer;
  return id;
}

bool Handler::greeted(SessionId id) const {
  const auto it = sessions_.find(id);
  return it != sessions_.end() && it->second.greeted;
}

bool Handler::holds_lease(SessionId id) const {
  const auto it = sessions_.find(id);
  return it != sessions_.end() && !it->second.leased.empty();
}

std::string Handler::HandleLine(SessionId id, std::string_view line) noexcept {
  try {
    const auto it = sessions_.find(id);
    if (it == sessions_.end()) return gpu::EncodeErrorReply("internal error: no such session");
    const gpu::DecodedRequest decoded = gpu::DecodeRequest(line);
    if (!decoded.request) return gpu::EncodeErrorReply(decoded.error);
    return gpu::EncodeReply(Dispatch(it->second, id, *decoded.request));
  } catch (const std::exception& e) {
    return gpu::EncodeErrorReply(std::string("internal error: ") + e.what());
  }
}

Handler::GpuInfo& Handler::Resolve(const gpu::DeviceRef& ref) {
  if (const unsigned* index = std::get_if<unsigned>(&ref)) {
    if (*index < devices_.size()) return devices_[*index];
    throw gpu::GpuArgumentError("no GPU with NVML index " + std::to_string(*index) +
                                " on this node (it has " + std::to_string(devices_.size()) +
                                "; see list_devices)");
  }
  const std::string& uuid = std::get<std::string>(ref);
  for (GpuInfo& gpu : devices_) {
    if (gpu.device.uuid() == uuid) return gpu;
  }
  throw gpu::GpuArgumentError("no GPU with UUID " +
                              json(uuid).dump(-1, ' ', false, json::error_handler_t::replace) +
                              " on this node (see list_devices)");
}

void Handler::CheckChangeable(SessionId id, const GpuInfo& gpu) {
  if (gpu.device.mig_enabled()) {
    throw gpu::MigError(gpu.device.Describe() +
                        " is in MIG mode; clocks and power limits belong to the whole GPU and "
                        "cannot be set per MIG instance: disable MIG (`nvidia-smi -i " +
                        std::to_string(gpu.device.nvml_index()) + " -mig 0`)");
  }
  const auto lease = leases_.find(gpu.device.nvml_index());
  if (lease != leases_.end() && lease->second.holder != id) {
    const auto holder = sessions_.find(lease->second.holder);
    const std::string who =
        holder == sessions_.end() ? "another client" : "client " + holder->second.peer.Describe();
    throw gpu::GpuError(gpu.device.Describe() + " is leased to " + who +
                        ", which changed its clocks or power limit; it is released when that "
                        "client resets both or disconnects");
  }
}

json Handler::ListDevices() const {
  json list = json::array();
  for (const GpuInfo& gpu : devices_) {
    json entry = {{"index", gpu.device.nvml_index()},
                  {"uuid", gpu.device.uuid()},
                  {"name", gpu.device.name()},
                  {"mig", gpu.device.mig_enabled()},
                  {"supported_sm_clocks_mhz", gpu.clocks}};
    try {
      const gpu::PowerLimits limits = gpu.device.GetPowerLimits();
      entry["power_limit_w"] = {{"min", limits.min_w},
                                {"max", limits.max_w},
                                {"default", limits.default_w},
                                {"current", limits.current_w}};
    } catch (const gpu::GpuError& e) {
      entry["power_limit_w"] = nullptr;
      entry["power_limit_error"] = e.what();
    }
    const auto lease = leases_.find(gpu.device.nvml_index());
    if (lease == leases_.end()) {
      entry["lease"] = nullptr;
    } else {
      const auto holder = sessions_.find(lease->second.holder);
      json held = {{"locked_clocks", lease->second.clocks}, {"power_limit", lease->second.power}};
      if (holder != sessions_.end()) {
        held["pid"] = holder->second.peer.pid;
        held["uid"] = holder->second.peer.uid;
        held["user"] = holder->second.peer.user;
      }
      entry["lease"] = held;
    }
    list.push_back(std::move(entry));
  }
  return {{"ok", true}, {"devices", std::move(list)}};
}

json Handler::Dispatch(Session& session, SessionId id, const DaemonRequest& request) {
  const std::string op(gpu::DaemonOpName(request.op));
  if (request.op == DaemonOp::kHello) {
    if (request.version != gpu::kDaemonProtocolVersion) {
      return Error("protocol version " + std::to_string(request.version) +
                   " is not supported; this joulepiped speaks version " +
                   std::to_string(gpu::kDaemonProtocolVersion) +
                   ": use a joulepipe client of the same release as the daemon");
    }
    session.greeted = true;
    return {{"ok", true},
            {"version", gpu::kDaemonProtocolVersion},
            {"daemon", "joulepiped"},
            {"devices", devices_.size()},
            {"peer",
             {{"pid", session.peer.pid}, {"uid", session.peer.uid}, {"user", session.peer.user}}}};
  }
  if (!session.greeted) {
    return Error("send {\"op\":\"hello\",\"version\":" +
                 std::to_string(gpu::kDaemonProtocolVersion) + "} before " + op);
  }
  if (request.op == DaemonOp::kListDevices) return ListDevices();

  // Changes: resolve, check, apply, audit (the audit line also for failures).
  AuditEntry audit{op, gpu::DescribeDeviceRef(request.device), "-", "-", "ok"};
  if (request.op == DaemonOp::kSetLockedClocks)
    audit.requested = Mhz(request.min_mhz, request.max_mhz);
  if (request.op == DaemonOp::kSetPowerLimit) audit.requested = WattsText(request.watts);
  try {
    GpuInfo& gpu = Resolve(request.device);
    const unsigned index = gpu.device.nvml_index();
    audit.device = gpu.device.uuid();
    CheckChangeable(id, gpu);
    json reply = {{"ok", true}, {"device", index}, {"uuid", gpu.device.uuid()}};
    switch (request.op) {
      case DaemonOp::kSetLockedClocks: {
        if (gpu.clocks.empty()) {
          throw gpu::GpuError("cannot lock the clocks of " + gpu.device.Describe() +
                              ": its supported SM clocks could not be read at start");
        }
        const int lo = gpu.clocks.back();
        const int hi = gpu.clocks.front();
        const int want_max = std::clamp(request.max_mhz, lo, hi);
        const int want_min = std::clamp(request.min_mhz, lo, hi);
        int applied_max = lo;  // the highest supported clock <= want_max
        for (int clock : gpu.clocks) {
          if (clock <= want_max) {
            applied_max = clock;
            break;
          }
        }
        int applied_min = hi;  // the lowest supported clock >= want_min
        for (auto it = gpu.clocks.rbegin(); it != gpu.clocks.rend(); ++it) {
          if (*it >= want_min) {
            applied_min = *it;
            break;
          }
        }
        if (applied_min > applied_max) applied_min = applied_max;
        audit.applied = Mhz(applied_min, applied_max);
        gpu.device.SetLockedClocks(applied_min, applied_max);
        Lease& lease = leases_[index];
        lease.holder = id;
        lease.clocks = true;
        session.leased.insert(index);
        reply["requested"] = {{"min_mhz", request.min_mhz}, {"max_mhz", request.max_mhz}};
        reply["applied"] = {{"min_mhz", applied_min}, {"max_mhz", applied_max}};
        reply["clamped"] = applied_min != request.min_mhz || applied_max != request.max_mhz;
        break;
      }
      case DaemonOp::kSetPowerLimit: {
        const gpu::PowerLimits limits = gpu.device.GetPowerLimits();
        const double lo_mw = std::round(limits.min_w * 1e3);
        const double hi_mw = std::round(limits.max_w * 1e3);
        const double mw = std::clamp(std::round(request.watts * 1e3), lo_mw, hi_mw);
        const double applied = mw / 1e3;
        audit.applied = WattsText(applied);
        gpu.device.SetPowerLimit(applied);
        Lease& lease = leases_[index];
        lease.holder = id;
        lease.power = true;
        session.leased.insert(index);
        reply["requested_w"] = request.watts;
        reply["applied_w"] = applied;
        reply["range_w"] = {limits.min_w, limits.max_w};
        reply["clamped"] = std::abs(applied - request.watts) > 5e-4;
        break;
      }
      case DaemonOp::kResetLockedClocks:
      case DaemonOp::kResetPowerLimit: {
        const bool clocks = request.op == DaemonOp::kResetLockedClocks;
        if (clocks) {
          gpu.device.ResetLockedClocks();
        } else {
          gpu.device.ResetPowerLimit();
          const double applied = gpu.device.GetPowerLimits().current_w;
          audit.applied = WattsText(applied);
          reply["applied_w"] = applied;
        }
        const auto lease = leases_.find(index);
        if (lease != leases_.end()) {  // ours (CheckChangeable)
          (clocks ? lease->second.clocks : lease->second.power) = false;
          if (!lease->second.clocks && !lease->second.power) {
            leases_.erase(lease);
            session.leased.erase(index);
          }
        }
        break;
      }
      default:
        throw gpu::GpuError("internal error: unhandled op " + op);
    }
    audit_->Write(session.peer, audit);
    return reply;
  } catch (const std::exception& e) {
    audit.result = e.what();
    audit_->Write(session.peer, audit);
    return Error(std::string(e.what()));
  }
}

void Handler::Restore(SessionId id, unsigned index, const Peer& peer,
                      const std::string& why) noexcept {
  const auto lease = leases_.find(index);
  if (lease == leases_.end() || lease->second.holder != id || index >= devices_.size()) return;
  const gpu::Device& device = devices_[index].device;
  const auto run = [&](const char* op, auto&& action) {
    AuditEntry audit{op, device.uuid(), "-", "default", "ok (" + why + ")"};
    try {
      action();
    } catch (const std::exception& e) {
      audit.applied = "-";
      audit.result = std::string(e.what()) + " (" + why + ")";
      std::fprintf(stderr, "joulepiped: cannot restore %s: %s\n", device.Describe().c_str(),
                   e.what());
    }
    audit_->Write(peer, audit);
  };
  if (lease->second.clocks) run("restore_locked_clocks", [&] { device.ResetLockedClocks(); });
  if (lease->second.power) run("restore_power_limit", [&] { device.ResetPowerLimit(); });
  leases_.erase(lease);
}

void Handler::Close(SessionId id, const std::string& why) noexcept {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  for (unsigned index : it->second.leased) Restore(id, index, it->second.peer, why);
  sessions_.erase(it);
}

void Handler::RestoreAll(const std::string& why) noexcept {
  while (!sessions_.empty()) Close(sessions_.begin()->first, why);
}

}  // namespace joulepipe::daemon
