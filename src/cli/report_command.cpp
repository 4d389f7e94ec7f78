// `joulepipe report`: reads a plan output directory (and optionally a
// simulation and a measurement) and writes the plan report
// (report/plan_report.hpp) as one HTML file.
#include "report_command.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/output_files.hpp"
#include "joulepipe/model/read_file.hpp"
#include "joulepipe/model/version.hpp"
#include "joulepipe/report/plan_report.hpp"
#include "joulepipe/solver/operating_point.hpp"
#include "output_dir.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;
using nlohmann::json;

// A plan directory's files, a run's JSON: model::ReadWholeFile's limit,
// checked before the file is read whole.
std::string ReadText(const std::string& path, const std::string& flag) {
  return model::ReadWholeFile(path, flag + " file");
}

}  // namespace

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
  RefuseToReplace("--out", f.out, f.force);
  if (!(f.max_slowdown >= 1 && f.max_slowdown <= 100)) {
    throw InputError(Printf("--max-slowdown must be a factor 1..100 (got %g)", f.max_slowdown));
  }
  report::PlanReportInputs in;
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
  in.profile_name =
      f.profile.empty() ? report::OutputText(in.summary, "inputs", "profile", "") : f.profile;
  if (in.profile_name.empty()) throw InputError(summary_path + " names no profile; pass --profile");
  try {
    model::RowRuleResult rows = ReadPlannableProfile(in.profile_name);  // as `plan` read it
    for (const std::string& note : rows.notes) {
      std::fprintf(stderr, "joulepipe: note: %s\n", note.c_str());
    }
    in.profile = std::move(rows.profile);
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
    model::Objective o;
    o.host_power_w = f.host_power_w;
    model::CheckObjective(o);
    in.host_power_w = f.host_power_w;
    in.host_power_source = "from --host-power";
  } else if (in.measure && (*in.measure).contains("cpu_energy_j") &&
             (*in.measure)["cpu_energy_j"].is_number() && (*in.measure)["gpus"].is_array() &&
             !(*in.measure)["gpus"].empty()) {
    const json& m = *in.measure;
    const double dram = m.contains("dram_energy_j") && m["dram_energy_j"].is_number()
                            ? m["dram_energy_j"].get<double>()
                            : 0;
    const double duration = report::OutputNumber(m, {"duration_s"}, f.measure);
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
  const std::string html = report::RenderPlanReport(in);
  model::WriteFileAtomically(f.out, html);
  std::printf("wrote %s (%.0f KB): open it in a browser; it needs no network\n", f.out.c_str(),
              html.size() / 1024.0);
  return kExitOk;
}

}  // namespace joulepipe::cli
