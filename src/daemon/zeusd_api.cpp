#include "zeusd_api.hpp"

#include <charconv>
#include <chrono>
#include <exception>
#include <functional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "joulepipe/gpu/error.hpp"

namespace joulepipe::daemon {
namespace {

using nlohmann::json;

// A refusal with its status; turned into {"error": ...}.
struct Refused {
  int status;
  std::string message;
};

ZeusdAnswer Answer(json body) {
  return ZeusdAnswer{200, body.dump(), false, {}};
}

ZeusdAnswer ErrorAnswer(int status, const std::string& message) {
  return ZeusdAnswer{status,
                     json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace),
                     false,
                     {}};
}

long long Integer(const HttpRequest& r, std::string_view key, long long lo, long long hi) {
  const std::optional<std::string> text = QueryValue(r.query, key);
  if (!text) throw Refused{400, "missing query parameter " + std::string(key)};
  long long value = 0;
  const auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || ptr != text->data() + text->size() || text->empty() || value < lo ||
      value > hi) {
    throw Refused{400, std::string(key) + " must be an integer in " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got " +
                           json(*text).dump(-1, ' ', false, json::error_handler_t::replace)};
  }
  return value;
}

bool Boolean(const HttpRequest& r, std::string_view key, std::optional<bool> fallback) {
  const std::optional<std::string> text = QueryValue(r.query, key);
  if (!text) {
    if (fallback) return *fallback;
    throw Refused{400, "missing query parameter " + std::string(key) + " (true or false)"};
  }
  if (*text == "true") return true;
  if (*text == "false") return false;
  throw Refused{400, std::string(key) + " must be true or false"};
}

// gpu_ids=0,1,2; absent: every GPU when `all_if_absent`.
std::vector<unsigned> GpuIds(const Handler& handler, const HttpRequest& r, bool all_if_absent) {
  const std::optional<std::string> text = QueryValue(r.query, "gpu_ids");
  std::vector<unsigned> ids;
  if (!text) {
    if (!all_if_absent) throw Refused{400, "missing query parameter gpu_ids (e.g. gpu_ids=0,1)"};
    for (unsigned i = 0; i < handler.device_count(); ++i) ids.push_back(i);
    return ids;
  }
  std::string_view rest = *text;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    unsigned id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      throw Refused{400, "gpu_ids must be GPU indices separated by commas (e.g. 0,1)"};
    }
    if (id >= handler.device_count()) {
      throw Refused{400, "GPU " + std::to_string(id) + " does not exist on this node (it has " +
                             std::to_string(handler.device_count()) + "; GET /discover)"};
    }
    if (ids.size() >= 1024) throw Refused{400, "gpu_ids names over 1024 GPUs"};
    ids.push_back(id);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return ids;
}

// Runs `fn` per GPU and answers {"<id>": what fn gave}.
ZeusdAnswer PerGpu(const std::vector<unsigned>& ids, const std::function<json(unsigned)>& fn) {
  json out = json::object();
  for (unsigned id : ids) out[std::to_string(id)] = fn(id);
  return Answer(std::move(out));
}

using Route = std::function<ZeusdAnswer(Handler&, SessionId, const HttpRequest&)>;

struct RouteEntry {
  std::string_view method, path;
  Route answer;
};

ZeusdAnswer Set(Handler& h, SessionId s, const HttpRequest& r, Handler::Setting setting,
                bool reset) {
  const std::vector<unsigned> ids = GpuIds(h, r, false);
  Handler::ClaimValue value;
  if (!reset) {
    if (setting == Handler::Setting::kPowerLimit) {
      value.watts = static_cast<double>(Integer(r, "power_limit_mw", 1, 1'000'000'000)) / 1e3;
    } else {
      value.min_mhz = static_cast<int>(Integer(r, "min_clock_mhz", 1, 100'000));
      value.max_mhz = static_cast<int>(Integer(r, "max_clock_mhz", 1, 100'000));
      if (value.min_mhz > value.max_mhz) {
        throw Refused{400, "min_clock_mhz (" + std::to_string(value.min_mhz) +
                               ") is above max_clock_mhz (" + std::to_string(value.max_mhz) + ")"};
      }
    }
  }
  Boolean(r, "block", true);  // every change is made before the answer
  return PerGpu(ids, [&](unsigned id) {
    return reset ? h.Unclaim(s, id, setting) : h.Claim(s, id, setting, value);
  });
}

const std::vector<RouteEntry>& Routes() {
  using S = Handler::Setting;
  static const std::vector<RouteEntry> routes = {
      {"GET", "/discover",
       [](Handler& h, SessionId, const HttpRequest&) {
         json gpus = json::array();
         for (unsigned i = 0; i < h.device_count(); ++i) {
           gpus.push_back({{"id", i}, {"name", h.device(i).name()}});
         }
         return Answer({{"gpus", std::move(gpus)},
                        {"cpus", json::array()},
                        {"enabled_api_groups", {"gpu-read", "gpu-control"}},
                        {"auth_required", false}});
       }},
      {"GET", "/time",
       [](Handler&, SessionId, const HttpRequest&) {
         return Answer({{"timestamp_ms", UnixMillis()}});
       }},
      {"GET", "/gpu/get_cumulative_energy",
       [](Handler& h, SessionId, const HttpRequest& r) {
         return PerGpu(GpuIds(h, r, false), [&](unsigned id) {
           const std::optional<gpu::EnergyReading> e = h.device(id).ReadEnergy();
           if (!e) throw gpu::GpuError(h.device(id).Describe() + " has no energy counter");
           return json{{"energy_mj", e->millijoules}};
         });
       }},
      {"GET", "/gpu/get_power",
       [](Handler& h, SessionId, const HttpRequest& r) {
         const std::vector<unsigned> ids = GpuIds(h, r, true);
         json power = json::object();
         for (unsigned id : ids) power[std::to_string(id)] = h.device(id).InstantPower().milliwatts;
         return Answer({{"timestamp_ms", UnixMillis()}, {"power_mw", std::move(power)}});
       }},
      {"GET", "/gpu/get_power_limit",
       [](Handler& h, SessionId, const HttpRequest& r) {
         return PerGpu(GpuIds(h, r, true), [&](unsigned id) {
           return json{
               {"power_limit_mw", std::llround(h.device(id).GetPowerLimits().current_w * 1e3)}};
         });
       }},
      {"GET", "/gpu/get_power_limit_constraints",
       [](Handler& h, SessionId, const HttpRequest& r) {
         return PerGpu(GpuIds(h, r, true), [&](unsigned id) {
           const gpu::PowerLimits l = h.device(id).GetPowerLimits();
           return json{{"min_power_limit_mw", std::llround(l.min_w * 1e3)},
                       {"max_power_limit_mw", std::llround(l.max_w * 1e3)}};
         });
       }},
      {"GET", "/gpu/get_persistence_mode",
       [](Handler& h, SessionId, const HttpRequest& r) {
         return PerGpu(GpuIds(h, r, true), [&](unsigned id) {
           return json{{"enabled", h.device(id).PersistenceMode()}};
         });
       }},
      {"POST", "/gpu/set_persistence_mode",
       [](Handler& h, SessionId s, const HttpRequest& r) {
         const std::vector<unsigned> ids = GpuIds(h, r, false);
         const bool enabled = Boolean(r, "enabled", std::nullopt);
         Boolean(r, "block", true);
         return PerGpu(ids, [&](unsigned id) { return h.SetPersistence(s, id, enabled); });
       }},
      {"POST", "/gpu/set_power_limit",
       [](Handler& h, SessionId s, const HttpRequest& r) {
         return Set(h, s, r, S::kPowerLimit, false);
       }},
      {"POST", "/gpu/set_gpu_locked_clocks",
       [](Handler& h, SessionId s, const HttpRequest& r) {
         return Set(h, s, r, S::kSmClocks, false);
       }},
      {"POST", "/gpu/reset_gpu_locked_clocks",
       [](Handler& h, SessionId s, const HttpRequest& r) {
         return Set(h, s, r, S::kSmClocks, true);
       }},
      {"POST", "/gpu/set_mem_locked_clocks",
       [](Handler& h, SessionId s, const HttpRequest& r) {
         return Set(h, s, r, S::kMemoryClocks, false);
       }},
      {"POST", "/gpu/reset_mem_locked_clocks",
       [](Handler& h, SessionId s, const HttpRequest& r) {
         return Set(h, s, r, S::kMemoryClocks, true);
       }},
      {"GET", "/gpu/stream_power",
       [](Handler& h, SessionId, const HttpRequest& r) {
         ZeusdAnswer a;
         a.stream = true;
         a.stream_gpus = GpuIds(h, r, true);
         return a;
       }},
  };
  return routes;
}

// Routes of zeusd this daemon does not serve, and why.
std::optional<std::string> RefusedRoute(std::string_view path) {
  if (path.rfind("/cpu/", 0) == 0) {
    return "joulepiped serves GPUs only: CPU and DRAM energy (RAPL) is read by the process "
           "itself (joulepipe's monitor, or Zeus's own RAPL reader), so the cpu-read group "
           "is not enabled (GET /discover)";
  }
  if (path.rfind("/auth/", 0) == 0) {
    return "joulepiped takes no tokens: it authorises each caller by the socket's peer "
           "credentials (allow_users, allow_groups), so auth_required is false (GET /discover)";
  }
  return std::nullopt;
}

}  // namespace

long long UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ZeusdAnswer AnswerZeusd(Handler& handler, SessionId session, const HttpRequest& request) {
  if (const std::optional<std::string> why = RefusedRoute(request.path)) {
    return ErrorAnswer(404, *why);
  }
  bool path_known = false;
  for (const RouteEntry& route : Routes()) {
    if (route.path != request.path) continue;
    path_known = true;
    if (route.method != request.method) continue;
    try {
      return route.answer(handler, session, request);
    } catch (const Refused& refused) {
      return ErrorAnswer(refused.status, refused.message);
    } catch (const Handler::ChangeRefused& e) {
      return ErrorAnswer(403, e.what());
    } catch (const gpu::GpuArgumentError& e) {
      return ErrorAnswer(400, e.what());
    } catch (const std::exception& e) {
      return ErrorAnswer(500, e.what());
    }
  }
  if (path_known) {
    return ErrorAnswer(405, "use the other method for " + request.path +
                                " (zeusd's routes: GET reads, POST changes)");
  }
  return ErrorAnswer(404, "no route " + request.path +
                              " in joulepiped's zeusd API (docs/daemon.md lists the routes)");
}

std::string ZeusdPowerEvent(const Handler& handler, const std::vector<unsigned>& gpus) {
  std::string out;
  const long long now = UnixMillis();
  for (unsigned id : gpus) {
    long long mw = 0;
    try {
      mw = handler.device(id).InstantPower().milliwatts;
    } catch (const std::exception&) {
      continue;  // a GPU that cannot be read now is left out of this event
    }
    out += "data: " + json{{"timestamp_ms", now}, {"gpu_id", id}, {"power_mw", mw}}.dump() + "\n\n";
  }
  return out;
}

}  // namespace joulepipe::daemon
