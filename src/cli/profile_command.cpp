// `joulepipe profile --simulate`: flags, the simulated profile CSV and the
// summary that says what the figures are and what to run next.
#include "profile_command.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "format.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/physics/memory.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"
#include "output_dir.hpp"

namespace joulepipe::cli {

using model::InputError;

struct ProfileFlags {
  bool simulate = false;
  std::string model;
  std::string gpu;
  int tp = 0;
  int pp = 0;
  int dp = 1;
  int microbatch_size = 1;
  int seq = 0;
  std::string layer_split = "even";
  std::string recompute = "none";
  std::string framework = "megatron";
  std::string precision = "bf16";
  double power_limit_w = 0;
  int min_mhz = 0;
  int gpus_per_node = 0;
  double node_network_gbps = 0;
  std::string rank_order = "tp-first";
  double dp_gbps = physics::kDefaultInterNodeGbps;
  int microbatches = 0;
  std::string out;
  // Tell "not given" from a given 0 (which the workload model refuses).
  CLI::Option* tp_option = nullptr;
  CLI::Option* pp_option = nullptr;
};

namespace {

// Share of the GPU memory the estimate leaves for what it does not count
// (CUDA context, NCCL buffers, allocator fragmentation).
constexpr double kMemoryMargin = 0.10;

// --dp-gbps: inter-node bandwidth per GPU (10 Mb/s .. 80 Tb/s).
constexpr double kMinDpGbps = 0.001;
constexpr double kMaxDpGbps = 10'000;

std::string GpuIds() {
  std::string out;
  for (const physics::GpuSpec& gpu : physics::GpuCatalog()) {
    out += (out.empty() ? "" : ", ") + gpu.id;
  }
  return out;
}

std::string Footer() {
  std::string models, gpus;
  try {
    models = physics::KnownTransformerIds();
    for (const physics::GpuSpec& gpu : physics::GpuCatalog()) {
      gpus += (gpus.empty() ? "" : ", ") + gpu.id + Printf(" (P_block %g W)", gpu.p_block_w);
    }
  } catch (const std::exception& e) {
    models = gpus = std::string("(catalog unavailable: ") + e.what() + ")";
  }
  return "\nComputes a stage profile from a transformer workload model instead of measuring\n"
         "one: per stage, forward and backward GEMM FLOPs, HBM traffic and tensor-parallel\n"
         "all-reduces of one microbatch (the first stage adds the embedding, the last the\n"
         "LM head and loss), turned into time and energy at each SM clock by the GPU's\n"
         "DVFS model. Figures are simulated, per GPU (one of a stage's TP GPUs), GPU energy\n"
         "only. docs/workload-model.md has the formulas and their sources.\n"
         "\n"
         "Models: " +
         models + "\nGPUs:   " + gpus +
         "\n"
         "\n"
         "--simulate is required here. A measured profile comes from the job itself: the\n"
         "Python package's profile mode (docs/profiling.md) profiles each stage in situ\n"
         "during the first iterations and writes the same CSV.\n"
         "--layer-split: even (Megatron: layers / pp each, needs layers % pp == 0),\n"
         "balanced (fewer layers where the embedding or LM head cost most), or a list\n"
         "such as 15,16,16,16,16,16,16,15 (pp entries summing to the model's layers).\n"
         "\n"
         "Output CSV (the profile `plan` reads; docs/formats.md): '# key: value' lines\n"
         "(gpu, p_block_w = the GPU's P_block, source: simulated, date, joulepipe_version),\n"
         "then\n"
         "  stage,instruction,frequency,time,energy\n"
         "  0,forward,1980,0.050285698917243507,30.672959935673806\n"
         "one row per stage x {forward, backward} x SM clock (MHz), time in s and energy\n"
         "in J of one microbatch. Without --out the CSV goes to stdout, the summary to\n"
         "stderr; with --out the file is replaced atomically and the summary goes to\n"
         "stdout.\n"
         "\n"
         "Example, then plan (P_block comes from the profile):\n"
         "  joulepipe profile --simulate --model llama3-70b --gpu h100-sxm --tp 8 --pp 8 \\\n"
         "      --microbatch-size 1 --seq 8192 --out P.csv\n"
         "  joulepipe plan --profile P.csv --schedule 1f1b --stages 8 --microbatches 16 \\\n"
         "      --out plan-out";
}

std::string JoinSplit(const std::vector<int>& split) {
  std::string out;
  for (int n : split) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

ProfileRequest ToRequest(const ProfileFlags& f) {
  if (!f.simulate) {
    throw InputError(
        "measured profiling is not available yet (in-situ profiling of a running job comes "
        "with the training runtime); pass --simulate to compute the profile from the "
        "workload model, e.g. joulepipe profile --simulate --model llama3-70b --gpu h100-sxm "
        "--tp 8 --pp 8 --out P.csv");
  }
  if (f.model.empty()) {
    throw InputError("--model is required; known models: " + physics::KnownTransformerIds());
  }
  if (f.gpu.empty()) throw InputError("--gpu is required; known GPUs: " + GpuIds());
  if (f.tp_option->count() == 0) {
    throw InputError("--tp is required: the tensor-parallel GPUs per stage, 1 without TP");
  }
  if (f.pp_option->count() == 0) throw InputError("--pp is required: the pipeline stages");
  ProfileRequest r;
  r.spec.model = physics::FindTransformer(f.model);
  r.gpu = &physics::FindGpu(f.gpu);
  r.spec.parallel.tp = f.tp;
  r.spec.parallel.pp = f.pp;
  r.spec.parallel.dp = f.dp;
  r.spec.microbatch_size = f.microbatch_size;
  r.spec.seq_length = f.seq;
  r.spec.recompute = physics::ParseRecompute(f.recompute);
  r.spec.framework = physics::ParseFramework(f.framework);
  r.spec.precision = physics::ParsePrecision(f.precision);
  r.spec.placement.gpus_per_node = f.gpus_per_node;
  r.spec.placement.node_network_gbps = f.node_network_gbps;
  r.spec.placement.rank_order = physics::ParseRankOrder(f.rank_order);
  r.options.power_limit_w = f.power_limit_w;
  r.options.min_mhz = f.min_mhz;
  // The two figures only the summary uses (the DP all-reduce and iteration
  // estimates), so only the command line checks them.
  if (!std::isfinite(f.dp_gbps) || f.dp_gbps < kMinDpGbps || f.dp_gbps > kMaxDpGbps) {
    throw InputError(
        Printf("--dp-gbps must be %g..%g GB/s per GPU (got %g); e.g. 25 for one "
               "200 Gb/s InfiniBand adapter per GPU",
               kMinDpGbps, kMaxDpGbps, f.dp_gbps));
  }
  r.dp_gbps = f.dp_gbps;
  if (f.microbatches < 0 || f.microbatches > solver::kMaxMicrobatches) {
    throw InputError(
        Printf("--microbatches must be 1..%d (got %d): the microbatches of the "
               "1F1B iteration to estimate; leave it out for no estimate",
               solver::kMaxMicrobatches, f.microbatches));
  }
  r.microbatches = f.microbatches;
  r.layer_split_text = f.layer_split;
  if (f.layer_split == "balanced") {
    r.spec.parallel.layer_split = physics::BalancedLayerSplit(r.spec, *r.gpu);
  } else if (f.layer_split != "even") {
    r.spec.parallel.layer_split = physics::ParseLayerSplit(f.layer_split);
  }
  return r;
}

std::string Ms(double seconds) {
  return Printf("%.2f ms", seconds * 1e3);
}

}  // namespace

std::string SimulatedProfileCsv(const physics::SimulatedWorkload& w, const physics::GpuSpec& gpu) {
  return model::ProfileToCsv(physics::StampedProfile(w, gpu));
}

std::string FormatProfileSummary(const physics::SimulatedWorkload& w, const ProfileRequest& r,
                                 const std::string& csv_name) {
  const physics::GpuSpec& gpu = *r.gpu;
  const physics::WorkloadSpec& spec = w.spec;
  const physics::TransformerConfig& m = spec.model;
  const physics::Parallelism& p = spec.parallel;
  std::string t;
  t += "Simulated profile (workload model x GPU DVFS model; not measured). Times and energies\n"
       "are per GPU (one of a stage's " +
       std::to_string(p.tp) + " TP GPUs), GPU energy only.\n";
  t += Printf("  model        %s (%s): %d layers, hidden %d, FFN %d, %d heads / %d KV heads,\n",
              m.name.c_str(), m.id.c_str(), m.layers, m.hidden, m.ffn_hidden, m.heads, m.kv_heads);
  t += Printf("               vocab %d (padded to %d), %.1fB parameters\n", m.vocab,
              spec.padded_vocab(), m.Parameters() / 1e9);
  t +=
      Printf("  gpu          %s (%s): %.1f TFLOP/s bf16, %.0f GB/s HBM, %.0f GB/s NVLink\n",
             gpu.name.c_str(), gpu.id.c_str(), gpu.peak_bf16_tflops, gpu.hbm_gbps, gpu.nvlink_gbps);
  t += Printf(
      "  job          TP %d x PP %d x DP %d = %lld GPUs; microbatch %d x %d tokens; "
      "%s; recompute %s; framework %s\n",
      p.tp, p.pp, p.dp, static_cast<long long>(p.tp) * p.pp * p.dp, spec.microbatch_size,
      spec.seq(), std::string(physics::PrecisionName(spec.precision)).c_str(),
      std::string(physics::RecomputeName(spec.recompute)).c_str(),
      std::string(physics::FrameworkName(spec.framework)).c_str());
  if (physics::TpCrossesNodes(spec)) {
    t += Printf(
        "  placement    %d GPUs per node, ranks %s: the TP all-reduces leave the node, at "
        "%.3g GB/s per GPU (%.3g GB/s per node shared by its GPUs)\n",
        spec.placement.gpus_per_node,
        std::string(physics::RankOrderName(spec.placement.rank_order)).c_str(),
        physics::TpNetworkGbpsPerGpu(spec), spec.placement.node_network_gbps);
  }
  t += "  layer split  " + JoinSplit(w.layer_split) + " (" +
       (r.layer_split_text == "even" || r.layer_split_text == "balanced" ? r.layer_split_text
                                                                         : "given") +
       ")\n";
  t += Printf("  clocks       %d..%d MHz (%zu clocks) at a %.0f W power limit\n", w.clocks.front(),
              w.clocks.back(), w.clocks.size(), w.power_limit_w);
  bool capped = false;
  for (const physics::SimulatedStage& s : w.stages) {
    capped = capped || s.forward_at_max.power_capped || s.backward_at_max.power_capped;
  }
  if (capped) {
    double lowest = gpu.max_sm_mhz;
    for (const physics::SimulatedStage& s : w.stages) {
      lowest = std::min({lowest, s.forward_at_max.effective_mhz, s.backward_at_max.effective_mhz});
    }
    t += Printf(
        "               power-capped: at %d MHz requested, work runs at %.0f MHz or "
        "more (--power-limit raises the cap up to %.0f W)\n",
        gpu.max_sm_mhz, lowest, gpu.power_limit_max_w);
  }
  t += Printf("stage  layers    fwd@max    bwd@max   TFLOP fwd/bwd  compute  least-energy clock\n");
  for (const physics::SimulatedStage& s : w.stages) {
    const physics::StageCost& c = s.cost;
    std::string extra;
    if (c.embedding) extra += " +embedding";
    if (c.lm_head) extra += " +head+loss";
    const double compute = (s.forward.compute_s + s.backward.compute_s) /
                           (s.forward.time_at_max_s() + s.backward.time_at_max_s());
    t += Printf("  %-4d %3d-%-3d %9s %10s %7.2f/%-7.2f %6.0f%%  %d MHz%s\n", c.stage, c.first_layer,
                c.first_layer + c.layers - 1, Ms(s.forward_at_max.time_s).c_str(),
                Ms(s.backward_at_max.time_s).c_str(), c.forward.gemm_flops / 1e12,
                c.backward.gemm_flops / 1e12, 100 * compute, s.min_energy_mhz, extra.c_str());
  }
  t += Printf(
      "  MFU          %.1f%% at max clock in steady state (no pipeline bubble, no DP "
      "sync)\n",
      100 * physics::SteadyStateMfu(w, gpu));
  if (r.microbatches > 0) {
    const physics::IterationEstimate it =
        physics::EstimateIteration(w, gpu, r.microbatches, r.dp_gbps);
    t += Printf(
        "  iteration    %.3f s for 1F1B with %d microbatches at max clock: MFU %.1f%%, "
        "%.0f TFLOP/s per GPU executed\n",
        it.time_s, r.microbatches, 100 * it.mfu, it.hardware_tflops);
  }
  double sync = 0;
  for (const physics::SimulatedStage& s : w.stages) {
    sync = std::max(sync, physics::DpAllReduceSeconds(s.cost, p.dp, r.dp_gbps));
  }
  if (p.dp > 1) {
    t += Printf(
        "  DP sync      %.3f s per iteration: ring all-reduce of the largest stage's fp32 "
        "gradients over %d pipelines at %g GB/s per GPU\n",
        sync, p.dp, r.dp_gbps);
  } else {
    t += "  DP sync      none (--dp 1)\n";
  }
  {
    // Memory per GPU under 1F1B with the microbatches given (or pp, the
    // most 1F1B keeps in flight), Megatron's distributed optimizer and
    // sequence parallelism (physics/memory.hpp).
    const int m_count = r.microbatches > 0 ? r.microbatches : p.pp;
    const physics::MemoryEstimate mem =
        physics::EstimateMemory(spec, {physics::PipelineShape::Kind::k1F1B, m_count, 1}, gpu);
    const physics::StageMemory& peak = mem.stages[mem.peak_stage];
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    t += Printf(
        "  memory       %.1f of %.0f GiB per GPU at the peak (stage %d: model state %.1f GiB, "
        "activations %.1f GiB for %d microbatches in flight)\n"
        "               estimated for 1F1B, the distributed optimizer over DP %d and sequence "
        "parallelism (docs/workload-model.md, \"Memory\")\n",
        peak.total_bytes() / kGiB, mem.gpu_bytes / kGiB, peak.stage, peak.model_state_bytes / kGiB,
        peak.activation_bytes / kGiB, peak.in_flight_chunks, p.dp);
    if (!mem.Fits(kMemoryMargin)) {
      t += Printf(
          "  warning      does not fit with a %.0f%% margin: more --pp or --tp, a smaller "
          "--microbatch-size or --recompute full lowers it\n",
          100 * kMemoryMargin);
    }
  }
  t += Printf(
      "  P_block      %g W (%s's p_block_w: power while blocked on communication; recorded in "
      "the profile)\n",
      gpu.p_block_w, gpu.id.c_str());
  t += "next\n";
  t += Printf(
      "  joulepipe plan --profile %s --schedule 1f1b --stages %d --microbatches %d \\\n"
      "      --out plan-out\n",
      csv_name.c_str(), p.pp, r.microbatches > 0 ? r.microbatches : 4 * p.pp);
  return t;
}

ProfileSubcommand::ProfileSubcommand(CLI::App* app)
    : Subcommand(app->add_subcommand(
          "profile",
          "Write a stage profile for `plan` (simulated from a transformer model for now)")),
      flags_(std::make_unique<ProfileFlags>()) {
  ProfileFlags* f = flags_.get();
  CLI::App* c = command();
  c->footer([] { return Footer(); });
  c->add_flag("--simulate", f->simulate,
              "Simulate the profile from the workload model (required for now)");
  c->add_option("--model", f->model, "Transformer model id (listed below)")->type_name("ID");
  c->add_option("--gpu", f->gpu, "GPU type id (listed below)")->type_name("ID");
  f->tp_option =
      c->add_option("--tp", f->tp, "Tensor-parallel GPUs per stage, 1..1024")->type_name("N");
  f->pp_option = c->add_option("--pp", f->pp, "Pipeline stages, 1..1024")->type_name("N");
  c->add_option("--dp", f->dp, "Data-parallel pipelines, 1..100000")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--microbatch-size", f->microbatch_size, "Sequences per microbatch, 1..65536")
      ->capture_default_str()
      ->type_name("N");
  c->add_option("--seq", f->seq, "Tokens per sequence (default: the model's)")->type_name("N");
  c->add_option("--layer-split", f->layer_split, "Layers per stage: even, balanced or a,b,...")
      ->capture_default_str()
      ->type_name("SPLIT");
  c->add_option("--framework", f->framework,
                "Kernels of the training framework: megatron (fused, the default) or hf-eager "
                "(a Hugging Face model run eagerly: attention scores through HBM)")
      ->capture_default_str()
      ->type_name("{megatron,hf-eager}");
  c->add_option("--precision", f->precision,
                "Number format: bf16 (mixed precision, the default) or tf32 (fp32 weights and "
                "activations, TF32 matmuls at half the bf16 rate: a Hugging Face Trainer "
                "without --fp16/--bf16)")
      ->capture_default_str()
      ->type_name("{bf16,tf32}");
  c->add_option("--recompute", f->recompute, "Activation recomputation")
      ->capture_default_str()
      ->type_name("{none,full}");
  c->add_option("--power-limit", f->power_limit_w, "GPU power limit, W (default: the GPU's TDP)")
      ->type_name("W");
  c->add_option("--min-mhz", f->min_mhz, "Lowest SM clock profiled (default: >= 0.6 x max)")
      ->type_name("MHZ");
  c->add_option("--gpus-per-node", f->gpus_per_node,
                "GPUs per node, to find TP all-reduces that leave a node (default: none do)")
      ->type_name("N");
  c->add_option("--node-network-gbps", f->node_network_gbps,
                "A node's network, all adapters, GB/s per direction: what TP all-reduces that "
                "leave the node share (e.g. 25 for one 200 Gb/s InfiniBand adapter)")
      ->type_name("GBPS");
  c->add_option("--rank-order", f->rank_order,
                "Which ranks are adjacent: tp-first (Megatron-LM, the default) or pp-first "
                "(Merak: a pipeline's stages share a node, TP pairs lie pp apart)")
      ->capture_default_str()
      ->type_name("{tp-first,pp-first}");
  c->add_option("--dp-gbps", f->dp_gbps,
                "Inter-node bandwidth per GPU for the DP all-reduce estimate, GB/s (0.001..10000)")
      ->capture_default_str()
      ->type_name("GBPS");
  c->add_option("--microbatches", f->microbatches,
                "Also estimate one 1F1B iteration of M microbatches")
      ->type_name("M");
  c->add_option("--out", f->out, "Write the CSV here (atomically); default: stdout")
      ->type_name("P.csv");
}

ProfileSubcommand::~ProfileSubcommand() = default;

int ProfileSubcommand::Run() const {
  const ProfileRequest request = ToRequest(*flags_);
  const physics::SimulatedWorkload workload =
      physics::SimulateWorkload(request.spec, *request.gpu, request.options);
  const std::string csv = SimulatedProfileCsv(workload, *request.gpu);
  const std::string summary =
      FormatProfileSummary(workload, request, flags_->out.empty() ? "P.csv" : flags_->out);
  if (flags_->out.empty()) {
    std::fputs(csv.c_str(), stdout);
    std::fflush(stdout);
    std::fputs(summary.c_str(), stderr);
  } else {
    WriteFileAtomically(flags_->out, csv);
    std::fputs(summary.c_str(), stdout);
    std::printf("output       %s (%zu rows)\n", flags_->out.c_str(),
                2 * workload.clocks.size() * workload.stages.size());
  }
  return kExitOk;
}

}  // namespace joulepipe::cli
