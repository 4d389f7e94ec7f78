#include "grid_section.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/report/line_chart.hpp"

namespace joulepipe::report {

namespace {

using model::Format;
using nlohmann::json;

constexpr char kBaselineColor[] = "#7f7f7f";
constexpr char kJoulepipeColor[] = "#1f77b4";

// The numbers at doc[a][b] (b may be null): an array of finite numbers.
std::vector<double> Numbers(const json& doc, const char* a, const char* b,
                            const std::string& where) {
  const json* at = doc.contains(a) ? &doc[a] : nullptr;
  if (at != nullptr && b != nullptr) at = at->contains(b) ? &(*at)[b] : nullptr;
  const std::string path = std::string("waveform.") + a + (b ? std::string(".") + b : "");
  if (at == nullptr || !at->is_array()) {
    throw model::InputError(where + ": " + path + " is missing or not a list of numbers");
  }
  std::vector<double> out;
  for (const json& v : *at) {
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      throw model::InputError(where + ": " + path + " holds something that is not a number");
    }
    out.push_back(v.get<double>());
  }
  return out;
}

Series PowerSeries(const char* label, const std::vector<double>& watts, double dt, double lead_s,
                   double idle_w, const char* color) {
  Series s;
  s.label = label;
  s.color = color;
  s.points.push_back({-lead_s, idle_w / 1e6});
  s.points.push_back({0, idle_w / 1e6});
  for (std::size_t i = 0; i < watts.size(); ++i) {
    s.points.push_back({(static_cast<double>(i) + 0.5) * dt, watts[i] / 1e6});
  }
  return s;
}

Series FloorLine(const std::string& label, double floor_w, double from_s, double to_s,
                 const char* color) {
  Series s;
  s.label = label;
  s.color = color;
  s.dashed = true;
  s.points = {{from_s, floor_w / 1e6}, {to_s, floor_w / 1e6}};
  return s;
}

std::vector<std::string> MetricsRow(const char* policy, const json& m) {
  auto mw = [&](const char* key) {
    return m.contains(key) && m[key].is_number() ? Format("%.3f MW", m[key].get<double>() / 1e6)
                                                 : std::string("?");
  };
  const std::string ramp = m.contains("ramp_w_per_s") && m["ramp_w_per_s"].is_number()
                               ? Format("%.2f MW/s", m["ramp_w_per_s"].get<double>() / 1e6)
                               : std::string("?");
  return {policy, mw("peak_w"), mw("trough_w"), mw("swing_w"), ramp, mw("band_rms_w")};
}

}  // namespace

std::optional<HtmlSection> GridSection(const PlanReportInputs& in) {
  if (!in.sim || !in.sim->contains("waveform")) return std::nullopt;
  const json& w = (*in.sim)["waveform"];
  const std::string& sn = in.sim_name;
  const double dt = OutputNumber(w, {"bin_s"}, sn + " (waveform)");
  const double lead = OutputNumber(w, {"lead_s"}, sn + " (waveform)");
  const double idle = OutputNumber(w, {"idle_w"}, sn + " (waveform)");
  const std::vector<double> base = Numbers(w, "baseline_w", nullptr, sn);
  const std::vector<double> jp = Numbers(w, "joulepipe_w", nullptr, sn);

  HtmlSection section;
  section.id = "grid";
  section.heading = "What the grid sees";
  section.paragraphs.push_back(Format(
      "The whole job's GPU power (simulated, %g ms bins): idle before it starts (P_block on every "
      "GPU), then its first iteration. At the iteration's end every GPU waits for the gradient "
      "all-reduce at once: that drop and its return are the swing and the ramp a utility limits. "
      "joulepipe's plan lowers the compute peak the drop starts from. Dashed: the power floors "
      "of the grid plan for the healthy job, when the simulation made one (the firmware's on "
      "the baseline, and joulepipe's under its own plan).",
      dt * 1e3));
  LineChart power;
  power.title = "The job's power at its start and over its first iteration";
  power.subtitle = "simulated, " + sn;
  power.x_label = "time from the job's start (s)";
  power.y_label = "GPU power (MW)";
  power.series.push_back(
      PowerSeries("baseline (every clock at maximum)", base, dt, lead, idle, kBaselineColor));
  power.series.push_back(PowerSeries("joulepipe", jp, dt, lead, idle, kJoulepipeColor));
  if (in.sim->contains("grid_plan")) {
    const json& plan = (*in.sim)["grid_plan"];
    const double end = static_cast<double>(std::max(base.size(), jp.size())) * dt;
    for (const auto& [key, label, color] :
         {std::tuple{"firmware", "healthy job's grid plan: firmware floor", kBaselineColor},
          std::tuple{"chosen", "healthy job's grid plan: joulepipe's floor", kJoulepipeColor}}) {
      if (!plan.contains(key)) continue;
      const double floor_w = OutputNumber(plan, {key, "floor_w"}, sn);
      if (floor_w > 0) power.series.push_back(FloorLine(label, floor_w, 0, end, color));
    }
  }
  // Room above the curves for the legend (top right), which would hide the
  // compute peaks: an unlabelled, undrawn point at 1.35 x the highest.
  double highest = idle;
  for (const std::vector<double>* v : {&base, &jp}) {
    for (double x : *v) highest = std::max(highest, x);
  }
  Series headroom;
  headroom.color = "none";
  headroom.points = {{0, 1.35 * highest / 1e6}};
  power.series.push_back(headroom);
  section.svgs.push_back(RenderSvg(power));

  LineChart spectrum;
  spectrum.title = "Oscillation spectrum of the job's power";
  spectrum.subtitle = "amplitude of each frequency over the whole run; the band between the lines";
  spectrum.x_label = "frequency, log10 Hz (-1 = 0.1 Hz, 0 = 1 Hz, 1 = 10 Hz)";
  spectrum.y_label = "amplitude (MW)";
  for (const auto& [name, label, color] : {std::tuple{"baseline", "baseline", kBaselineColor},
                                           std::tuple{"joulepipe", "joulepipe", kJoulepipeColor}}) {
    const std::vector<double> hz = Numbers(w["spectrum"], name, "hz", sn);
    const std::vector<double> amplitude = Numbers(w["spectrum"], name, "amplitude_w", sn);
    if (hz.size() != amplitude.size()) {
      throw model::InputError(sn + ": waveform.spectrum." + name +
                              " has different numbers of frequencies and amplitudes");
    }
    Series s;
    s.label = label;
    s.color = color;
    for (std::size_t i = 0; i < hz.size(); ++i) {
      if (hz[i] > 0) s.points.push_back({std::log10(hz[i]), amplitude[i] / 1e6});
    }
    spectrum.series.push_back(std::move(s));
  }
  spectrum.vertical_lines.push_back({"0.1 Hz", -1});
  spectrum.vertical_lines.push_back({"20 Hz", std::log10(20.0)});
  section.svgs.push_back(RenderSvg(spectrum));

  // The energy-smoothness frontier (`simulate --grid-frontier`).
  if (in.sim->contains("grid_plan") && (*in.sim)["grid_plan"].contains("ramp_frontier")) {
    const json& rows = (*in.sim)["grid_plan"]["ramp_frontier"];
    const double base_j = OutputNumber((*in.sim)["grid_plan"], {"baseline", "energy_j"}, sn);
    LineChart frontier;
    frontier.title = "What each ramp limit costs: the energy-smoothness frontier";
    frontier.subtitle = "the healthy job's energy per iteration against the baseline's, " + sn;
    frontier.x_label = "ramp limit (MW/s)";
    frontier.y_label = "energy per iteration vs baseline (%)";
    Series firmware, chosen;
    firmware.label = "firmware floor on the baseline";
    firmware.color = kBaselineColor;
    firmware.dots = true;
    chosen.label = "joulepipe's plan + floor";
    chosen.color = kJoulepipeColor;
    chosen.dots = true;
    for (const json& row : rows) {
      const double ramp = OutputNumber(row, {"max_ramp_w_per_s"}, sn) / 1e6;
      firmware.points.push_back(
          {ramp, 100 * (OutputNumber(row, {"firmware", "energy_j"}, sn) / base_j - 1)});
      chosen.points.push_back(
          {ramp, 100 * (OutputNumber(row, {"chosen", "energy_j"}, sn) / base_j - 1)});
    }
    frontier.series = {firmware, chosen};
    section.svgs.push_back(RenderSvg(frontier));
  }

  if (w.contains("metrics")) {
    HtmlTable t;
    t.caption =
        "Grid figures over the whole run (swing within 1 s, ramp between 0.1 s means, "
        "band 0.1-20 Hz RMS)";
    t.header = {"policy", "peak", "trough", "swing", "ramp", "band RMS"};
    t.numeric_columns = {1, 2, 3, 4, 5};
    t.rows.push_back(MetricsRow("baseline", w["metrics"].value("baseline", json::object())));
    t.rows.push_back(MetricsRow("joulepipe", w["metrics"].value("joulepipe", json::object())));
    section.tables.push_back(t);
  }
  return section;
}

}  // namespace joulepipe::report
