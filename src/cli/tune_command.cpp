// `joulepipe tune`: flags, one tune::Tune call, the summary and --out.
#include "tune_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "format.hpp"
#include "inputs.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/report/line_chart.hpp"
#include "output_dir.hpp"
#include "signals.hpp"

namespace joulepipe::cli {

namespace {

using model::InputError;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Mj(double joules) {
  return Printf("%.3f MJ", joules / 1e6);
}

std::string MemoryText(const physics::MemoryEstimate& m) {
  return Printf("%.1f of %.0f GiB per GPU at the peak (stage %d): %.1f GiB headroom",
                m.peak_bytes() / kGiB, m.gpu_bytes / kGiB, m.peak_stage, m.headroom_bytes() / kGiB);
}

// What the memory estimate assumes, and the flags that change it.
std::string MemoryAssumptions(const tune::TuneRequest& q) {
  const physics::MemoryOptions& m = q.memory;
  return Printf(
      "%s, %s, recompute %s (%s, %s, --recompute change them)",
      m.distributed_optimizer ? "the distributed optimizer" : "no distributed optimizer",
      m.sequence_parallel ? "sequence parallelism (TP > 1)" : "no sequence parallelism",
      std::string(physics::RecomputeName(q.workload.recompute)).c_str(),
      m.distributed_optimizer ? "--no-distributed-optimizer" : "without --no-distributed-optimizer",
      m.sequence_parallel ? "--no-sequence-parallel" : "without --no-sequence-parallel");
}

// The Megatron-LM arguments that run `c` as the estimate assumes it.
std::vector<std::string> MegatronArgs(const tune::TuneRequest& q, const tune::TuneConfig& c) {
  std::vector<std::string> a = {"--tensor-model-parallel-size",
                                std::to_string(c.tp),
                                "--pipeline-model-parallel-size",
                                std::to_string(c.pp),
                                "--micro-batch-size",
                                std::to_string(c.microbatch_size),
                                "--global-batch-size",
                                std::to_string(q.global_batch)};
  if (c.kind == schedule::Kind::kInterleaved) {
    a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(c.chunks)});
  }
  if (q.memory.distributed_optimizer) a.push_back("--use-distributed-optimizer");
  if (q.memory.sequence_parallel && c.tp > 1) a.push_back("--sequence-parallel");
  if (q.workload.recompute == physics::Recompute::kFull) {
    a.insert(a.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform",
                       "--recompute-num-layers", "1"});
  }
  return a;
}

std::string Joined(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

int Count(const tune::TuneResult& r, tune::Candidate::Status s) {
  return static_cast<int>(std::count_if(r.candidates.begin(), r.candidates.end(),
                                        [s](const tune::Candidate& c) { return c.status == s; }));
}

// The chosen configuration's plan file (its pipeline frontier point).
model::Plan ChosenPlan(const tune::TuneResult& r) {
  const tune::Candidate& c = r.chosen();
  const schedule::Schedule schedule = schedule::Build(tune::CandidateSpec(r.request, c.config));
  return solver::ToPlan(schedule, c.frontier.points[r.best.point]);
}

std::string EnvelopeCsv(const tune::TuneResult& r) {
  std::string s = "time_s,energy_j,saving_pct,tp,pp,dp,microbatch_size,schedule,chunks\n";
  for (const tune::EnvelopePoint& p : r.envelope) {
    const tune::TuneConfig& c = r.candidates[p.candidate].config;
    s += Exact(p.job.time_s) + "," + Exact(p.job.energy_j) + "," + Exact(r.SavingPct(p.job)) +
         Printf(",%d,%d,%d,%d,%s,%d\n", c.tp, c.pp, c.dp, c.microbatch_size,
                std::string(schedule::KindName(c.kind)).c_str(), c.chunks);
  }
  return s;
}

std::string CandidatesCsv(const tune::TuneResult& r) {
  std::string s =
      "tp,pp,dp,microbatch_size,schedule,chunks,microbatches,instructions,status,"
      "peak_memory_gib,headroom_gib,allreduce_s,p2p_s,max_clock_time_s,max_clock_energy_j,"
      "bound_energy_j,target_time_s,target_energy_j,target_saving_pct,solve_s,might_improve\n";
  for (const tune::Candidate& c : r.candidates) {
    const tune::TuneConfig& k = c.config;
    s += Printf("%d,%d,%d,%d,%s,%d,%d,%d,%s,", k.tp, k.pp, k.dp, k.microbatch_size,
                std::string(schedule::KindName(k.kind)).c_str(), k.chunks, c.microbatches,
                c.instructions, std::string(tune::StatusName(c.status)).c_str());
    s += Printf("%.3f,%.3f,", c.memory.peak_bytes() / kGiB, c.memory.headroom_bytes() / kGiB);
    const bool figures = c.max_clock.time_s > 0;
    s += figures ? Exact(c.allreduce_s) + "," + Exact(c.p2p_s) + "," + Exact(c.max_clock.time_s) +
                       "," + Exact(c.max_clock.energy_j) + "," + Exact(c.bound_j) + ","
                 : std::string(",,,,,");
    s += c.at_target ? Exact(c.at_target->time_s) + "," + Exact(c.at_target->energy_j) + "," +
                           Exact(r.SavingPct(*c.at_target)) + ","
                     : std::string(",,,");
    s += c.status == tune::Candidate::Status::kSolved ? Exact(c.solve_seconds) : std::string();
    s += c.status == tune::Candidate::Status::kTooLarge ? (c.might_improve ? ",yes\n" : ",no\n")
                                                        : ",\n";
  }
  return s;
}

std::string EnvelopeSvg(const tune::TuneResult& r) {
  const tune::TuneRequest& q = r.request;
  report::LineChart chart;
  chart.title = "Configuration x clocks: the job's lower envelope";
  chart.subtitle = Printf("%s on %lld %s, global batch %d; simulated GPU energy, not measured",
                          q.workload.model.name.c_str(), static_cast<long long>(q.gpus),
                          q.gpu.id.c_str(), q.global_batch);
  chart.x_label = "iteration time (s)";
  chart.y_label = "energy per iteration (MJ)";
  report::Series envelope{"all configurations", {}, "#1f77b4", false, true, {}};
  for (const tune::EnvelopePoint& p : r.envelope) {
    envelope.points.push_back({p.job.time_s, p.job.energy_j / 1e6});
    envelope.titles.push_back(tune::ConfigText(r.candidates[p.candidate].config));
  }
  report::Series current{"today's, clocks only", {}, "#ff7f0e", true, false, {}};
  const tune::Candidate& now = r.current();
  for (const solver::FrontierPoint& p : now.frontier.points) {
    const tune::JobPoint j = tune::ToJobPoint(now, p, r.p_block_w);
    if (j.time_s <= r.envelope_end_s) current.points.push_back({j.time_s, j.energy_j / 1e6});
  }
  chart.series.push_back(std::move(envelope));
  chart.series.push_back(std::move(current));
  chart.markers.push_back({"current, full clocks",
                           {now.max_clock.time_s, now.max_clock.energy_j / 1e6},
                           "#d62728",
                           ""});
  chart.markers.push_back({Printf("chosen: %.1f%% less", r.SavingPct(r.best.job)),
                           {r.best.job.time_s, r.best.job.energy_j / 1e6},
                           "#2ca02c",
                           tune::ConfigText(r.chosen().config)});
  chart.vertical_lines.push_back({"target time", r.target_s, "#7f7f7f"});
  return report::RenderSvg(chart);
}

nlohmann::ordered_json PointJson(const tune::TuneResult& r, const tune::JobPoint& p) {
  return {{"time_s", p.time_s}, {"energy_j", p.energy_j}, {"saving_pct", r.SavingPct(p)}};
}

nlohmann::ordered_json ConfigJson(const tune::TuneConfig& c, int microbatches) {
  return {{"tp", c.tp},
          {"pp", c.pp},
          {"dp", c.dp},
          {"microbatch_size", c.microbatch_size},
          {"schedule", std::string(schedule::KindName(c.kind))},
          {"chunks", c.chunks},
          {"microbatches", microbatches}};
}

}  // namespace

// tune prices every wait at P_block (no wait model): what it says.
constexpr char kTuneWaitModel[] =
    "uncalibrated: every wait at P_block (plan and simulate --wait-model price clocks while "
    "waiting)";

std::string TuneSummaryJson(const tune::TuneResult& r, const std::string& job_text) {
  using nlohmann::ordered_json;
  const tune::Candidate& now = r.current();
  const tune::Candidate& chosen = r.chosen();
  const double clocks = r.SavingPct(r.clocks_only.job);
  const double total = r.SavingPct(r.best.job);
  ordered_json root;
  root["figures"] = "simulated (workload model), not measured";
  root["job"] = job_text;
  root["current"] = ConfigJson(now.config, now.microbatches);
  root["current"]["full_clocks"] = PointJson(r, now.max_clock);
  root["current"]["clocks_only"] = PointJson(r, r.clocks_only.job);
  root["chosen"] = ConfigJson(chosen.config, chosen.microbatches);
  root["chosen"]["full_clocks"] = PointJson(r, chosen.max_clock);
  root["chosen"]["with_plan"] = PointJson(r, r.best.job);
  root["chosen"]["peak_memory_gib"] = chosen.memory.peak_bytes() / kGiB;
  root["chosen"]["headroom_gib"] = chosen.memory.headroom_bytes() / kGiB;
  root["chosen"]["peak_stage"] = chosen.memory.peak_stage;
  root["chosen"]["megatron_args"] = MegatronArgs(r.request, chosen.config);
  root["memory_assumes"] = {{"distributed_optimizer", r.request.memory.distributed_optimizer},
                            {"sequence_parallel", r.request.memory.sequence_parallel},
                            {"recompute", physics::RecomputeName(r.request.workload.recompute)}};
  root["saving_pct"] = {{"total", total}, {"clocks", clocks}, {"configuration", total - clocks}};
  root["target_time_s"] = r.target_s;
  root["envelope_end_s"] = r.envelope_end_s;
  root["envelope_points"] = r.envelope.size();
  ordered_json counts;
  for (auto s : {tune::Candidate::Status::kSolved, tune::Candidate::Status::kDominated,
                 tune::Candidate::Status::kNoMemory, tune::Candidate::Status::kTooSlow,
                 tune::Candidate::Status::kTooLarge, tune::Candidate::Status::kNotReached}) {
    counts[std::string(tune::StatusName(s))] = Count(r, s);
  }
  root["candidates"] = r.candidates.size();
  root["by_status"] = counts;
  root["too_large_might_improve"] = r.too_large_might_improve;
  root["too_large_gain_bound_pct"] = r.too_large_gain_bound_pct;
  root["cancelled"] = r.cancelled;
  root["p_block_w"] = r.p_block_w;
  root["wait_model"] = kTuneWaitModel;
  root["seconds"] = r.seconds;
  return root.dump(2) + "\n";
}

void WriteTuneOutputs(const tune::TuneResult& r, const std::string& job_text,
                      model::StagedDirectory* staged, const std::atomic<bool>* cancel) {
  staged->WriteFile("envelope.csv", EnvelopeCsv(r));
  staged->WriteFile("envelope.svg", EnvelopeSvg(r));
  staged->WriteFile("candidates.csv", CandidatesCsv(r));
  staged->WriteFile("chosen.json", model::PlanToJson(ChosenPlan(r)));
  staged->WriteFile("summary.json", TuneSummaryJson(r, job_text));
  staged->Commit(cancel);
}

std::string FormatTuneReport(const tune::TuneResult& r, const std::string& job_text,
                             const std::string& out_dir) {
  using S = tune::Candidate::Status;
  const tune::Candidate& now = r.current();
  const tune::Candidate& chosen = r.chosen();
  std::string s = "Figures are simulated (the workload model on every candidate), not measured.\n";
  s += job_text;
  s += Printf("  current     %s: %d microbatches per pipeline\n",
              tune::ConfigText(now.config).c_str(), now.microbatches);
  s += Printf(
      "  searched    %zu configurations in %.1f s: %d solved, %d dominated (bound), %d out "
      "of memory, %d too slow, %d too large%s\n",
      r.candidates.size(), r.seconds, r.solved, Count(r, S::kDominated), Count(r, S::kNoMemory),
      Count(r, S::kTooSlow), Count(r, S::kTooLarge),
      r.cancelled ? Printf(", %d not reached (cancelled)", Count(r, S::kNotReached)).c_str() : "");
  const int too_large = Count(r, S::kTooLarge);
  if (too_large > 0) {
    s += r.too_large_might_improve > 0
             ? Printf(
                   "  note        %d of the %d too large to solve have a bound below the "
                   "envelope; at the target they could save at most %.2f pp more (raise "
                   "--max-instructions, now %d, to solve them)\n",
                   r.too_large_might_improve, too_large, r.too_large_gain_bound_pct,
                   r.request.max_instructions)
             : Printf(
                   "  note        none of the %d too large to solve could improve the envelope "
                   "(their bounds are above it)\n",
                   too_large);
  }
  s += Printf(
      "  wait model  uncalibrated: every wait at P_block = %g W (plan and simulate\n"
      "              --wait-model price clocks while waiting)\n",
      r.p_block_w);
  s += Printf("  target      %.3f s per iteration (%s)\n\n", r.target_s,
              r.request.slowdown > 0
                  ? Printf("%.1f%% over today's", 100 * r.request.slowdown).c_str()
                  : "today's, at full clocks");
  auto row = [&](const std::string& what, const tune::JobPoint& p) {
    s += Printf("  %-44s %10.3f s %12s %8.1f%%\n", what.c_str(), p.time_s, Mj(p.energy_j).c_str(),
                r.SavingPct(p));
  };
  // The energy is the whole job's: every GPU's, added up.
  s +=
      Printf("  %-44s %12s %12s %9s\n",
             Printf("per iteration, all %lld GPUs together", static_cast<long long>(r.request.gpus))
                 .c_str(),
             "time", "energy", "saving");
  row("current, full clocks", now.max_clock);
  row("current, clocks only (joulepipe plan)", r.clocks_only.job);
  row("chosen, full clocks", chosen.max_clock);
  row("chosen + its plan", r.best.job);
  const double clocks = r.SavingPct(r.clocks_only.job);
  const double total = r.SavingPct(r.best.job);
  s += Printf("\n  chosen      %s: %d microbatches per pipeline%s\n",
              tune::ConfigText(chosen.config).c_str(), chosen.microbatches,
              r.best.candidate == 0 ? " (the current one)" : "");
  s += Printf("  saving      %.1f%% = clocks %.1f pp + configuration %.1f pp\n", total, clocks,
              total - clocks);
  s += "  memory      " + MemoryText(chosen.memory) +
       Printf(" (margin %.0f%%)\n", 100 * r.request.memory_margin);
  s += "  assumes     " + MemoryAssumptions(r.request) + "\n";
  s += "  megatron    " + Joined(MegatronArgs(r.request, chosen.config)) +
       (chosen.config.kind == schedule::Kind::kGPipe
            ? " (Megatron-LM has no GPipe schedule: run it with another framework)\n"
            : "\n");
  // The best few configurations at the target, for context.
  std::vector<const tune::Candidate*> solved;
  for (const tune::Candidate& c : r.candidates) {
    if (c.status == S::kSolved && c.at_target) solved.push_back(&c);
  }
  std::sort(solved.begin(), solved.end(), [](const tune::Candidate* a, const tune::Candidate* b) {
    return a->at_target->energy_j < b->at_target->energy_j;
  });
  s += "\n  best solved configurations at the target time:\n";
  for (std::size_t k = 0; k < std::min<std::size_t>(5, solved.size()); ++k) {
    const tune::Candidate& c = *solved[k];
    s += Printf("    %-44s %8.1f%%  (full clocks %.3f s, memory %.1f GiB)\n",
                tune::ConfigText(c.config).c_str(), r.SavingPct(*c.at_target), c.max_clock.time_s,
                c.memory.peak_bytes() / kGiB);
  }
  if (!out_dir.empty()) {
    const char* slash = out_dir.back() == '/' ? "" : "/";
    s += Printf(
        "\nWrote %s%senvelope.csv, envelope.svg, candidates.csv, chosen.json (the chosen "
        "configuration's plan) and summary.json.\n",
        out_dir.c_str(), slash);
  }
  if (r.cancelled) s += "\nCancelled: the figures are over the configurations solved so far.\n";
  return s;
}

namespace {

constexpr char kTuneFooter[] =
    "\nSearches the configurations of the same job (the same GPUs and global batch, so\n"
    "the same training computation): PP x TP x DP, the microbatch size, and the\n"
    "schedules gpipe, 1f1b and interleaved (each V up to --max-chunks). Each gets a\n"
    "simulated profile (the workload model, as `profile --simulate`), with pipeline\n"
    "sends at --p2p-gbps and the gradient all-reduce at --dp-gbps, a memory check\n"
    "(never recommended when it does not fit with --memory-margin) and, unless an\n"
    "energy bound shows it cannot help, its frontier. The answer is the least-energy\n"
    "point of the lower envelope at today's time (the current configuration at full\n"
    "clocks), never worse than clocks alone on the current configuration; the saving\n"
    "is split into clocks (the current configuration's plan) and configuration (the\n"
    "rest). Ctrl-C stops the search and keeps what is solved. Every figure is\n"
    "simulated.\n"
    "\n"
    "Example (GPT-3 175B on 1,024 A100-SXM, today TP 8 x PP 8 x DP 16, 1f1b):\n"
    "  joulepipe tune --model gpt3-175b --gpu a100-sxm --gpus 1024 --out tune-out\n"
    "  joulepipe tune ... --keep tp,dp        # only PP, microbatch size and schedule vary";

}  // namespace

struct TuneFlags {
  bool force = false;  // --force: may replace another command's output
  std::string model;
  std::string gpu;
  long long gpus = 0;
  int tp = 8;
  int pp = 8;
  int global_batch = 1536;
  int microbatch_size = 1;
  int seq = 0;
  std::string schedule = "1f1b";
  int chunks = 1;
  CLI::Option* chunks_option = nullptr;
  std::string framework = "megatron";
  std::string precision = "bf16";
  std::string recompute = "none";
  bool no_distributed_optimizer = false;
  bool no_sequence_parallel = false;
  std::string keep;
  int gpus_per_node = 8;
  int max_chunks = 4;
  int max_microbatch_size = 8;
  double memory_margin = 0.10;
  double slowdown = 0;
  double envelope_span = 0.10;
  int grid_points = 60;
  int max_instructions = 4096;
  double dp_gbps = physics::kDefaultInterNodeGbps;
  double p2p_gbps = physics::kDefaultInterNodeGbps;
  std::string out;
  bool json = false;
};

TuneSubcommand::TuneSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "tune", "Find the job configuration and clocks of least energy at today's speed")),
      flags_(std::make_unique<TuneFlags>()) {
  TuneFlags* f = flags_.get();
  CLI::App* c = command();
  AddJobFlags(c, &f->model, &f->gpu, &f->gpus, "GPUs of the job (today's TP x PP x DP)");
  c->add_option("--tp", f->tp, "Today's tensor-parallel GPUs per stage")->capture_default_str();
  c->add_option("--pp", f->pp, "Today's pipeline stages")->capture_default_str();
  c->add_option("--global-batch", f->global_batch, "Sequences per iteration, all pipelines")
      ->capture_default_str();
  c->add_option("--microbatch-size", f->microbatch_size, "Today's sequences per microbatch")
      ->capture_default_str();
  c->add_option("--seq", f->seq, "Tokens per sequence (default: the model's)");
  c->add_option("--schedule", f->schedule, "Today's pipeline schedule")
      ->capture_default_str()
      ->type_name("{gpipe,1f1b,interleaved}");
  f->chunks_option =
      c->add_option("--chunks", f->chunks, "Today's virtual stages per GPU (interleaved, >= 2)")
          ->type_name("V");
  c->add_option("--framework", f->framework, "Kernels of the framework: megatron or hf-eager")
      ->capture_default_str()
      ->type_name("{megatron,hf-eager}");
  c->add_option("--precision", f->precision, "Number format: bf16 or tf32")
      ->capture_default_str()
      ->type_name("{bf16,tf32}");
  c->add_flag("--no-distributed-optimizer", f->no_distributed_optimizer,
              "Estimate memory without Megatron's --use-distributed-optimizer (optimizer "
              "state not sharded over data-parallel ranks)");
  c->add_flag("--no-sequence-parallel", f->no_sequence_parallel,
              "Estimate memory without Megatron's --sequence-parallel");
  c->add_option("--recompute", f->recompute, "Activation recomputation of every candidate")
      ->capture_default_str()
      ->type_name("{none,full}");
  c->add_option("--keep", f->keep,
                "Keep today's values of these: any of tp, pp, dp, mbs, schedule (comma-separated)")
      ->type_name("LIST");
  c->add_option("--gpus-per-node", f->gpus_per_node, "GPUs per node: TP stays within one")
      ->capture_default_str();
  c->add_option("--max-chunks", f->max_chunks, "Largest interleaved V considered (2..16)")
      ->capture_default_str();
  c->add_option("--max-microbatch-size", f->max_microbatch_size,
                "Largest microbatch size considered")
      ->capture_default_str();
  c->add_option("--memory-margin", f->memory_margin,
                "Fraction of GPU memory left for what the estimate omits (CUDA context, NCCL, "
                "fragmentation)")
      ->capture_default_str();
  c->add_option("--slowdown", f->slowdown,
                "Target time = (1 + this) x today's iteration time, 0..1")
      ->capture_default_str();
  c->add_option("--envelope-span", f->envelope_span,
                "The envelope covers up to (1 + this) x the target time, 0..1")
      ->capture_default_str();
  c->add_option("--grid-points", f->grid_points, "Frontier deadlines per candidate")
      ->capture_default_str();
  c->add_option("--max-instructions", f->max_instructions,
                "Candidates with more instructions per pipeline are bounded, not solved (the solve "
                "grows faster than linearly: 4,096 take about 30 s here)")
      ->capture_default_str();
  c->add_option("--dp-gbps", f->dp_gbps,
                "Inter-node bandwidth per GPU for the gradient all-reduce, GB/s")
      ->capture_default_str();
  c->add_option("--p2p-gbps", f->p2p_gbps, "Bandwidth per GPU of pipeline sends, GB/s")
      ->capture_default_str();
  c->add_option("--out", f->out, "Output directory (written atomically)")->type_name("DIR");
  c->add_flag("--force", f->force,
              "Replace --out even if another joulepipe command (plan, demo) wrote it");
  c->add_flag("--json", f->json, "Print summary.json instead of the table");
  c->footer(kTuneFooter);
}

TuneSubcommand::~TuneSubcommand() = default;

int TuneSubcommand::Run() const {
  const TuneFlags& f = *flags_;
  tune::TuneRequest r;
  r.gpu = physics::FindGpu(f.gpu);
  r.workload.model = physics::FindTransformer(f.model);
  r.workload.seq_length = f.seq;
  r.workload.framework = physics::ParseFramework(f.framework, "--framework");
  r.workload.precision = physics::ParsePrecision(f.precision, "--precision");
  r.workload.recompute = physics::ParseRecompute(f.recompute, "--recompute");
  r.memory.distributed_optimizer = !f.no_distributed_optimizer;
  r.memory.sequence_parallel = !f.no_sequence_parallel;
  const int dp = DataParallelFromFlags(f.gpus, f.tp, f.pp);
  r.gpus = f.gpus;
  r.global_batch = f.global_batch;
  r.current.tp = f.tp;
  r.current.pp = f.pp;
  r.current.dp = dp;
  r.current.microbatch_size = f.microbatch_size;
  if (!schedule::ParseKind(f.schedule, &r.current.kind)) {
    throw InputError("--schedule must be gpipe, 1f1b or interleaved (got '" + f.schedule + "')");
  }
  const bool interleaved = r.current.kind == schedule::Kind::kInterleaved;
  if (f.chunks_option->count() > 0 && !interleaved) {
    throw InputError("--chunks is for --schedule interleaved only");
  }
  if (interleaved && (f.chunks_option->count() == 0 || f.chunks < 2)) {
    throw InputError("--schedule interleaved needs --chunks V >= 2 (virtual stages per GPU)");
  }
  r.current.chunks = interleaved ? f.chunks : 1;
  r.keep = tune::ParseTuneKeep(f.keep, "--keep");
  r.gpus_per_node = f.gpus_per_node;
  r.max_chunks = f.max_chunks;
  r.max_microbatch_size = f.max_microbatch_size;
  r.memory_margin = f.memory_margin;
  r.slowdown = f.slowdown;
  r.envelope_span = f.envelope_span;
  r.grid_points = f.grid_points;
  r.max_instructions = f.max_instructions;
  r.dp_gbps = f.dp_gbps;
  r.p2p_gbps = f.p2p_gbps;
  tune::CheckTuneRequest(r);
  if (!f.out.empty()) {
    // Refuses an --out that may not be replaced before the search.
    StagedDirectory probe(f.out, "tune", f.force);
  }
  const std::string job = Printf(
      "  job         %s on %lld %s, global batch %d x %d tokens (framework %s, %s, recompute "
      "%s)\n",
      r.workload.model.name.c_str(), f.gpus, r.gpu.name.c_str(), f.global_batch, r.workload.seq(),
      f.framework.c_str(), f.precision.c_str(), f.recompute.c_str());
  const CancellableScope cancellable;
  r.cancel = InterruptFlag();
  r.progress = [](int index, int of, const std::string& config, double seconds) {
    if (seconds < 0) {
      std::fprintf(stderr, "joulepipe: tune: [%d/%d] solving %s...\n", index, of, config.c_str());
    } else {
      std::fprintf(stderr, "joulepipe: tune: [%d/%d] solved in %.1f s\n", index, of, seconds);
    }
    std::fflush(stderr);
  };
  const tune::TuneResult result = tune::Tune(r);
  if (!f.out.empty()) {
    StagedDirectory staged(f.out, "tune", f.force);
    // After a Ctrl-C the search stopped early on purpose: write what it found.
    WriteTuneOutputs(result, job, &staged, result.cancelled ? nullptr : InterruptFlag());
  }
  const std::string text =
      f.json ? TuneSummaryJson(result, job) : FormatTuneReport(result, job, f.out);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace joulepipe::cli
