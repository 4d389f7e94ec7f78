// The plan report (`joulepipe report`, `joulepipe demo`): one
// self-contained HTML page from a plan directory's files, a profile and
// optionally a simulation and a measurement. The plan and the all-max-clock
// baseline are replayed on the profile for the timelines and the per-stage
// energy; the operating points are picked on the frontier.
#include "joulepipe/report/plan_report.hpp"
#include "joulepipe/schedule/clock_plans.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "grid_section.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/objective.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/report/bar_chart.hpp"
#include "joulepipe/report/html_page.hpp"
#include "joulepipe/report/line_chart.hpp"
#include "joulepipe/report/palette.hpp"
#include "joulepipe/report/timeline_chart.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"

namespace joulepipe::report {

using model::Format;
using model::InputError;
using model::SavingPercent;
using model::SlowdownPercent;
using nlohmann::json;
using schedule::ShapeText;

double OutputNumber(const json& doc, std::initializer_list<const char*> keys,
                    const std::string& where) {
  const json* at = &doc;
  std::string path;
  for (const char* key : keys) {
    path += std::string(path.empty() ? "" : ".") + key;
    if (!at->is_object() || !at->contains(key)) {
      throw InputError(where + ": no \"" + path + "\"; is it a joulepipe output?");
    }
    at = &(*at)[key];
  }
  if (!at->is_number()) throw InputError(where + ": \"" + path + "\" is not a number");
  return at->get<double>();
}

std::string OutputText(const json& doc, const char* a, const char* b, const std::string& fallback) {
  if (doc.is_object() && doc.contains(a) && doc[a].is_object() && doc[a].contains(b) &&
      doc[a][b].is_string()) {
    return doc[a][b].get<std::string>();
  }
  return fallback;
}

namespace {

std::string EnergyText(double j) {
  if (std::fabs(j) >= 1e6) return Format("%.3f MJ", j / 1e6);
  if (std::fabs(j) >= 1e3) return Format("%.2f kJ", j / 1e3);
  return Format("%.1f J", j);
}

std::string TimeText(double s) {
  if (s >= 1) return Format("%.3f s", s);
  return Format("%.2f ms", s * 1e3);
}

std::string PowerText(double w) {
  if (w >= 1e6) return Format("%.2f MW", w / 1e6);
  if (w >= 1e3) return Format("%.2f kW", w / 1e3);
  return Format("%.0f W", w);
}

std::string Pct(double value) {
  return Format("%+.2f%%", value);
}

std::string NowUtc() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

std::string InstructionLabel(const model::Instruction& in) {
  std::string s(1, in.kind == model::Kind::kForward ? 'F' : 'B');
  s += std::to_string(in.microbatch);
  if (in.chunk > 0) {
    s += '.';
    s += std::to_string(in.chunk);
  }
  return s;
}

struct StageSplit {
  double busy_j = 0;
  double blocked_j = 0;
};

std::vector<StageSplit> SplitByStage(const schedule::ReplayResult& r, double p_block_w) {
  std::vector<StageSplit> out;
  for (const auto& stage : r.timetable) {
    StageSplit s;
    double busy_s = 0;
    for (const schedule::TimedInstruction& t : stage) {
      s.busy_j += t.energy_j;
      busy_s += t.time_s;
    }
    s.blocked_j = p_block_w * std::max(0.0, r.time_s - busy_s);
    out.push_back(s);
  }
  return out;
}

report::TimelineChart Timeline(const std::string& title, const std::string& subtitle,
                               const model::Plan& plan, const schedule::ReplayResult& r,
                               const model::Profile& profile) {
  report::TimelineChart c;
  c.title = title;
  c.subtitle = subtitle;
  c.stages = plan.num_stages;
  c.time_s = r.time_s;
  int lo = 1 << 30, hi = 0;
  for (int s : profile.stages()) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      for (const model::ClockPoint& p : profile.Points(s, kind)) {
        lo = std::min(lo, p.mhz);
        hi = std::max(hi, p.mhz);
      }
    }
  }
  c.min_mhz = hi > 0 ? lo : 0;
  c.max_mhz = hi;
  for (int s = 0; s < static_cast<int>(r.timetable.size()); ++s) {
    for (std::size_t i = 0; i < r.timetable[s].size(); ++i) {
      const schedule::TimedInstruction& t = r.timetable[s][i];
      const model::Instruction& in = plan.stages[s][i].instruction;
      const std::string label = InstructionLabel(in);
      c.bars.push_back({s, t.start_s, t.time_s, t.mhz, label,
                        Format("stage %d %s %s: %d MHz, %s, %s, starts at %s", s,
                               in.kind == model::Kind::kForward ? "forward" : "backward",
                               label.c_str(), t.mhz, TimeText(t.time_s).c_str(),
                               EnergyText(t.energy_j).c_str(), TimeText(t.start_s).c_str())});
    }
  }
  return c;
}

// A frontier point picked for the table and the chart.
struct Pick {
  std::string letter;
  std::string name;
  std::string goal;
  double time_s = 0;
  double energy_j = 0;
  std::string color;
};

// The plan and the all-max-clock baseline, replayed on the profile, and the
// summary's figures they must agree with.
struct Replays {
  double p_block = 0;
  double t0 = 0, e0 = 0;  // the baseline's time and energy, as the summary has them
  int stages = 0;
  schedule::PlanEvaluation plan;
  model::Prediction base;  // the all-max-clock plan's, replayed
  model::Plan base_plan;
  schedule::PlanEvaluation base_replay;
};

Replays Replay(const PlanReportInputs& in) {
  Replays r;
  const json& summary = in.summary;
  const std::string summary_name = in.frontier_dir + "/summary.json";
  r.p_block = OutputNumber(summary, {"inputs", "p_block_w"}, summary_name);
  r.t0 = OutputNumber(summary, {"baseline", "time_s"}, summary_name);
  r.e0 = OutputNumber(summary, {"baseline", "energy_j"}, summary_name);

  schedule::EvaluateRequest request;
  request.p_block_w = r.p_block;
  request.profile_name = in.profile_name;
  request.plan_name = in.plan_name;
  r.plan = schedule::EvaluatePlan(in.profile, in.plan, request);
  const schedule::Schedule sched = schedule::Build(r.plan.spec);
  r.base_plan = schedule::PlanOfClocks(sched, schedule::UniformClocks(sched, in.profile, true));
  request.plan_name = "the all-max-clock plan";
  r.base_replay = schedule::EvaluatePlan(in.profile, r.base_plan, request);
  r.base = {r.base_replay.replay.time_s, r.base_replay.replay.energy_j};
  r.base_plan.predicted = r.base;
  // The frontier must have been planned on this profile and schedule.
  const double t0 = r.t0, e0 = r.e0;
  if (std::fabs(r.base.time_s - t0) > 1e-6 * t0 || std::fabs(r.base.energy_j - e0) > 1e-6 * e0) {
    throw InputError(Format(
        "%s: its baseline (%.6g s, %.6g J) is not what %s gives for the plan's schedule "
        "(%.6g s, %.6g J); give the profile the frontier was planned on as "
        "PlanReportInputs::profile, and a PlanReportInputs::plan of the same schedule",
        summary_name.c_str(), t0, e0, in.profile_name.c_str(), r.base.time_s, r.base.energy_j));
  }
  r.stages = r.plan.spec.stages;
  return r;
}

// The operating points: picked on the frontier, this plan, and the
// simulation's straggler response when there is one.
struct OperatingPoints {
  std::vector<Pick> picks;
  std::optional<Pick> straggler;
  double straggler_target = 0;
};

OperatingPoints PickPoints(const PlanReportInputs& in, const Replays& r) {
  OperatingPoints out;
  const double t0 = r.t0, p_block = r.p_block;
  const int stages = r.stages;
  const schedule::Spec& spec = r.plan.spec;
  std::vector<model::Prediction> frontier;
  for (const PlanReportInputs::Row& row : in.frontier)
    frontier.push_back({row.time_s, row.energy_j});
  if (frontier.empty()) {
    throw InputError(in.frontier_dir + "/frontier.csv: no plans; is it a `joulepipe plan` output?");
  }
  model::Objective gpu_only;
  model::Objective node;
  node.host_power_w = in.host_power_w;
  auto pick = [&](const model::Objective& o, double deadline) {
    return frontier[model::ChooseOperatingPoint(frontier, o, deadline, stages)];
  };
  std::vector<Pick>& picks = out.picks;
  const model::Prediction same = pick(gpu_only, t0);
  picks.push_back({"A", "same time", "least GPU energy at the all-max-clock time", same.time_s,
                   same.energy_j, report::kBlue});
  const model::Prediction slow = pick(gpu_only, in.max_slowdown * t0);
  picks.push_back({"B", Format("%g%% slowdown", 100 * (in.max_slowdown - 1)),
                   Format("least GPU energy within %g x that time", in.max_slowdown), slow.time_s,
                   slow.energy_j, report::kOrange});
  model::Objective least = gpu_only;
  least.goal = model::Goal::kLeastEnergy;
  const model::Prediction least_gpu = pick(least, t0);
  picks.push_back({"C", "least GPU energy", "least GPU energy at any speed", least_gpu.time_s,
                   least_gpu.energy_j, report::kGreen});
  if (in.host_power_w > 0) {
    model::Objective least_node = node;
    least_node.goal = model::Goal::kLeastEnergy;
    const model::Prediction p = pick(least_node, t0);
    picks.push_back({"D", "least node energy",
                     Format("least GPU + host energy (host %g W per GPU)", in.host_power_w),
                     p.time_s, p.energy_j, report::kPurple});
  }
  const schedule::ReplayResult& pr = r.plan.replay;
  picks.push_back({"P", "this plan", in.plan_name, pr.time_s, pr.energy_j, report::kVermillion});

  if (in.sim) {
    const json& sim = *in.sim;
    const std::string& sn = in.sim_name;
    const double sim_stages = OutputNumber(sim, {"inputs", "stages"}, sn);
    const double sim_micro = OutputNumber(sim, {"inputs", "microbatches"}, sn);
    const double sim_pb = OutputNumber(sim, {"inputs", "p_block_w"}, sn);
    if (sim_stages != spec.stages || sim_micro != spec.microbatches ||
        OutputText(sim, "inputs", "schedule", "") != std::string(schedule::KindName(spec.kind)) ||
        std::fabs(sim_pb - p_block) > 0.005 * p_block) {
      throw InputError(Format(
          "PlanReportInputs::sim %s simulated %s with %g stages x %g microbatches at P_block "
          "%g W, not this plan's %s %d x %d at %g W; give a simulation (its JSON) of the "
          "same pipeline",
          sn.c_str(), OutputText(sim, "inputs", "schedule", "?").c_str(), sim_stages, sim_micro,
          sim_pb, std::string(schedule::KindName(spec.kind)).c_str(), spec.stages,
          spec.microbatches, p_block));
    }
    if (OutputNumber(sim, {"inputs", "straggler_slowdown"}, sn) > 1) {
      out.straggler_target = OutputNumber(sim, {"plans", "straggler_response", "target_s"}, sn);
      out.straggler = Pick{"S",
                           Format("straggler response (T' = %.3g T)",
                                  OutputNumber(sim, {"inputs", "straggler_slowdown"}, sn)),
                           "least energy within the straggler's time T'",
                           OutputNumber(sim, {"plans", "straggler_response", "time_s"}, sn),
                           OutputNumber(sim, {"plans", "straggler_response", "energy_j"}, sn),
                           report::kSky};
    }
  }

  return out;
}

report::LineChart FrontierChart(const PlanReportInputs& in, const Replays& r,
                                const OperatingPoints& points) {
  const double t0 = r.t0, e0 = r.e0;
  const schedule::Spec& spec = r.plan.spec;
  const bool mega = e0 >= 1e7;
  const double scale = mega ? 1e-6 : 1e-3;
  report::LineChart chart;
  chart.title = "Iteration time-energy frontier";
  chart.width = 1000;
  chart.subtitle = ShapeText(spec) + ", " + in.profile_name + ", P_block " +
                   Format("%g W", r.p_block) + "; GPU energy, simulated from the profile";
  chart.x_label = "iteration time (s)";
  chart.y_label = mega ? "GPU energy per iteration (MJ)" : "GPU energy per iteration (kJ)";
  report::Series plans{"frontier plans (hover for figures)", {}, report::kBlue, false, false, {}};
  for (const PlanReportInputs::Row& row : in.frontier) {
    plans.points.push_back({row.time_s, row.energy_j * scale});
    plans.titles.push_back(Format("%s, %s GPU energy (%+.2f%% time, %.2f%% saving)",
                                  TimeText(row.time_s).c_str(), EnergyText(row.energy_j).c_str(),
                                  SlowdownPercent(row.time_s, t0),
                                  SavingPercent(row.energy_j, e0)));
  }
  chart.series.push_back(std::move(plans));
  chart.markers.push_back({"max clock",
                           {t0, e0 * scale},
                           "#000000",
                           Format("every instruction at its highest clock: %s, %s",
                                  TimeText(t0).c_str(), EnergyText(e0).c_str())});
  auto marker = [&](const Pick& p) {
    chart.markers.push_back({p.letter,
                             {p.time_s, p.energy_j * scale},
                             p.color,
                             p.letter + ": " + p.name + ", " + TimeText(p.time_s) + ", " +
                                 EnergyText(p.energy_j) +
                                 Format(" (%.2f%% saving)", SavingPercent(p.energy_j, e0))});
  };
  for (const Pick& p : points.picks) marker(p);
  if (points.straggler) {
    marker(*points.straggler);
    chart.vertical_lines.push_back({"T' (straggler)", points.straggler_target, report::kSky});
  }

  return chart;
}

report::HtmlTable PointsTable(const PlanReportInputs& in, const Replays& r,
                              const OperatingPoints& points) {
  const double t0 = r.t0, e0 = r.e0;
  const int stages = r.stages;
  model::Objective node;
  node.host_power_w = in.host_power_w;
  report::HtmlTable table;
  table.caption = "Operating points on the frontier (one pipeline, one GPU per stage)";
  table.header = {"",           "point",     "goal", "iteration time", "vs max clock",
                  "GPU energy", "GPU saving"};
  if (in.host_power_w > 0) {
    table.header.push_back("GPU + host energy");
    table.header.push_back("node saving");
  }
  // What the power counts: the pipeline's GPUs, and their hosts when a host
  // power is given (one header for both read as the same figure).
  table.header.push_back(in.host_power_w > 0 ? "average power, GPU + host" : "average power, GPU");
  table.numeric_columns = {3, 4, 5, 6, 7, 8, 9};
  auto point_row = [&](const Pick& p) {
    std::vector<std::string> row = {p.letter,
                                    p.name,
                                    p.goal,
                                    TimeText(p.time_s),
                                    Pct(SlowdownPercent(p.time_s, t0)),
                                    EnergyText(p.energy_j),
                                    Format("%.2f%%", SavingPercent(p.energy_j, e0))};
    const double counted = model::CountedEnergyJ(p.time_s, p.energy_j, node, stages);
    if (in.host_power_w > 0) {
      const double counted0 = model::CountedEnergyJ(t0, e0, node, stages);
      row.push_back(EnergyText(counted));
      row.push_back(Format("%.2f%%", SavingPercent(counted, counted0)));
    }
    row.push_back(PowerText(counted / p.time_s));
    table.rows.push_back(row);
  };
  point_row(
      {"-", "all max clock", "every instruction at its highest clock (baseline)", t0, e0, ""});
  for (const Pick& p : points.picks) point_row(p);
  if (points.straggler) point_row(*points.straggler);

  return table;
}

// Each stage's energy, busy and blocked, at all max clocks and in the plan:
// a bar chart and a table.
struct StageEnergy {
  report::BarChart bars;
  report::HtmlTable table;
};

StageEnergy StageEnergyOf(const Replays& r) {
  StageEnergy out;
  report::BarChart& bars = out.bars;
  report::HtmlTable& stage_table = out.table;
  const std::vector<StageSplit> split_plan = SplitByStage(r.plan.replay, r.p_block);
  const std::vector<StageSplit> split_base = SplitByStage(r.base_replay.replay, r.p_block);
  bars.title = "Energy per stage: busy and blocked";
  bars.subtitle = "one GPU per stage, one iteration; blocked = P_block x waiting time";
  bars.y_label = "GPU energy per iteration (kJ)";
  bars.series = {"all max clock", "this plan"};
  bars.series_colors = {report::kGrey, report::kVermillion};
  bars.segments = {"busy", "blocked"};
  bars.unit = "kJ";
  stage_table.caption = "Energy per stage (one GPU of each stage)";
  stage_table.header = {"stage",      "busy, max clock", "blocked, max clock",
                        "busy, plan", "blocked, plan",   "saving"};
  stage_table.numeric_columns = {1, 2, 3, 4, 5};
  for (int s = 0; s < r.stages; ++s) {
    bars.categories.push_back("stage " + std::to_string(s));
    bars.values.push_back({{split_base[s].busy_j / 1e3, split_base[s].blocked_j / 1e3},
                           {split_plan[s].busy_j / 1e3, split_plan[s].blocked_j / 1e3}});
    const double b = split_base[s].busy_j + split_base[s].blocked_j;
    const double p = split_plan[s].busy_j + split_plan[s].blocked_j;
    stage_table.rows.push_back(
        {std::to_string(s), EnergyText(split_base[s].busy_j), EnergyText(split_base[s].blocked_j),
         EnergyText(split_plan[s].busy_j), EnergyText(split_plan[s].blocked_j),
         Format("%.2f%%", SavingPercent(p, b))});
  }

  return out;
}

// What the plan saves, for one pipeline and, with a simulation, the whole
// job; `sim_paragraphs` describes the simulation.
report::HtmlTable SavingsTable(const PlanReportInputs& in, const Replays& r,
                               std::vector<std::string>& sim_paragraphs) {
  const double t0 = r.t0, e0 = r.e0;
  const schedule::ReplayResult& pr = r.plan.replay;
  report::HtmlTable savings;
  savings.caption = "Savings";
  savings.header = {"what", "policy", "iteration time", "energy per iteration", "saving"};
  savings.numeric_columns = {2, 3, 4};
  savings.rows.push_back(
      {"one pipeline (profile)", "all max clock", TimeText(t0), EnergyText(e0), ""});
  savings.rows.push_back({"one pipeline (profile)", "this plan", TimeText(pr.time_s),
                          EnergyText(pr.energy_j),
                          Format("%.2f%%", SavingPercent(pr.energy_j, e0))});
  if (in.sim) {
    const json& sim = *in.sim;
    const std::string& sn = in.sim_name;
    const double gpus = OutputNumber(sim, {"gpus"}, sn);
    const double tb = OutputNumber(sim, {"baseline", "time_s"}, sn);
    const double eb = OutputNumber(sim, {"baseline", "energy_j"}, sn);
    const double tj = OutputNumber(sim, {"joulepipe", "time_s"}, sn);
    const double ej = OutputNumber(sim, {"joulepipe", "energy_j"}, sn);
    const std::string what = Format("whole job, %.0f GPUs (simulated)", gpus);
    savings.rows.push_back({what, "baseline", TimeText(tb), EnergyText(eb), ""});
    savings.rows.push_back(
        {what, "joulepipe", TimeText(tj), EnergyText(ej), Format("%.2f%%", SavingPercent(ej, eb))});
    sim_paragraphs.push_back(Format(
        "The simulated job (%s): %.0f pipelines x TP %.0f, %.0f iterations, straggler T'/T = %g; "
        "mean per iteration over the run.",
        sn.c_str(), OutputNumber(sim, {"inputs", "pipelines"}, sn),
        OutputNumber(sim, {"inputs", "tp"}, sn), OutputNumber(sim, {"inputs", "iterations"}, sn),
        OutputNumber(sim, {"inputs", "straggler_slowdown"}, sn)));
  }
  return savings;
}

// The measured window (`--measure`), when there is one.
std::optional<report::HtmlTable> MeasuredTable(const PlanReportInputs& in) {
  if (!in.measure) return std::nullopt;
  {
    const json& m = *in.measure;
    report::HtmlTable t;
    t.caption = "Measured window (" + in.measure_name + ")";
    t.header = {"figure", "value"};
    t.numeric_columns = {1};
    auto energy = [&](const char* key) {
      return m.contains(key) && m[key].is_number() ? EnergyText(m[key].get<double>())
                                                   : std::string("not measured");
    };
    t.rows.push_back({"command", m.value("command", std::string("?"))});
    t.rows.push_back({"duration", TimeText(OutputNumber(m, {"duration_s"}, in.measure_name))});
    t.rows.push_back({"GPU energy", energy("gpu_energy_j")});
    t.rows.push_back({"CPU energy", energy("cpu_energy_j")});
    t.rows.push_back({"DRAM energy", energy("dram_energy_j")});
    t.rows.push_back({"total", energy("total_energy_j")});
    if (m.contains("avg_power_w") && m["avg_power_w"].is_number()) {
      t.rows.push_back({"average power", PowerText(m["avg_power_w"].get<double>())});
    }
    t.rows.push_back({"scope", m.value("scope", std::string("?"))});
    t.rows.push_back(
        {"simulated GPUs", m.value("simulated", false) ? "yes (simulated NVML)" : "no"});
    return t;
  }
}

}  // namespace

std::string RenderPlanReport(const PlanReportInputs& in) {
  const Replays r = Replay(in);
  const json& summary = in.summary;
  const std::string summary_name = in.frontier_dir + "/summary.json";
  const schedule::Spec& spec = r.plan.spec;
  const schedule::ReplayResult& pr = r.plan.replay;
  const double t0 = r.t0, e0 = r.e0, p_block = r.p_block;
  const OperatingPoints points = PickPoints(in, r);
  const StageEnergy stage_energy = StageEnergyOf(r);
  std::vector<std::string> sim_paragraphs;
  const report::HtmlTable savings = SavingsTable(in, r, sim_paragraphs);
  const std::optional<report::HtmlTable> measured = MeasuredTable(in);

  // ---- The page ----------------------------------------------------------------------
  report::HtmlPage page;
  page.title = "joulepipe report: " + ShapeText(spec);
  page.subtitle =
      Format("%s saves %.2f%% GPU energy at %+.2f%% iteration time, ", in.plan_name.c_str(),
             SavingPercent(pr.energy_j, e0), SlowdownPercent(pr.time_s, t0)) +
      "against every instruction at its highest clock.";
  const model::ProfileMetadata& meta = in.profile.metadata;
  const std::string source = meta.source.empty() ? "imported (the CSV has no metadata: e.g. a "
                                                   "Perseus/Zeus profile)"
                                                 : meta.source;
  page.methodology = {
      {"Figures",
       "simulated: each instruction's time and energy from the profile, combined by the "
       "schedule; a stage's energy is its instructions' energy plus P_block x its "
       "waiting time (joulepipe's one energy rule). Nothing here was measured on a "
       "GPU" +
           std::string(in.measure ? ", except the measured window below." : ".")},
      {"Energy covers",
       in.host_power_w > 0 ? Format("GPU only, and GPU + host where marked (host %g W per GPU, %s)",
                                    in.host_power_w, in.host_power_source.c_str())
                           : std::string("GPU only (no host power was given, measured or "
                                         "assumed)")},
      {"Profile",
       in.profile_name + "; source: " + source + (meta.date.empty() ? "" : "; made " + meta.date) +
           (meta.gpu.empty() ? "" : "; GPU " + meta.gpu) +
           (meta.joulepipe_version.empty() ? "" : "; by joulepipe " + meta.joulepipe_version)},
      {"P_block",
       Format("%g W (%s)", p_block,
              OutputText(summary, "inputs", "p_block_from", "the plan's summary").c_str())},
      {"Frontier",
       Format("%s: %zu plans written of %.0f computed", in.frontier_dir.c_str(), in.frontier.size(),
              OutputNumber(summary, {"frontier", "points"}, summary_name))},
      {"joulepipe", std::string(model::Version()) + ", report made " + NowUtc()},
  };
  if (in.measure) {
    page.methodology.push_back(
        {"Measured window",
         in.measure_name + ": " + in.measure->value("methodology", std::string(""))});
  }

  report::HtmlSection s1;
  s1.id = "frontier";
  s1.heading = "Frontier and operating points";
  s1.paragraphs.push_back(
      "Every point is a plan: one SM clock per forward and backward. Lower-right is slower and "
      "uses less energy. The letters are the operating points in the table below; hover a point "
      "for its figures.");
  s1.svgs.push_back(report::RenderSvg(FrontierChart(in, r, points)));
  s1.tables.push_back(PointsTable(in, r, points));

  report::HtmlSection s2;
  s2.id = "timeline";
  s2.heading = "Pipeline timeline";
  s2.paragraphs.push_back(
      "One iteration, stage by stage. Each bar is a forward (F) or backward (B) of a microbatch, "
      "coloured by its SM clock (dark = low, yellow = high); hatched is time the stage waits. "
      "Off the critical path the plan runs slower clocks and fills waiting time.");
  s2.svgs.push_back(report::RenderTimelineSvg(
      Timeline("This plan: " + in.plan_name,
               Format("%s, %s", TimeText(pr.time_s).c_str(), EnergyText(pr.energy_j).c_str()),
               in.plan, pr, in.profile)));
  s2.svgs.push_back(report::RenderTimelineSvg(Timeline(
      "Baseline: every instruction at its highest clock",
      Format("%s, %s", TimeText(r.base.time_s).c_str(), EnergyText(r.base.energy_j).c_str()),
      r.base_plan, r.base_replay.replay, in.profile)));

  report::HtmlSection s3;
  s3.id = "energy";
  s3.heading = "Energy per stage";
  s3.svgs.push_back(report::RenderBarSvg(stage_energy.bars));
  s3.tables.push_back(stage_energy.table);

  report::HtmlSection s4;
  s4.id = "savings";
  s4.heading = "Savings";
  s4.paragraphs = sim_paragraphs;
  s4.tables.push_back(savings);
  if (measured) s4.tables.push_back(*measured);

  page.sections = {s1, s2, s3, s4};
  if (std::optional<report::HtmlSection> grid = GridSection(in)) page.sections.push_back(*grid);
  page.footer = "Made by joulepipe " + std::string(model::Version()) +
                " (joulepipe report). Self-contained: no scripts, fonts or images from "
                "elsewhere.";
  return report::RenderHtml(page);
}

}  // namespace joulepipe::report
