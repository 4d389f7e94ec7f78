// Wait models: the arithmetic of a lowered wait and the calibrate-wait file.
#include "joulepipe/model/wait_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/read_file.hpp"

namespace joulepipe::model {

namespace {

using nlohmann::json;

constexpr int kVersion = 1;
constexpr char kKind[] = "wait_model";
constexpr char kFix[] = "fix the field or measure again with joulepipe calibrate-wait";

const WaitPoint* LeastPower(const std::vector<WaitPoint>& points) {
  const WaitPoint* best = nullptr;
  for (const WaitPoint& p : points) {
    if (best == nullptr || p.blocked_w < best->blocked_w) best = &p;
  }
  return best;
}

class WaitReader {
 public:
  explicit WaitReader(const std::string& source) : source_(source) {}

  WaitModel Read(const json& root) const {
    if (!root.is_object()) Fail("the top level", "must be a JSON object, got " + Show(root));
    const json& version = Require(root, "version");
    if (!version.is_number_integer() || version.get<long long>() != kVersion) {
      Fail("version",
           "must be 1 (this joulepipe reads wait models of version 1), got " + Show(version));
    }
    auto kind = root.find("kind");
    if (kind != root.end() && (!kind->is_string() || kind->get<std::string>() != kKind)) {
      Fail("kind", "must be \"wait_model\" (is this a calibrate-wait output?), got " + Show(*kind));
    }
    WaitModel model;
    model.source = source_;
    model.gpu = OptionalString(root, "gpu");
    model.load = OptionalString(root, "load");
    model.switch_latency_s = Seconds(Require(root, "switch_latency_s"), "switch_latency_s");
    auto margin = root.find("margin_s");
    if (margin != root.end()) model.margin_s = Seconds(*margin, "margin_s");
    const json& points = Require(root, "points");
    if (!points.is_array() || points.empty()) {
      Fail("points", "must be a non-empty array of {\"frequency\": MHz, \"blocked_w\": W}, got " +
                         Show(points));
    }
    std::set<int> seen;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const std::string path = "points[" + std::to_string(i) + "]";
      const json& entry = points[i];
      if (!entry.is_object()) Fail(path, "must be an object, got " + Show(entry));
      WaitPoint point;
      const json& mhz = Require(entry, "frequency", path);
      if (!mhz.is_number_integer() || mhz.get<long long>() < 1 || mhz.get<long long>() > 100000) {
        Fail(path + ".frequency", "must be an SM clock in MHz (1..100000), got " + Show(mhz));
      }
      point.mhz = mhz.get<int>();
      if (!seen.insert(point.mhz).second) {
        Fail(path + ".frequency",
             "repeats " + std::to_string(point.mhz) + " MHz; each clock may appear once");
      }
      const json& watts = Require(entry, "blocked_w", path);
      if (!watts.is_number() || !std::isfinite(watts.get<double>()) || watts.get<double>() < 0 ||
          watts.get<double>() > 5000) {
        Fail(path + ".blocked_w", "must be a power in watts (0..5000), got " + Show(watts));
      }
      point.blocked_w = watts.get<double>();
      model.points.push_back(point);
    }
    std::sort(model.points.begin(), model.points.end(),
              [](const WaitPoint& a, const WaitPoint& b) { return a.mhz > b.mhz; });
    return model;
  }

 private:
  static std::string Show(const json& value) {
    return value.type_name() + std::string(" ") + Excerpt(value, 60);
  }
  [[noreturn]] void Fail(const std::string& path, const std::string& problem) const {
    throw InputError(source_ + ": " + path + " " + problem + "; " + kFix);
  }
  const json& Require(const json& object, const char* key, const std::string& parent = "") const {
    auto it = object.find(key);
    if (it == object.end()) {
      throw InputError(source_ + ": " + (parent.empty() ? "the wait model" : parent) +
                       " has no field '" + key + "'; " + kFix);
    }
    return *it;
  }
  std::string OptionalString(const json& root, const char* key) const {
    auto it = root.find(key);
    if (it == root.end() || it->is_null()) return "";
    if (!it->is_string()) Fail(key, "must be a string, got " + Show(*it));
    return ExcerptText(it->get<std::string>(), 200);
  }
  double Seconds(const json& value, const std::string& path) const {
    if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0 ||
        value.get<double>() > kMaxSwitchLatencyS) {
      Fail(path, "must be seconds in 0..1 (e.g. 0.004 for 4 ms), got " + Show(value));
    }
    return value.get<double>();
  }

  const std::string& source_;
};

}  // namespace

int WaitModel::wait_mhz() const {
  return saving_w() > 0 ? LeastPower(points)->mhz : 0;
}

double WaitModel::saving_w() const {
  if (points.empty()) return 0;
  const double saving = points.front().blocked_w - LeastPower(points)->blocked_w;
  return saving >= kMinWaitSavingShare * points.front().blocked_w ? saving : 0;
}

double WaitModel::lowered_w() const {
  return std::max(0.0, p_block_w - saving_w());
}

double WaitModel::LoweredS(double gap_s) const {
  if (saving_w() <= 0 || !(gap_s >= 2 * switch_latency_s + margin_s)) return 0;
  return gap_s - switch_latency_s - margin_s;
}

double WaitModel::WaitEnergyJ(double gap_s) const {
  return p_block_w * gap_s - (p_block_w - lowered_w()) * LoweredS(gap_s);
}

double WaitModel::RestoreAfterS(double gap_s) const {
  return std::max(0.0, gap_s - switch_latency_s - margin_s);
}

std::string WaitModel::Describe() const {
  if (!calibrated()) return "uncalibrated (blocked power independent of the clock: saving 0)";
  char text[256];
  const WaitPoint& top = points.front();
  const WaitPoint& low = *LeastPower(points);
  std::snprintf(text, sizeof text,
                "calibrated (%s: %d MHz %.1f W -> %d MHz %.1f W, switch %.1f ms)", source.c_str(),
                top.mhz, top.blocked_w, low.mhz, low.blocked_w, 1e3 * switch_latency_s);
  return text;
}

WaitModel FlatWaitModel(double p_block_w) {
  WaitModel model;
  model.p_block_w = p_block_w;
  return model;
}

WaitModel WaitModelFromJson(const std::string& text, const std::string& source) {
  return WaitReader(source).Read(ParseJsonBounded(text, source));
}

WaitModel ReadWaitModelFile(const std::string& path) {
  return WaitModelFromJson(ReadWholeFile(path, "wait model"), path);
}

std::string WaitModelToJson(const WaitModel& model) {
  nlohmann::ordered_json root;
  root["version"] = kVersion;
  root["kind"] = kKind;
  if (!model.gpu.empty()) root["gpu"] = model.gpu;
  if (!model.load.empty()) root["load"] = model.load;
  root["switch_latency_s"] = model.switch_latency_s;
  root["margin_s"] = model.margin_s;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const WaitPoint& p : model.points) {
    points.push_back({{"frequency", p.mhz}, {"blocked_w", p.blocked_w}});
  }
  root["points"] = points;
  return root.dump(2) + "\n";
}

}  // namespace joulepipe::model
