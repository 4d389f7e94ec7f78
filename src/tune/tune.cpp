#include "joulepipe/tune/tune.hpp"
#include "joulepipe/schedule/clock_plans.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "energy_bound.hpp"
#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::tune {

namespace {

using model::Format;
using model::InputError;
using model::Require;

// Times within this fraction of a deadline count as meeting it: a job time
// is a pipeline time plus the all-reduce, and subtracting the all-reduce
// again may lose an ulp.
constexpr double kTimeTolerance = 1e-12;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

bool Cancelled(const TuneRequest& r) {
  return r.cancel != nullptr && r.cancel->load(std::memory_order_relaxed);
}

physics::PipelineShape Shape(const TuneConfig& c, int microbatches) {
  physics::PipelineShape shape;
  shape.microbatches = microbatches;
  shape.chunks = c.chunks;
  switch (c.kind) {
    case schedule::Kind::kGPipe:
      shape.kind = physics::PipelineShape::Kind::kGPipe;
      break;
    case schedule::Kind::k1F1B:
      shape.kind = physics::PipelineShape::Kind::k1F1B;
      break;
    case schedule::Kind::kInterleaved:
      shape.kind = physics::PipelineShape::Kind::kInterleaved;
      break;
  }
  return shape;
}

int Microbatches(const TuneRequest& r, const TuneConfig& c) {
  return r.global_batch / (c.dp * c.microbatch_size);
}

// The workload of one GPU's stages (`virtual_stages`: one entry per chunk x
// stage, for the interleaved profile) or of the physical stages (memory).
physics::WorkloadSpec Workload(const TuneRequest& r, const TuneConfig& c, bool virtual_stages) {
  physics::WorkloadSpec spec = r.workload;
  spec.parallel = {};
  spec.parallel.tp = c.tp;
  spec.parallel.dp = c.dp;
  spec.parallel.pp = virtual_stages ? c.pp * c.chunks : c.pp;
  spec.microbatch_size = c.microbatch_size;
  if (spec.model.total_layers() % spec.parallel.pp != 0) {
    spec.parallel.layer_split = physics::BalancedLayerSplit(spec, r.gpu);
  }
  return spec;
}

// Seconds of one pipeline send of a microbatch's activations (or their
// gradients) from one GPU of a stage.
double SendSeconds(const TuneRequest& r, const TuneConfig& c) {
  const physics::WorkloadSpec& w = r.workload;
  const double element = w.precision == physics::Precision::kTf32 ? 4.0 : 2.0;
  const double bytes = static_cast<double>(c.microbatch_size) * w.seq() * w.model.hidden * element;
  return bytes / c.tp / (r.p2p_gbps * 1e9);
}

void RequireRange(bool ok, const char* field, const std::string& what) {
  Require(ok, field, std::string(field) + " " + what);
}

std::vector<int> Divisors(std::int64_t n, std::int64_t at_most) {
  std::vector<int> out;
  for (std::int64_t d = 1; d <= std::min(n, at_most); ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

// Whether the config is a valid workload and schedule (the checks of the
// physics and schedule parts, which throw InputError).
void CheckConfig(const TuneRequest& r, const TuneConfig& c) {
  const physics::WorkloadSpec spec = Workload(r, c, /*virtual_stages=*/true);
  physics::ResolveLayerSplit(spec);
  schedule::CheckSpec(CandidateSpec(r, c));
}

bool IsValid(const TuneRequest& r, const TuneConfig& c) {
  try {
    CheckConfig(r, c);
    return true;
  } catch (const InputError&) {
    return false;
  }
}

// The job figures of a pipeline point.
JobPoint Job(const Candidate& c, double pipeline_s, double pipeline_j, double p_block_w) {
  const double copies = static_cast<double>(c.config.dp) * c.config.tp;
  return {pipeline_s + c.allreduce_s,
          copies * (pipeline_j + c.config.pp * p_block_w * c.allreduce_s)};
}

// Least energy of the solved points whose job time is <= t (infinity if none).
double EnvelopeAt(const std::vector<EnvelopePoint>& points, double t) {
  double best = std::numeric_limits<double>::infinity();
  for (const EnvelopePoint& p : points) {
    if (p.job.time_s <= t * (1 + kTimeTolerance)) best = std::min(best, p.job.energy_j);
  }
  return best;
}

std::vector<EnvelopePoint> ParetoFilter(std::vector<EnvelopePoint> points) {
  std::sort(points.begin(), points.end(), [](const EnvelopePoint& a, const EnvelopePoint& b) {
    if (a.job.time_s != b.job.time_s) return a.job.time_s < b.job.time_s;
    return a.job.energy_j < b.job.energy_j;
  });
  std::vector<EnvelopePoint> out;
  for (const EnvelopePoint& p : points) {
    if (out.empty() || p.job.energy_j < out.back().job.energy_j) out.push_back(p);
  }
  return out;
}

// Fills what every candidate gets before any solve: memory, size, the
// full-clock and fastest figures and the energy bound (energy_bound.hpp).
// Returns false when the candidate is out for memory (only when `gated`;
// status set); one too large to solve gets kTooLarge and its figures.
bool Prepare(const TuneRequest& r, double p_block_w, bool gated, Candidate* c,
             schedule::Schedule* schedule, model::Profile* profile,
             std::optional<PipelineBound>* bound) {
  c->microbatches = Microbatches(r, c->config);
  c->memory = physics::EstimateMemory(Workload(r, c->config, false),
                                      Shape(c->config, c->microbatches), r.gpu, r.memory);
  const schedule::Spec spec = CandidateSpec(r, c->config);
  c->instructions = 2 * spec.stages * spec.microbatches * spec.chunks;
  if (gated && !c->memory.Fits(r.memory_margin)) {
    c->status = Candidate::Status::kNoMemory;
    return false;
  }
  // Too large to solve: its figures and bound still say whether it might
  // have helped.
  if (c->instructions > r.max_instructions) c->status = Candidate::Status::kTooLarge;
  *profile = CandidateProfile(r, c->config);
  *schedule = schedule::Build(spec);
  c->p2p_s = SendSeconds(r, c->config);

  // The all-reduce of the GPU with the most parameters: a GPU of stage s
  // holds the virtual stages chunk x pp + s.
  const physics::WorkloadSpec virtual_spec = Workload(r, c->config, true);
  const std::vector<physics::StageCost> costs = physics::ComputeStageCosts(virtual_spec);
  std::vector<double> per_gpu(c->config.pp, 0.0);
  for (const physics::StageCost& cost : costs) {
    per_gpu[cost.stage % c->config.pp] +=
        physics::DpAllReduceSeconds(cost, c->config.dp, r.dp_gbps);
  }
  c->allreduce_s = *std::max_element(per_gpu.begin(), per_gpu.end());

  const solver::Evaluation full = solver::EvaluateClocks(
      *schedule, *profile, p_block_w, schedule::UniformClocks(*schedule, *profile, true));
  c->max_clock = Job(*c, full.time_s, full.energy_j, p_block_w);

  *bound = PipelineBound(*schedule, *profile, p_block_w);
  c->fastest_s = (*bound)->fastest_s() + c->allreduce_s;
  return true;
}

// The candidate's bound on its job energy within job time t.
double JobBound(const Candidate& c, const PipelineBound& bound, double t, double p_block_w) {
  const double copies = static_cast<double>(c.config.dp) * c.config.tp;
  return copies * (bound.AtMost(t - c.allreduce_s) + c.config.pp * p_block_w * c.allreduce_s);
}

// Whether the candidate can put a point strictly below the envelope of
// `found` anywhere in [its fastest time, end]. On each piece [a, b] of a
// grid over that range its bound is >= JobBound(b) (non-increasing) and the
// envelope is <= its value at a, so JobBound(b) >= envelope(a) on every
// piece proves it cannot.
bool CanImprove(const Candidate& c, const PipelineBound& bound,
                const std::vector<EnvelopePoint>& found, double end, double p_block_w) {
  constexpr int kPieces = 64;
  const double lo = c.fastest_s;
  if (lo >= end) return JobBound(c, bound, end, p_block_w) < EnvelopeAt(found, end);
  for (int k = 0; k < kPieces; ++k) {
    const double a = lo + (end - lo) * k / kPieces;
    const double b = k + 1 == kPieces ? end : lo + (end - lo) * (k + 1) / kPieces;
    if (JobBound(c, bound, b, p_block_w) < EnvelopeAt(found, a)) return true;
  }
  return false;
}

}  // namespace

std::string ConfigText(const TuneConfig& c) {
  std::string s = Format("TP %d x PP %d x DP %d, mbs %d, %s", c.tp, c.pp, c.dp, c.microbatch_size,
                         std::string(schedule::KindName(c.kind)).c_str());
  if (c.kind == schedule::Kind::kInterleaved) s += Format(" V %d", c.chunks);
  return s;
}

TuneKeep ParseTuneKeep(const std::string& text, const std::string& field) {
  TuneKeep keep;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name.empty()) continue;
    if (name == "tp") {
      keep.tp = true;
    } else if (name == "pp") {
      keep.pp = true;
    } else if (name == "dp") {
      keep.dp = true;
    } else if (name == "mbs" || name == "microbatch-size") {
      keep.microbatch_size = true;
    } else if (name == "schedule") {
      keep.schedule = true;
    } else {
      throw InputError(field, field + ": unknown name '" + name +
                                  "': keep any of tp, pp, dp, mbs, schedule, comma-separated");
    }
  }
  return keep;
}

std::string_view StatusName(Candidate::Status status) {
  switch (status) {
    case Candidate::Status::kSolved:
      return "solved";
    case Candidate::Status::kDominated:
      return "dominated";
    case Candidate::Status::kNoMemory:
      return "no-memory";
    case Candidate::Status::kTooSlow:
      return "too-slow";
    case Candidate::Status::kTooLarge:
      return "too-large";
    case Candidate::Status::kNotReached:
      return "not-reached";
  }
  return "?";
}

schedule::Spec CandidateSpec(const TuneRequest& r, const TuneConfig& c) {
  schedule::Spec spec;
  spec.kind = c.kind;
  spec.stages = c.pp;
  spec.microbatches = Microbatches(r, c);
  spec.chunks = c.kind == schedule::Kind::kInterleaved ? c.chunks : 1;
  return spec;
}

void CheckTuneRequest(const TuneRequest& r) {
  const TuneConfig& c = r.current;
  RequireRange(
      r.gpus >= 1 && r.gpus <= physics::kMaxJobGpus, "TuneRequest::gpus",
      Format("must be 1..%lld (got %lld)", physics::kMaxJobGpus, static_cast<long long>(r.gpus)));
  RequireRange(c.tp >= 1 && c.pp >= 1 && c.dp >= 1 && c.microbatch_size >= 1,
               "TuneRequest::current", "needs TP, PP, DP and the microbatch size >= 1");
  RequireRange(std::int64_t{c.tp} * c.pp * c.dp == r.gpus, "TuneRequest::current",
               Format("must use the job's %lld GPUs: TP %d x PP %d x DP %d = %lld",
                      static_cast<long long>(r.gpus), c.tp, c.pp, c.dp,
                      static_cast<long long>(std::int64_t{c.tp} * c.pp * c.dp)));
  RequireRange(
      r.global_batch >= 1 && r.global_batch % (std::int64_t{c.dp} * c.microbatch_size) == 0,
      "TuneRequest::global_batch",
      Format("%d must be a multiple of DP %d x microbatch size %d: every pipeline gets "
             "the same number of microbatches",
             r.global_batch, c.dp, c.microbatch_size));
  RequireRange(r.gpus_per_node >= 1 && r.gpus_per_node <= physics::kMaxTp,
               "TuneRequest::gpus_per_node",
               Format("must be 1..%d (got %d)", physics::kMaxTp, r.gpus_per_node));
  RequireRange(c.tp <= r.gpus_per_node, "TuneRequest::current",
               Format("has TP %d over more than a node's %d GPUs; tensor parallelism across "
                      "nodes is not modelled (raise TuneRequest::gpus_per_node if a node has more)",
                      c.tp, r.gpus_per_node));
  RequireRange(r.max_chunks >= 2 && r.max_chunks <= kMaxTuneChunks, "TuneRequest::max_chunks",
               Format("must be 2..%d (got %d)", kMaxTuneChunks, r.max_chunks));
  RequireRange(
      r.max_microbatch_size >= 1 && r.max_microbatch_size <= physics::kMaxMicrobatchSize,
      "TuneRequest::max_microbatch_size",
      Format("must be 1..%d (got %d)", physics::kMaxMicrobatchSize, r.max_microbatch_size));
  RequireRange(std::isfinite(r.memory_margin) && r.memory_margin >= 0 && r.memory_margin <= 0.9,
               "TuneRequest::memory_margin",
               Format("must be 0..0.9, a fraction of GPU memory (got %g)", r.memory_margin));
  RequireRange(std::isfinite(r.slowdown) && r.slowdown >= 0 && r.slowdown <= 1,
               "TuneRequest::slowdown",
               Format("must be 0..1, a fraction of today's iteration time (got %g)", r.slowdown));
  RequireRange(std::isfinite(r.envelope_span) && r.envelope_span >= 0 && r.envelope_span <= 1,
               "TuneRequest::envelope_span",
               Format("must be 0..1, a fraction of the target time (got %g)", r.envelope_span));
  RequireRange(r.grid_points >= 1 && r.grid_points <= kMaxTuneGridPoints,
               "TuneRequest::grid_points",
               Format("must be 1..%d (got %d)", kMaxTuneGridPoints, r.grid_points));
  RequireRange(r.max_instructions >= 2 && r.max_instructions <= kMaxTuneInstructions,
               "TuneRequest::max_instructions",
               Format("must be 2..%d (got %d)", kMaxTuneInstructions, r.max_instructions));
  RequireRange(std::isfinite(r.dp_gbps) && r.dp_gbps > 0 && r.dp_gbps <= 10'000,
               "TuneRequest::dp_gbps",
               Format("must be > 0 and at most 10000 GB/s (got %g)", r.dp_gbps));
  RequireRange(std::isfinite(r.p2p_gbps) && r.p2p_gbps > 0 && r.p2p_gbps <= 10'000,
               "TuneRequest::p2p_gbps",
               Format("must be > 0 and at most 10000 GB/s (got %g)", r.p2p_gbps));
  model::CheckPBlock(r.gpu.p_block_w, "GpuSpec::p_block_w");
  try {
    CheckConfig(r, c);
  } catch (const InputError& e) {
    throw InputError(e.field(),
                     "the current configuration (" + ConfigText(c) + ") is not valid: " + e.what());
  }
}

std::vector<TuneConfig> TuneCandidates(const TuneRequest& r) {
  CheckTuneRequest(r);
  const TuneConfig& now = r.current;
  const TuneKeep& k = r.keep;
  std::vector<TuneConfig> out = {now};
  const int layers = r.workload.model.total_layers();
  for (int tp : Divisors(r.gpus, r.gpus_per_node)) {
    if (k.tp && tp != now.tp) continue;
    for (int pp : Divisors(r.gpus / tp, layers)) {
      if (k.pp && pp != now.pp) continue;
      const std::int64_t dp64 = r.gpus / tp / pp;
      if (dp64 > physics::kMaxDp || r.global_batch % dp64 != 0) continue;
      const int dp = static_cast<int>(dp64);
      if (k.dp && dp != now.dp) continue;
      const int per_pipeline = r.global_batch / dp;
      for (int mbs = 1; mbs <= std::min(r.max_microbatch_size, per_pipeline); ++mbs) {
        if (per_pipeline % mbs != 0) continue;
        if (k.microbatch_size && mbs != now.microbatch_size) continue;
        const int microbatches = per_pipeline / mbs;
        std::vector<std::pair<schedule::Kind, int>> kinds = {{schedule::Kind::kGPipe, 1},
                                                             {schedule::Kind::k1F1B, 1}};
        if (pp >= 2 && microbatches % pp == 0) {
          for (int v = 2; v <= r.max_chunks; ++v) {
            if (layers % (pp * v) == 0) kinds.emplace_back(schedule::Kind::kInterleaved, v);
          }
        }
        for (const auto& [kind, chunks] : kinds) {
          if (k.schedule && (kind != now.kind || chunks != now.chunks)) continue;
          const TuneConfig c{tp, pp, dp, mbs, kind, chunks};
          if (c == now || !IsValid(r, c)) continue;
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

double TuneResult::SavingPct(const JobPoint& p) const {
  const double e0 = current().max_clock.energy_j;
  return e0 > 0 ? 100 * (1 - p.energy_j / e0) : 0;
}

JobPoint ToJobPoint(const Candidate& c, const solver::FrontierPoint& p, double p_block_w) {
  return Job(c, p.time_s, p.energy_j, p_block_w);
}

model::Profile CandidateProfile(const TuneRequest& r, const TuneConfig& c) {
  const physics::WorkloadSpec spec = Workload(r, c, /*virtual_stages=*/true);
  const physics::SimulatedWorkload w = physics::SimulateWorkload(spec, r.gpu);
  const model::Profile simulated = physics::StampedProfile(w, r.gpu);
  const double send = SendSeconds(r, c);
  const double p_block = r.gpu.p_block_w;
  const int last = spec.parallel.pp - 1;
  model::Profile out;
  out.metadata = simulated.metadata;
  out.metadata.method +=
      Format("; pipeline sends of %.3g ms at %g GB/s at P_block added", send * 1e3, r.p2p_gbps);
  for (int stage : simulated.stages()) {
    for (model::Kind kind : {model::Kind::kForward, model::Kind::kBackward}) {
      // The last virtual stage's forwards and the first's backwards send nothing.
      const bool sends = kind == model::Kind::kForward ? stage != last : stage != 0;
      for (model::ClockPoint p : simulated.Points(stage, kind)) {
        if (sends) {
          p.time_s += send;
          p.energy_j += send * p_block;
        }
        out.Add(stage, kind, p, "the tuned candidate's profile");
      }
    }
  }
  return out;
}

TuneResult Tune(const TuneRequest& r) {
  const auto started = std::chrono::steady_clock::now();
  TuneResult out;
  out.request = r;
  out.p_block_w = r.gpu.p_block_w;
  const std::vector<TuneConfig> configs = TuneCandidates(r);
  out.candidates.resize(configs.size());
  std::vector<schedule::Schedule> schedules(configs.size());
  std::vector<model::Profile> profiles(configs.size());
  std::vector<std::optional<PipelineBound>> bounds(configs.size());
  std::vector<bool> prepared(configs.size(), false);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (Cancelled(r)) throw model::Cancelled("tune was cancelled");
    out.candidates[i].config = configs[i];
    prepared[i] = Prepare(r, out.p_block_w, /*gated=*/true, &out.candidates[i], &schedules[i],
                          &profiles[i], &bounds[i]);
    if (out.candidates[i].status == Candidate::Status::kTooLarge) {
      schedules[i] = {};  // only its bound is needed (at the end)
      profiles[i] = {};
    }
  }
  Candidate& current = out.candidates[0];
  // A size over the limit is the user's to raise; out for memory, the
  // current configuration is solved anyway (the user runs it: an estimate
  // that disagrees with a running job is the estimate's fault).
  Require(current.status != Candidate::Status::kTooLarge, "TuneRequest::max_instructions",
          Format("the current configuration has %d instructions, more than "
                 "TuneRequest::max_instructions %d: raise it",
                 current.instructions, r.max_instructions));
  if (!prepared[0]) {
    prepared[0] = Prepare(r, out.p_block_w, /*gated=*/false, &current, &schedules[0], &profiles[0],
                          &bounds[0]);
  }
  out.target_s = (1 + r.slowdown) * current.max_clock.time_s;
  out.envelope_end_s = (1 + r.envelope_span) * out.target_s;

  // Search order: the current configuration, then by the bound at the
  // target (at the envelope's end for those that cannot reach the target).
  std::vector<int> order;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (!prepared[i]) continue;
    Candidate& c = out.candidates[i];
    c.bound_j = JobBound(c, *bounds[i], out.target_s, out.p_block_w);
    if (i > 0 && c.status != Candidate::Status::kTooLarge) order.push_back(static_cast<int>(i));
  }
  auto key = [&](int i) {
    const Candidate& c = out.candidates[i];
    return std::isfinite(c.bound_j) ? c.bound_j
                                    : JobBound(c, *bounds[i], out.envelope_end_s, out.p_block_w);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  order.insert(order.begin(), 0);

  std::vector<EnvelopePoint> found;
  const int of = static_cast<int>(order.size());
  for (int k = 0; k < of; ++k) {
    const int i = order[k];
    Candidate& c = out.candidates[i];
    if (k > 0 && Cancelled(r)) {
      out.cancelled = true;
      break;
    }
    if (i != 0) {
      if (c.fastest_s > out.envelope_end_s * (1 + kTimeTolerance)) {
        c.status = Candidate::Status::kTooSlow;
        continue;
      }
      if (r.prune && !CanImprove(c, *bounds[i], found, out.envelope_end_s, out.p_block_w)) {
        c.status = Candidate::Status::kDominated;
        continue;
      }
    }
    if (r.progress) r.progress(k + 1, of, ConfigText(c.config), -1);
    solver::Options options;
    options.p_block_w = out.p_block_w;
    const double end_pipeline_s = out.envelope_end_s - c.allreduce_s;
    const double fastest_pipeline_s = c.fastest_s - c.allreduce_s;
    options.resolution_s = std::max(1e-6, (end_pipeline_s - fastest_pipeline_s) / r.grid_points);
    options.max_deadline_s = end_pipeline_s;
    options.extra_deadlines_s.push_back(out.target_s - c.allreduce_s);
    options.cancel = r.cancel;
    const auto solve_started = std::chrono::steady_clock::now();
    try {
      c.frontier = solver::SolveFrontier(schedules[i], profiles[i], options);
    } catch (const model::Cancelled&) {
      if (i == 0) throw;
      out.cancelled = true;
      break;
    }
    c.solve_seconds = Seconds(solve_started);
    c.status = Candidate::Status::kSolved;
    ++out.solved;
    for (std::size_t p = 0; p < c.frontier.points.size(); ++p) {
      const JobPoint job = ToJobPoint(c, c.frontier.points[p], out.p_block_w);
      if (job.time_s > out.envelope_end_s * (1 + kTimeTolerance)) continue;
      found.push_back({job, i, static_cast<int>(p)});
      if (job.time_s <= out.target_s * (1 + kTimeTolerance) &&
          (!c.at_target || job.energy_j < c.at_target->energy_j)) {
        c.at_target = job;
        c.at_target_point = static_cast<int>(p);
      }
    }
    if (r.progress) r.progress(k + 1, of, ConfigText(c.config), c.solve_seconds);
  }
  out.envelope = ParetoFilter(found);
  for (std::size_t i = 1; i < configs.size(); ++i) {
    Candidate& c = out.candidates[i];
    if (c.status != Candidate::Status::kTooLarge) continue;
    c.might_improve = c.fastest_s <= out.envelope_end_s * (1 + kTimeTolerance) &&
                      CanImprove(c, *bounds[i], out.envelope, out.envelope_end_s, out.p_block_w);
    out.too_large_might_improve += c.might_improve;
  }
  Require(current.at_target.has_value(), "TuneRequest::current",
          "internal: the current configuration has no plan within its own full-clock time");
  out.clocks_only = {*current.at_target, 0, current.at_target_point};
  out.best = out.clocks_only;
  for (const EnvelopePoint& p : out.envelope) {
    if (p.job.time_s <= out.target_s * (1 + kTimeTolerance) &&
        p.job.energy_j < out.best.job.energy_j) {
      out.best = p;
    }
  }
  for (const Candidate& c : out.candidates) {
    if (c.status != Candidate::Status::kTooLarge || !std::isfinite(c.bound_j)) continue;
    out.too_large_gain_bound_pct = std::max(
        out.too_large_gain_bound_pct, out.SavingPct({0, c.bound_j}) - out.SavingPct(out.best.job));
  }
  out.seconds = Seconds(started);
  return out;
}

}  // namespace joulepipe::tune
