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

// [min_mhz, max_mhz] clamped to `clocks` (supported, highest first) and
// snapped to supported clocks: max down, min up; min = max if that
// inverts the range.
std::pair<int, int> SnapClocks(const std::vector<int>& clocks, int min_mhz, int max_mhz) {
  const int lo = clocks.back();
  const int hi = clocks.front();
  const int want_max = std::clamp(max_mhz, lo, hi);
  const int want_min = std::clamp(min_mhz, lo, hi);
  int applied_max = lo;  // the highest supported clock <= want_max
  for (int clock : clocks) {
    if (clock <= want_max) {
      applied_max = clock;
      break;
    }
  }
  int applied_min = hi;  // the lowest supported clock >= want_min
  for (auto it = clocks.rbegin(); it != clocks.rend(); ++it) {
    if (*it >= want_min) {
      applied_min = *it;
      break;
    }
  }
  return {std::min(applied_min, applied_max), applied_max};
}

const char* SettingName(Handler::Setting setting) {
  switch (setting) {
    case Handler::Setting::kSmClocks:
      return "gpu_locked_clocks";
    case Handler::Setting::kMemoryClocks:
      return "mem_locked_clocks";
    case Handler::Setting::kPowerLimit:
      return "power_limit";
  }
  return "?";
}

std::string ValueText(Handler::Setting setting, const Handler::ClaimValue& v) {
  return setting == Handler::Setting::kPowerLimit ? WattsText(v.watts) : Mhz(v.min_mhz, v.max_mhz);
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
  return it != sessions_.end() && (!it->second.leased.empty() || !it->second.claimed.empty());
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
    throw ChangeRefused(gpu.device.Describe() +
                        " is in MIG mode; clocks and power limits belong to the whole GPU and "
                        "cannot be set per MIG instance: disable MIG (`nvidia-smi -i " +
                        std::to_string(gpu.device.nvml_index()) + " -mig 0`)");
  }
  const auto lease = leases_.find(gpu.device.nvml_index());
  if (lease != leases_.end() && lease->second.holder != id) {
    const auto holder = sessions_.find(lease->second.holder);
    const std::string who =
        holder == sessions_.end() ? "another client" : "client " + holder->second.peer.Describe();
    throw ChangeRefused(gpu.device.Describe() + " is leased to " + who +
                        ", which changed its clocks or power limit; it is released when that "
                        "client resets both or disconnects");
  }
  for (const auto& [key, claimants] : claims_) {
    if (key.first != gpu.device.nvml_index() || claimants.empty()) continue;
    const auto holder = sessions_.find(claimants.back().session);
    const std::string who = holder == sessions_.end()
                                ? "a Zeus client"
                                : "Zeus client " + holder->second.peer.Describe();
    throw ChangeRefused(gpu.device.Describe() + " has settings of " + who +
                        " (through the zeusd API); they end when it resets them or exits");
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
    json claims = json::array();
    for (const auto& [key, claimants] : claims_) {
      if (key.first != gpu.device.nvml_index()) continue;
      for (const Claimant& c : claimants) {
        const auto holder = sessions_.find(c.session);
        if (holder == sessions_.end()) continue;
        claims.push_back({{"setting", SettingName(key.second)},
                          {"pid", holder->second.peer.pid},
                          {"uid", holder->second.peer.uid},
                          {"user", holder->second.peer.user}});
      }
    }
    entry["claims"] = std::move(claims);  // Zeus's, oldest first: the last is in force
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
        const auto [applied_min, applied_max] =
            SnapClocks(gpu.clocks, request.min_mhz, request.max_mhz);
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
  const std::set<std::pair<unsigned, Setting>> claimed = it->second.claimed;
  for (const auto& [index, setting] : claimed) {
    Withdraw(id, index, setting, it->second.peer, "restore", why);
  }
  sessions_.erase(it);
}

void Handler::RestoreAll(const std::string& why) noexcept {
  while (!sessions_.empty()) Close(sessions_.begin()->first, why);
}

// ---- Zeus's sessions: claims ----------------------------------------------

SessionId Handler::OpenShared(const Peer& peer) {
  const SessionId id = Open(peer);
  sessions_[id].greeted = true;
  sessions_[id].shared = true;
  return id;
}

const gpu::Device& Handler::device(unsigned index) const {
  if (index >= devices_.size()) {
    throw gpu::GpuArgumentError("no GPU with NVML index " + std::to_string(index) +
                                " on this node (it has " + std::to_string(devices_.size()) + ")");
  }
  return devices_[index].device;
}

void Handler::CheckClaimable(SessionId id, const GpuInfo& gpu) const {
  if (gpu.device.mig_enabled()) {
    throw ChangeRefused(gpu.device.Describe() +
                        " is in MIG mode; clocks and power limits belong to the whole GPU and "
                        "cannot be set per MIG instance");
  }
  const auto lease = leases_.find(gpu.device.nvml_index());
  if (lease != leases_.end() && lease->second.holder != id) {
    const auto holder = sessions_.find(lease->second.holder);
    const std::string who = holder == sessions_.end()
                                ? "a joulepipe client"
                                : "joulepipe client " + holder->second.peer.Describe();
    throw ChangeRefused(gpu.device.Describe() + " is leased to " + who +
                        ", which changed its clocks or power limit; it is released when that "
                        "client resets both or disconnects");
  }
}

std::string Handler::Apply(const GpuInfo& gpu, Setting setting,
                           const std::optional<ClaimValue>& value, json* reply) {
  const gpu::Device& d = gpu.device;
  switch (setting) {
    case Setting::kSmClocks: {
      if (!value) {
        d.ResetLockedClocks();
        return "default";
      }
      if (gpu.clocks.empty()) {
        throw gpu::GpuError("cannot lock the clocks of " + d.Describe() +
                            ": its supported SM clocks could not be read at start");
      }
      const auto [lo, hi] = SnapClocks(gpu.clocks, value->min_mhz, value->max_mhz);
      d.SetLockedClocks(lo, hi);
      if (reply != nullptr) {
        (*reply)["applied"] = {{"min_mhz", lo}, {"max_mhz", hi}};
        (*reply)["clamped"] = lo != value->min_mhz || hi != value->max_mhz;
      }
      return Mhz(lo, hi);
    }
    case Setting::kMemoryClocks:
      if (!value) {
        d.ResetMemoryLockedClocks();
        return "default";
      }
      d.SetMemoryLockedClocks(value->min_mhz, value->max_mhz);
      if (reply != nullptr) {
        (*reply)["applied"] = {{"min_mhz", value->min_mhz}, {"max_mhz", value->max_mhz}};
      }
      return Mhz(value->min_mhz, value->max_mhz);
    case Setting::kPowerLimit: {
      if (!value) {
        d.ResetPowerLimit();
        return "default";
      }
      const gpu::PowerLimits limits = d.GetPowerLimits();
      const double mw = std::clamp(std::round(value->watts * 1e3), std::round(limits.min_w * 1e3),
                                   std::round(limits.max_w * 1e3));
      d.SetPowerLimit(mw / 1e3);
      if (reply != nullptr) {
        (*reply)["applied_mw"] = static_cast<long long>(mw);
        (*reply)["clamped"] = std::abs(mw / 1e3 - value->watts) > 5e-4;
      }
      return WattsText(mw / 1e3);
    }
  }
  return "-";
}

json Handler::Claim(SessionId id, unsigned index, Setting setting, ClaimValue value) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end() || !it->second.shared) {
    throw gpu::GpuError("internal error: no Zeus session " + std::to_string(id));
  }
  Session& session = it->second;
  AuditEntry audit{std::string("set_") + SettingName(setting), "GPU " + std::to_string(index),
                   ValueText(setting, value), "-", "ok"};
  try {
    if (index >= devices_.size()) device(index);  // throws its GpuArgumentError
    GpuInfo& gpu = devices_[index];
    audit.device = gpu.device.uuid();
    CheckClaimable(id, gpu);
    json reply = {{"uuid", gpu.device.uuid()}};
    audit.applied = Apply(gpu, setting, value, &reply);
    std::vector<Claimant>& claimants = claims_[{index, setting}];
    std::erase_if(claimants, [&](const Claimant& c) { return c.session == id; });
    claimants.push_back({id, value});
    session.claimed.insert({index, setting});
    audit_->Write(session.peer, audit);
    return reply;
  } catch (const std::exception& e) {
    audit.result = e.what();
    audit_->Write(session.peer, audit);
    throw;
  }
}

json Handler::Unclaim(SessionId id, unsigned index, Setting setting) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end() || !it->second.shared) {
    throw gpu::GpuError("internal error: no Zeus session " + std::to_string(id));
  }
  Session& session = it->second;
  AuditEntry audit{std::string("reset_") + SettingName(setting), "GPU " + std::to_string(index),
                   "-", "-", "ok"};
  try {
    if (index >= devices_.size()) device(index);
    GpuInfo& gpu = devices_[index];
    audit.device = gpu.device.uuid();
    CheckClaimable(id, gpu);
    json reply = {{"uuid", gpu.device.uuid()}};
    const auto found = claims_.find({index, setting});
    std::vector<Claimant> left;
    bool mine_in_force = false;
    if (found != claims_.end()) {
      mine_in_force = !found->second.empty() && found->second.back().session == id;
      std::erase_if(found->second, [&](const Claimant& c) { return c.session == id; });
      left = found->second;
      if (left.empty()) claims_.erase(found);
    }
    session.claimed.erase({index, setting});
    if (left.empty()) {
      audit.applied = Apply(gpu, setting, std::nullopt, nullptr);
      reply["in_force"] = "default";
    } else {
      const Peer& newest = sessions_.at(left.back().session).peer;
      if (mine_in_force) audit.applied = Apply(gpu, setting, left.back().value, nullptr);
      audit.result = "ok (the setting of " + newest.Describe() + " is in force)";
      reply["in_force"] = {{"pid", newest.pid}, {"uid", newest.uid}, {"user", newest.user}};
    }
    audit_->Write(session.peer, audit);
    return reply;
  } catch (const std::exception& e) {
    audit.result = e.what();
    audit_->Write(session.peer, audit);
    throw;
  }
}

void Handler::Withdraw(SessionId id, unsigned index, Setting setting, const Peer& peer,
                       const std::string& op, const std::string& why) {
  const auto found = claims_.find({index, setting});
  if (found == claims_.end() || index >= devices_.size()) return;
  const bool in_force = !found->second.empty() && found->second.back().session == id;
  std::erase_if(found->second, [&](const Claimant& c) { return c.session == id; });
  std::optional<ClaimValue> next;
  std::string whose = "default";
  if (!found->second.empty()) {
    next = found->second.back().value;
    const auto holder = sessions_.find(found->second.back().session);
    if (holder != sessions_.end()) whose = holder->second.peer.Describe() + "'s setting";
  } else {
    claims_.erase(found);
  }
  if (!in_force) return;  // another session's setting was in force, and stays
  const GpuInfo& gpu = devices_[index];
  AuditEntry audit{op + "_" + SettingName(setting), gpu.device.uuid(), "-", whose,
                   "ok (" + why + ")"};
  try {
    audit.applied = Apply(gpu, setting, next, nullptr) + (next ? " (" + whose + ")" : "");
  } catch (const std::exception& e) {
    audit.applied = "-";
    audit.result = std::string(e.what()) + " (" + why + ")";
    std::fprintf(stderr, "joulepiped: cannot restore %s: %s\n", gpu.device.Describe().c_str(),
                 e.what());
  }
  audit_->Write(peer, audit);
}

json Handler::SetPersistence(SessionId id, unsigned index, bool enabled) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end())
    throw gpu::GpuError("internal error: no session " + std::to_string(id));
  AuditEntry audit{"set_persistence_mode", "GPU " + std::to_string(index), enabled ? "on" : "off",
                   "-", "ok"};
  try {
    const gpu::Device& d = device(index);
    audit.device = d.uuid();
    d.SetPersistenceMode(enabled);
    audit.applied = audit.requested;
    audit_->Write(it->second.peer, audit);
    return {{"uuid", d.uuid()}, {"enabled", enabled}};
  } catch (const std::exception& e) {
    audit.result = e.what();
    audit_->Write(it->second.peer, audit);
    throw;
  }
}

}  // namespace joulepipe::daemon
