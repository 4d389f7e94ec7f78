// `joulepipe report`: reads a plan output directory (and optionally a
// simulation and a measurement), replays the plan and the all-max-clock
// baseline on the profile for the timeline and the per-stage energy, picks
// the operating points on the frontier, and writes one HTML file.
#include "report_command.hpp"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/output_files.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/report/bar_chart.hpp"
#include "joulepipe/report/html_page.hpp"
#include "joulepipe/report/line_chart.hpp"
#include "joulepipe/report/palette.hpp"
#include "joulepipe/report/timeline_chart.hpp"
#include "joulepipe/schedule/evaluate_plan.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/operating_point.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;
using nlohmann::json;

constexpr std::size_t kMaxInputBytes = 256u << 20;  // a plan directory's files, a run's JSON

std::string ReadText(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(flag + " " + path + ": cannot be read (no such file, or no access)");
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (s.size() > kMaxInputBytes) {
    throw InputError(flag + " " + path + ": larger than 256 MiB; not a joulepipe output");
  }
  return s;
}

double Number(const json& doc, std::initializer_list<const char*> keys, const std::string& where) {
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

std::string Text(const json& doc, const char* a, const char* b, const std::string& fallback) {
  if (doc.is_object() && doc.contains(a) && doc[a].is_object() && doc[a].contains(b) &&
      doc[a][b].is_string()) {
    return doc[a][b].get<std::string>();
  }
  return fallback;
}

std::string EnergyText(double j) {
  if (std::fabs(j) >= 1e6) return Printf("%.3f MJ", j / 1e6);
  if (std::fabs(j) >= 1e3) return Printf("%.2f kJ", j / 1e3);
  return Printf("%.1f J", j);
}

std::string TimeText(double s) {
  if (s >= 1) return Printf("%.3f s", s);
  return Printf("%.2f ms", s * 1e3);
}

std::string PowerText(double w) {
  if (w >= 1e6) return Printf("%.2f MW", w / 1e6);
  if (w >= 1e3) return Printf("%.2f kW", w / 1e3);
  return Printf("%.0f W", w);
}

std::string Pct(double value) {
  return Printf("%+.2f%%", value);
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
  std::string s = (in.kind == model::Kind::kForward ? "F" : "B") + std::to_string(in.microbatch);
  if (in.chunk > 0) s += "." + std::to_string(in.chunk);
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
                        Printf("stage %d %s %s: %d MHz, %s, %s, starts at %s", s,
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

}  // namespace

std::string RenderReport(const ReportInputs& in) {
  const json& summary = in.summary;
  const std::string summary_name = in.frontier_dir + "/summary.json";
  const double p_block = Number(summary, {"inputs", "p_block_w"}, summary_name);
  const double t0 = Number(summary, {"baseline", "time_s"}, summary_name);
  const double e0 = Number(summary, {"baseline", "energy_j"}, summary_name);

  schedule::EvaluateRequest request;
  request.p_block_w = p_block;
  request.profile_name = in.profile_name;
  request.plan_name = in.plan_name;
  const schedule::PlanEvaluation plan_eval = schedule::EvaluatePlan(in.profile, in.plan, request);
  const schedule::Spec& spec = plan_eval.spec;
  const schedule::Schedule sched = schedule::Build(spec);
  const std::vector<std::uint16_t> max_mhz = solver::UniformClocks(sched, in.profile, true);
  const solver::Evaluation base = solver::EvaluateClocks(sched, in.profile, p_block, max_mhz);
  const model::Plan base_plan = solver::ToPlan(sched, {base.time_s, base.energy_j, max_mhz});
  request.plan_name = "the all-max-clock plan";
  const schedule::PlanEvaluation base_eval = schedule::EvaluatePlan(in.profile, base_plan, request);
  // The frontier must have been planned on this profile and schedule.
  if (std::fabs(base.time_s - t0) > 1e-6 * t0 || std::fabs(base.energy_j - e0) > 1e-6 * e0) {
    throw InputError(Printf(
        "%s: its baseline (%.6g s, %.6g J) is not what %s gives for the plan's schedule "
        "(%.6g s, %.6g J); give the profile the frontier was planned on with --profile, and a "
        "--plan of the same schedule",
        summary_name.c_str(), t0, e0, in.profile_name.c_str(), base.time_s, base.energy_j));
  }
  const int stages = spec.stages;

  // ---- Operating points ----------------------------------------------------------
  solver::Frontier frontier;
  for (const ReportInputs::Row& r : in.frontier)
    frontier.points.push_back({r.time_s, r.energy_j, {}});
  if (frontier.points.empty()) {
    throw InputError(in.frontier_dir + "/frontier.csv: no plans; is it a `joulepipe plan` output?");
  }
  solver::Objective gpu_only;
  solver::Objective node;
  node.host_power_w = in.host_power_w;
  auto pick = [&](const solver::Objective& o, double deadline) {
    const std::size_t i = solver::ChooseOperatingPoint(frontier, o, deadline, stages);
    return frontier.points[i];
  };
  std::vector<Pick> picks;
  const solver::FrontierPoint same = pick(gpu_only, t0);
  picks.push_back({"A", "same time", "least GPU energy at the all-max-clock time", same.time_s,
                   same.energy_j, report::kBlue});
  const solver::FrontierPoint slow = pick(gpu_only, in.max_slowdown * t0);
  picks.push_back({"B", Printf("%g%% slowdown", 100 * (in.max_slowdown - 1)),
                   Printf("least GPU energy within %g x that time", in.max_slowdown), slow.time_s,
                   slow.energy_j, report::kOrange});
  solver::Objective least = gpu_only;
  least.goal = solver::Goal::kLeastEnergy;
  const solver::FrontierPoint least_gpu = pick(least, t0);
  picks.push_back({"C", "least GPU energy", "least GPU energy at any speed", least_gpu.time_s,
                   least_gpu.energy_j, report::kGreen});
  if (in.host_power_w > 0) {
    solver::Objective least_node = node;
    least_node.goal = solver::Goal::kLeastEnergy;
    const solver::FrontierPoint p = pick(least_node, t0);
    picks.push_back({"D", "least node energy",
                     Printf("least GPU + host energy (host %g W per GPU)", in.host_power_w),
                     p.time_s, p.energy_j, report::kPurple});
  }
  const schedule::ReplayResult& pr = plan_eval.replay;
  picks.push_back({"P", "this plan", in.plan_name, pr.time_s, pr.energy_j, report::kVermillion});

  std::optional<Pick> straggler;
  double straggler_target = 0;
  if (in.sim) {
    const json& sim = *in.sim;
    const std::string& sn = in.sim_name;
    const double sim_stages = Number(sim, {"inputs", "stages"}, sn);
    const double sim_micro = Number(sim, {"inputs", "microbatches"}, sn);
    const double sim_pb = Number(sim, {"inputs", "p_block_w"}, sn);
    if (sim_stages != spec.stages || sim_micro != spec.microbatches ||
        Text(sim, "inputs", "schedule", "") != std::string(schedule::KindName(spec.kind)) ||
        std::fabs(sim_pb - p_block) > 0.005 * p_block) {
      throw InputError(
          Printf("--sim %s simulated %s with %g stages x %g microbatches at P_block %g W, not this "
                 "plan's %s %d x %d at %g W; give a `simulate --json` run of the same pipeline",
                 sn.c_str(), Text(sim, "inputs", "schedule", "?").c_str(), sim_stages, sim_micro,
                 sim_pb, std::string(schedule::KindName(spec.kind)).c_str(), spec.stages,
                 spec.microbatches, p_block));
    }
    if (Number(sim, {"inputs", "straggler_slowdown"}, sn) > 1) {
      straggler_target = Number(sim, {"plans", "straggler_response", "target_s"}, sn);
      straggler = Pick{"S",
                       Printf("straggler response (T' = %.3g T)",
                              Number(sim, {"inputs", "straggler_slowdown"}, sn)),
                       "least energy within the straggler's time T'",
                       Number(sim, {"plans", "straggler_response", "time_s"}, sn),
                       Number(sim, {"plans", "straggler_response", "energy_j"}, sn),
                       report::kSky};
    }
  }

  // ---- The frontier chart ----------------------------------------------------------
  const bool mega = e0 >= 1e7;
  const double scale = mega ? 1e-6 : 1e-3;
  report::LineChart chart;
  chart.title = "Iteration time-energy frontier";
  chart.width = 1000;
  chart.subtitle = ShapeText(spec) + ", " + in.profile_name + ", P_block " +
                   Printf("%g W", p_block) + "; GPU energy, simulated from the profile";
  chart.x_label = "iteration time (s)";
  chart.y_label = mega ? "GPU energy per iteration (MJ)" : "GPU energy per iteration (kJ)";
  report::Series plans{"frontier plans (hover for figures)", {}, report::kBlue, false, false, {}};
  for (const ReportInputs::Row& r : in.frontier) {
    plans.points.push_back({r.time_s, r.energy_j * scale});
    plans.titles.push_back(Printf("%s, %s GPU energy (%+.2f%% time, %.2f%% saving)",
                                  TimeText(r.time_s).c_str(), EnergyText(r.energy_j).c_str(),
                                  SlowdownPercent(r.time_s, t0), SavingPercent(r.energy_j, e0)));
  }
  chart.series.push_back(std::move(plans));
  chart.markers.push_back({"max clock",
                           {t0, e0 * scale},
                           "#000000",
                           Printf("every instruction at its highest clock: %s, %s",
                                  TimeText(t0).c_str(), EnergyText(e0).c_str())});
  auto marker = [&](const Pick& p) {
    chart.markers.push_back({p.letter,
                             {p.time_s, p.energy_j * scale},
                             p.color,
                             p.letter + ": " + p.name + ", " + TimeText(p.time_s) + ", " +
                                 EnergyText(p.energy_j) +
                                 Printf(" (%.2f%% saving)", SavingPercent(p.energy_j, e0))});
  };
  for (const Pick& p : picks) marker(p);
  if (straggler) {
    marker(*straggler);
    chart.vertical_lines.push_back({"T' (straggler)", straggler_target, report::kSky});
  }

  // ---- Tables ------------------------------------------------------------------------
  report::HtmlTable points;
  points.caption = "Operating points on the frontier (one pipeline, one GPU per stage)";
  points.header = {"",           "point",     "goal", "iteration time", "vs max clock",
                   "GPU energy", "GPU saving"};
  if (in.host_power_w > 0) {
    points.header.push_back("GPU + host energy");
    points.header.push_back("node saving");
  }
  points.header.push_back("average power");
  points.numeric_columns = {3, 4, 5, 6, 7, 8, 9};
  auto point_row = [&](const Pick& p) {
    std::vector<std::string> row = {p.letter,
                                    p.name,
                                    p.goal,
                                    TimeText(p.time_s),
                                    Pct(SlowdownPercent(p.time_s, t0)),
                                    EnergyText(p.energy_j),
                                    Printf("%.2f%%", SavingPercent(p.energy_j, e0))};
    const double counted = solver::CountedEnergyJ(p.time_s, p.energy_j, node, stages);
    if (in.host_power_w > 0) {
      const double counted0 = solver::CountedEnergyJ(t0, e0, node, stages);
      row.push_back(EnergyText(counted));
      row.push_back(Printf("%.2f%%", SavingPercent(counted, counted0)));
    }
    row.push_back(PowerText(counted / p.time_s));
    points.rows.push_back(row);
  };
  point_row(
      {"-", "all max clock", "every instruction at its highest clock (baseline)", t0, e0, ""});
  for (const Pick& p : picks) point_row(p);
  if (straggler) point_row(*straggler);

  const std::vector<StageSplit> split_plan = SplitByStage(pr, p_block);
  const std::vector<StageSplit> split_base = SplitByStage(base_eval.replay, p_block);
  report::BarChart bars;
  bars.title = "Energy per stage: busy and blocked";
  bars.subtitle = "one GPU per stage, one iteration; blocked = P_block x waiting time";
  bars.y_label = "GPU energy per iteration (kJ)";
  bars.series = {"all max clock", "this plan"};
  bars.series_colors = {report::kGrey, report::kVermillion};
  bars.segments = {"busy", "blocked"};
  bars.unit = "kJ";
  report::HtmlTable stage_table;
  stage_table.caption = "Energy per stage (one GPU of each stage)";
  stage_table.header = {"stage",      "busy, max clock", "blocked, max clock",
                        "busy, plan", "blocked, plan",   "saving"};
  stage_table.numeric_columns = {1, 2, 3, 4, 5};
  for (int s = 0; s < stages; ++s) {
    bars.categories.push_back("stage " + std::to_string(s));
    bars.values.push_back({{split_base[s].busy_j / 1e3, split_base[s].blocked_j / 1e3},
                           {split_plan[s].busy_j / 1e3, split_plan[s].blocked_j / 1e3}});
    const double b = split_base[s].busy_j + split_base[s].blocked_j;
    const double p = split_plan[s].busy_j + split_plan[s].blocked_j;
    stage_table.rows.push_back(
        {std::to_string(s), EnergyText(split_base[s].busy_j), EnergyText(split_base[s].blocked_j),
         EnergyText(split_plan[s].busy_j), EnergyText(split_plan[s].blocked_j),
         Printf("%.2f%%", SavingPercent(p, b))});
  }

  report::HtmlTable savings;
  savings.caption = "Savings";
  savings.header = {"what", "policy", "iteration time", "energy per iteration", "saving"};
  savings.numeric_columns = {2, 3, 4};
  savings.rows.push_back(
      {"one pipeline (profile)", "all max clock", TimeText(t0), EnergyText(e0), ""});
  savings.rows.push_back({"one pipeline (profile)", "this plan", TimeText(pr.time_s),
                          EnergyText(pr.energy_j),
                          Printf("%.2f%%", SavingPercent(pr.energy_j, e0))});
  std::vector<std::string> sim_paragraphs;
  if (in.sim) {
    const json& sim = *in.sim;
    const std::string& sn = in.sim_name;
    const double gpus = Number(sim, {"gpus"}, sn);
    const double tb = Number(sim, {"baseline", "time_s"}, sn);
    const double eb = Number(sim, {"baseline", "energy_j"}, sn);
    const double tj = Number(sim, {"joulepipe", "time_s"}, sn);
    const double ej = Number(sim, {"joulepipe", "energy_j"}, sn);
    const std::string what = Printf("whole job, %.0f GPUs (simulated)", gpus);
    savings.rows.push_back({what, "baseline", TimeText(tb), EnergyText(eb), ""});
    savings.rows.push_back(
        {what, "joulepipe", TimeText(tj), EnergyText(ej), Printf("%.2f%%", SavingPercent(ej, eb))});
    sim_paragraphs.push_back(Printf(
        "The simulated job (%s): %.0f pipelines x TP %.0f, %.0f iterations, straggler T'/T = %g; "
        "mean per iteration over the run.",
        sn.c_str(), Number(sim, {"inputs", "pipelines"}, sn), Number(sim, {"inputs", "tp"}, sn),
        Number(sim, {"inputs", "iterations"}, sn),
        Number(sim, {"inputs", "straggler_slowdown"}, sn)));
  }
  std::optional<report::HtmlTable> measured;
  if (in.measure) {
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
    t.rows.push_back({"duration", TimeText(Number(m, {"duration_s"}, in.measure_name))});
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
    measured = t;
  }

  // ---- The page ----------------------------------------------------------------------
  report::HtmlPage page;
  page.title = "joulepipe report: " + ShapeText(spec);
  page.subtitle =
      Printf("%s saves %.2f%% GPU energy at %+.2f%% iteration time, ", in.plan_name.c_str(),
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
       in.host_power_w > 0 ? Printf("GPU only, and GPU + host where marked (host %g W per GPU, %s)",
                                    in.host_power_w, in.host_power_source.c_str())
                           : std::string("GPU only (no host power given: --host-power or "
                                         "--measure with --cpu)")},
      {"Profile",
       in.profile_name + "; source: " + source + (meta.date.empty() ? "" : "; made " + meta.date) +
           (meta.gpu.empty() ? "" : "; GPU " + meta.gpu) +
           (meta.joulepipe_version.empty() ? "" : "; by joulepipe " + meta.joulepipe_version)},
      {"P_block", Printf("%g W (%s)", p_block,
                         Text(summary, "inputs", "p_block_from", "the plan's summary").c_str())},
      {"Frontier",
       Printf("%s: %zu plans written of %.0f computed", in.frontier_dir.c_str(), in.frontier.size(),
              Number(summary, {"frontier", "points"}, summary_name))},
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
  s1.svgs.push_back(report::RenderSvg(chart));
  s1.tables.push_back(points);

  report::HtmlSection s2;
  s2.id = "timeline";
  s2.heading = "Pipeline timeline";
  s2.paragraphs.push_back(
      "One iteration, stage by stage. Each bar is a forward (F) or backward (B) of a microbatch, "
      "coloured by its SM clock (dark = low, yellow = high); hatched is time the stage waits. "
      "Off the critical path the plan runs slower clocks and fills waiting time.");
  s2.svgs.push_back(report::RenderTimelineSvg(
      Timeline("This plan: " + in.plan_name,
               Printf("%s, %s", TimeText(pr.time_s).c_str(), EnergyText(pr.energy_j).c_str()),
               in.plan, pr, in.profile)));
  s2.svgs.push_back(report::RenderTimelineSvg(
      Timeline("Baseline: every instruction at its highest clock",
               Printf("%s, %s", TimeText(base.time_s).c_str(), EnergyText(base.energy_j).c_str()),
               base_plan, base_eval.replay, in.profile)));

  report::HtmlSection s3;
  s3.id = "energy";
  s3.heading = "Energy per stage";
  s3.svgs.push_back(report::RenderBarSvg(bars));
  s3.tables.push_back(stage_table);

  report::HtmlSection s4;
  s4.id = "savings";
  s4.heading = "Savings";
  s4.paragraphs = sim_paragraphs;
  s4.tables.push_back(savings);
  if (measured) s4.tables.push_back(*measured);

  page.sections = {s1, s2, s3, s4};
  page.footer = "Made by joulepipe " + std::string(model::Version()) +
                " (joulepipe report). Self-contained: no scripts, fonts or images from "
                "elsewhere.";
  return report::RenderHtml(page);
}

// ---- The subcommand ------------------------------------------------------------

namespace {

constexpr char kReportFooter[] =
    "\nWrites one self-contained HTML file (inline SVG and CSS, no scripts, nothing\n"
    "fetched; opens offline and prints) from a `joulepipe plan --out DIR` directory:\n"
    "  - the frontier with the operating points (same time, --max-slowdown, least\n"
    "    GPU energy, least node energy with a host power, the plan), the baseline\n"
    "    and, with --sim, the straggler response;\n"
    "  - the pipeline timeline of the plan and of the baseline, each forward and\n"
    "    backward coloured by its clock, waiting time hatched;\n"
    "  - energy per stage, busy and blocked; a savings table; a methodology box.\n"
    "The plan and the baseline are replayed on the profile (summary.json names it;\n"
    "--profile when it has moved). Host power for the node-energy point: --host-power,\n"
    "else the CPU + DRAM power of a --measure window taken with --cpu, else the\n"
    "plan's --host-power. An existing --out file is kept unless --force.\n"
    "\n"
    "Example:\n"
    "  joulepipe plan --profile data/profiles/gpt3-175b+a100_sxm_bf16.csv --schedule 1f1b \\\n"
    "      --stages 8 --microbatches 96 --p-block 83.64 --out plan-out\n"
    "  joulepipe simulate --profile data/profiles/gpt3-175b+a100_sxm_bf16.csv --p-block 83.64 \\\n"
    "      --pipelines 16 --stages 8 --microbatches 96 --tp 8 --straggler-slowdown 1.2 \\\n"
    "      --iterations 2 --json > run.json\n"
    "  joulepipe report --frontier plan-out --sim run.json --host-power 150 --out report.html";

}  // namespace

struct ReportFlags {
  std::string frontier;
  std::string plan;
  std::string profile;
  std::string sim;
  std::string measure;
  double host_power_w = 0;
  CLI::Option* host_power_option = nullptr;
  double max_slowdown = 1.05;
  std::string out;
  bool force = false;
};

ReportSubcommand::ReportSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand("report", "Write a self-contained HTML report of a plan")),
      flags_(std::make_unique<ReportFlags>()) {
  ReportFlags* f = flags_.get();
  CLI::App* c = command();
  c->add_option("--frontier", f->frontier, "A `joulepipe plan --out` directory")
      ->required()
      ->type_name("DIR");
  c->add_option("--plan", f->plan, "The plan to show (default: DIR/chosen.json)")
      ->type_name("P.json");
  c->add_option("--profile", f->profile,
                "The profile the frontier was planned on (default: the one summary.json names)")
      ->type_name("P.csv");
  c->add_option("--sim", f->sim, "A `joulepipe simulate --json` run of the same pipeline")
      ->type_name("RUN.json");
  c->add_option("--measure", f->measure, "A `joulepipe measure --json` window")
      ->type_name("M.json");
  f->host_power_option =
      c->add_option("--host-power", f->host_power_w,
                    "Host power per GPU (CPU, DRAM, NIC), W, for the least-node-energy point")
          ->type_name("WATTS");
  c->add_option("--max-slowdown", f->max_slowdown, "The slowdown-budget point's factor")
      ->capture_default_str()
      ->type_name("FACTOR");
  c->add_option("--out", f->out, "The HTML file to write")->required()->type_name("FILE");
  c->add_flag("--force", f->force, "Replace --out if it exists");
  c->footer(kReportFooter);
}

ReportSubcommand::~ReportSubcommand() = default;

int ReportSubcommand::Run() const {
  const ReportFlags& f = *flags_;
  struct stat st {};
  if (!f.force && ::stat(f.out.c_str(), &st) == 0) {
    throw InputError("--out " + f.out +
                     " exists; pass --force to replace it, or choose another "
                     "file");
  }
  if (!(f.max_slowdown >= 1 && f.max_slowdown <= 100)) {
    throw InputError(Printf("--max-slowdown must be a factor 1..100 (got %g)", f.max_slowdown));
  }
  ReportInputs in;
  in.frontier_dir = f.frontier;
  in.max_slowdown = f.max_slowdown;
  const std::string summary_path = f.frontier + "/summary.json";
  in.summary = model::ParseJsonBounded(ReadText(summary_path, "--frontier"), summary_path);
  {
    const std::string csv_path = f.frontier + "/frontier.csv";
    std::istringstream csv(ReadText(csv_path, "--frontier"));
    std::string line;
    std::getline(csv, line);
    if (line.rfind("time_s,energy_j", 0) != 0) {
      throw InputError(csv_path +
                       ": the header is not time_s,energy_j,plan_file; is it a "
                       "`joulepipe plan` output?");
    }
    int number = 1;
    while (std::getline(csv, line)) {
      ++number;
      if (line.empty()) continue;
      double t = 0, e = 0;
      if (std::sscanf(line.c_str(), "%lf,%lf", &t, &e) != 2 || !std::isfinite(t) ||
          !std::isfinite(e) || t <= 0 || e <= 0) {
        throw InputError(
            Printf("%s line %d: not time_s,energy_j numbers > 0", csv_path.c_str(), number));
      }
      in.frontier.push_back({t, e});
    }
  }
  in.plan_name = f.plan.empty() ? f.frontier + "/chosen.json" : f.plan;
  in.plan = model::ReadPlanFile(in.plan_name);
  if (f.plan.empty()) in.plan_name = "the chosen plan";
  in.profile_name = f.profile.empty() ? Text(in.summary, "inputs", "profile", "") : f.profile;
  if (in.profile_name.empty()) throw InputError(summary_path + " names no profile; pass --profile");
  try {
    in.profile = model::ReadProfileCsv(in.profile_name);
  } catch (const InputError& e) {
    if (!f.profile.empty()) throw;
    throw InputError(std::string(e.what()) +
                     "; summary.json names this profile as the plan read "
                     "it; pass --profile P.csv where it is now");
  }
  if (!f.sim.empty()) {
    in.sim = model::ParseJsonBounded(ReadText(f.sim, "--sim"), f.sim);
    in.sim_name = f.sim;
  }
  if (!f.measure.empty()) {
    in.measure = model::ParseJsonBounded(ReadText(f.measure, "--measure"), f.measure);
    in.measure_name = f.measure;
  }
  if (f.host_power_option->count() > 0) {
    solver::Objective o;
    o.host_power_w = f.host_power_w;
    solver::CheckObjective(o);
    in.host_power_w = f.host_power_w;
    in.host_power_source = "from --host-power";
  } else if (in.measure && (*in.measure).contains("cpu_energy_j") &&
             (*in.measure)["cpu_energy_j"].is_number() && (*in.measure)["gpus"].is_array() &&
             !(*in.measure)["gpus"].empty()) {
    const json& m = *in.measure;
    const double dram = m.contains("dram_energy_j") && m["dram_energy_j"].is_number()
                            ? m["dram_energy_j"].get<double>()
                            : 0;
    const double duration = Number(m, {"duration_s"}, f.measure);
    if (duration > 0) {
      in.host_power_w = (m["cpu_energy_j"].get<double>() + dram) / duration /
                        static_cast<double>(m["gpus"].size());
      in.host_power_source = "CPU + DRAM measured by " + f.measure + " over its GPUs";
    }
  } else if (in.summary.contains("inputs") && in.summary["inputs"].contains("host_power_w") &&
             in.summary["inputs"]["host_power_w"].is_number() &&
             in.summary["inputs"]["host_power_w"].get<double>() > 0) {
    in.host_power_w = in.summary["inputs"]["host_power_w"].get<double>();
    in.host_power_source = "the plan's --host-power";
  }
  const std::string html = RenderReport(in);
  model::WriteFileAtomically(f.out, html);
  std::printf("wrote %s (%.0f KB): open it in a browser; it needs no network\n", f.out.c_str(),
              html.size() / 1024.0);
  return kExitOk;
}

}  // namespace joulepipe::cli
