#include "joulepipe/gpu/daemon_protocol.hpp"

#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::gpu {
namespace {

using nlohmann::json;

constexpr struct {
  DaemonOp op;
  std::string_view name;
} kOps[] = {
    {DaemonOp::kHello, "hello"},
    {DaemonOp::kListDevices, "list_devices"},
    {DaemonOp::kSetLockedClocks, "set_locked_clocks"},
    {DaemonOp::kResetLockedClocks, "reset_locked_clocks"},
    {DaemonOp::kSetPowerLimit, "set_power_limit"},
    {DaemonOp::kResetPowerLimit, "reset_power_limit"},
};

// Largest clock a request may carry; far above any GPU, small enough that
// arithmetic on it cannot overflow.
constexpr int kMaxMhz = 100000;
constexpr std::size_t kMaxUuidBytes = 96;

// A value as short text for messages, never long and always valid UTF-8.
// Arrays and objects are only named: dump() recurses, and a hostile request
// may nest 30000 levels deep (found by the fuzzer: stack overflow).
std::string Show(const json& value) {
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " elements";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// Reads an integer field in [lo, hi]; "" on success, else the reason.
std::string ReadInt(const json& object, std::string_view op, const char* key, long long lo,
                    long long hi, int* out) {
  const auto it = object.find(key);
  const std::string where = std::string(op) + ": \"" + key + "\"";
  if (it == object.end()) return where + " is missing";
  long long value = 0;
  if (it->is_number_integer()) {
    value = it->get<long long>();  // both signed and unsigned (wraps huge unsigned below)
    if (it->is_number_unsigned() &&
        it->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<long long>::max())) {
      value = std::numeric_limits<long long>::max();
    }
  } else {
    return where + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "], got " + Show(*it);
  }
  if (value < lo || value > hi) {
    return where + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
           "], got " + Show(*it);
  }
  *out = static_cast<int>(value);
  return "";
}

std::string ReadDevice(const json& object, std::string_view op, DeviceRef* out) {
  const auto it = object.find("device");
  const std::string where = std::string(op) + ": \"device\"";
  if (it == object.end()) return where + " is missing (an NVML index or a GPU UUID)";
  if (it->is_number_unsigned() || (it->is_number_integer() && it->get<long long>() >= 0)) {
    const std::uint64_t index = it->get<std::uint64_t>();
    if (index > 1u << 20) return where + " index " + Show(*it) + " is out of range";
    *out = static_cast<unsigned>(index);
    return "";
  }
  if (it->is_string()) {
    const std::string& uuid = it->get_ref<const std::string&>();
    if (uuid.empty() || uuid.size() > kMaxUuidBytes) {
      return where + " must be an NVML index or a GPU UUID (\"GPU-...\"), got " + Show(*it);
    }
    *out = uuid;
    return "";
  }
  return where + " must be an NVML index (integer >= 0) or a GPU UUID string, got " + Show(*it);
}

// Fields each op accepts besides "op"; anything else is refused so that a
// typo ("max_mzh") is an error, not a silently ignored field.
bool Allowed(DaemonOp op, const std::string& key) {
  switch (op) {
    case DaemonOp::kHello:
      return key == "version" || key == "client";
    case DaemonOp::kListDevices:
      return false;
    case DaemonOp::kSetLockedClocks:
      return key == "device" || key == "min_mhz" || key == "max_mhz";
    case DaemonOp::kResetLockedClocks:
    case DaemonOp::kResetPowerLimit:
      return key == "device";
    case DaemonOp::kSetPowerLimit:
      return key == "device" || key == "watts";
  }
  return false;
}

DecodedRequest Fail(std::string message) {
  return {std::nullopt, std::move(message)};
}

DecodedRequest DecodeObject(const json& object) {
  if (!object.is_object()) {
    return Fail("request must be a JSON object like {\"op\":\"list_devices\"}, got " +
                Show(object));
  }
  const auto op_it = object.find("op");
  if (op_it == object.end() || !op_it->is_string()) {
    return Fail(
        "request has no string \"op\"; expected one of hello, list_devices, "
        "set_locked_clocks, reset_locked_clocks, set_power_limit, reset_power_limit");
  }
  const std::string& name = op_it->get_ref<const std::string&>();
  DaemonRequest request;
  bool known = false;
  for (const auto& entry : kOps) {
    if (entry.name == name) {
      request.op = entry.op;
      known = true;
    }
  }
  if (!known) {
    return Fail("unknown op " + Show(*op_it) +
                "; expected one of hello, list_devices, set_locked_clocks, reset_locked_clocks, "
                "set_power_limit, reset_power_limit");
  }
  for (const auto& [key, value] : object.items()) {
    if (key != "op" && !Allowed(request.op, key)) {
      return Fail(name + ": unknown field " + Show(json(key)));
    }
  }
  std::string error;
  switch (request.op) {
    case DaemonOp::kHello:
      error = ReadInt(object, name, "version", 0, 1 << 30, &request.version);
      break;
    case DaemonOp::kListDevices:
      break;
    case DaemonOp::kSetLockedClocks:
      error = ReadDevice(object, name, &request.device);
      if (error.empty()) error = ReadInt(object, name, "min_mhz", 1, kMaxMhz, &request.min_mhz);
      if (error.empty()) error = ReadInt(object, name, "max_mhz", 1, kMaxMhz, &request.max_mhz);
      if (error.empty() && request.min_mhz > request.max_mhz) {
        error = name + ": min_mhz " + std::to_string(request.min_mhz) + " > max_mhz " +
                std::to_string(request.max_mhz) + "; need min_mhz <= max_mhz";
      }
      break;
    case DaemonOp::kResetLockedClocks:
    case DaemonOp::kResetPowerLimit:
      error = ReadDevice(object, name, &request.device);
      break;
    case DaemonOp::kSetPowerLimit: {
      error = ReadDevice(object, name, &request.device);
      if (!error.empty()) break;
      const auto it = object.find("watts");
      if (it == object.end()) {
        error = name + ": \"watts\" is missing";
      } else if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0 ||
                 it->get<double>() > 1e6) {
        error = name + ": \"watts\" must be a number in (0, 1e6], got " + Show(*it);
      } else {
        request.watts = it->get<double>();
      }
      break;
    }
  }
  if (!error.empty()) return Fail(std::move(error));
  return {request, ""};
}

}  // namespace

std::string_view DaemonOpName(DaemonOp op) {
  for (const auto& entry : kOps) {
    if (entry.op == op) return entry.name;
  }
  return "unknown";
}

std::string DescribeDeviceRef(const DeviceRef& ref) {
  if (const unsigned* index = std::get_if<unsigned>(&ref)) return "GPU " + std::to_string(*index);
  return std::get<std::string>(ref);
}

DecodedRequest DecodeRequest(std::string_view line) {
  if (line.size() > kMaxLineBytes) {
    return Fail("request line longer than " + std::to_string(kMaxLineBytes) + " bytes");
  }
  try {
    // The shared reader (model/json_input.hpp): bounded depth, and a
    // refusal that names the column in plain words ("request: not valid
    // JSON at line 1, column 2: ...").
    return DecodeObject(model::ParseJsonBounded(line, "request"));
  } catch (const model::InputError& e) {
    return Fail(e.what());
  } catch (const std::exception& e) {
    // Not expected (bad_alloc at worst); totality matters more than detail.
    return Fail(std::string("cannot decode request: ") + e.what());
  }
}

std::string EncodeRequest(const DaemonRequest& request) {
  json object = {{"op", std::string(DaemonOpName(request.op))}};
  const auto device = [&]() -> json {
    if (const unsigned* index = std::get_if<unsigned>(&request.device)) return *index;
    return std::get<std::string>(request.device);
  };
  switch (request.op) {
    case DaemonOp::kHello:
      object["version"] = request.version;
      break;
    case DaemonOp::kListDevices:
      break;
    case DaemonOp::kSetLockedClocks:
      object["device"] = device();
      object["min_mhz"] = request.min_mhz;
      object["max_mhz"] = request.max_mhz;
      break;
    case DaemonOp::kResetLockedClocks:
    case DaemonOp::kResetPowerLimit:
      object["device"] = device();
      break;
    case DaemonOp::kSetPowerLimit:
      object["device"] = device();
      object["watts"] = request.watts;
      break;
  }
  return EncodeReply(object);
}

std::string EncodeReply(const nlohmann::json& reply) {
  std::string line = reply.dump(-1, ' ', false, json::error_handler_t::replace);
  line.push_back('\n');
  return line;
}

std::string EncodeErrorReply(std::string_view message) {
  return EncodeReply({{"ok", false}, {"error", std::string(message)}});
}

DecodedReply DecodeReply(std::string_view line) {
  try {
    json reply = model::ParseJsonBounded(line, "reply");
    if (!reply.is_object()) return {std::nullopt, "reply is not a JSON object"};
    const auto ok = reply.find("ok");
    if (ok == reply.end() || !ok->is_boolean()) {
      return {std::nullopt, "reply has no boolean \"ok\""};
    }
    if (!ok->get<bool>()) {
      const auto error = reply.find("error");
      if (error == reply.end() || !error->is_string()) {
        return {std::nullopt, "error reply has no string \"error\""};
      }
    }
    return {std::move(reply), ""};
  } catch (const model::InputError& e) {
    return {std::nullopt, e.what()};
  } catch (const std::exception& e) {
    return {std::nullopt, std::string("cannot decode reply: ") + e.what()};
  }
}

void LineBuffer::Append(std::string_view bytes) {
  if (overflowed_) return;
  // Drop what was already returned before growing, so the buffer holds at
  // most one unfinished line plus what this call adds.
  if (start_ > 0 && start_ >= buffer_.size() / 2) {
    buffer_.erase(0, start_);
    scan_ -= start_;
    start_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<std::string> LineBuffer::Next() {
  if (overflowed_) return std::nullopt;
  const std::size_t newline = buffer_.find('\n', scan_);
  if (newline == std::string::npos) {
    scan_ = buffer_.size();
    if (buffer_.size() - start_ > max_line_) overflowed_ = true;
    return std::nullopt;
  }
  if (newline - start_ > max_line_) {
    overflowed_ = true;
    return std::nullopt;
  }
  std::string line = buffer_.substr(start_, newline - start_);
  start_ = newline + 1;
  scan_ = start_;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = scan_ = 0;
  }
  return line;
}

}  // namespace joulepipe::gpu
