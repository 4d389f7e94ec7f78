#include "joulepipe/coord/job.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/profile_rows.hpp"

namespace joulepipe::coord {

namespace {

using model::Format;
using model::InputError;
using model::Require;

void RequireInJob(bool ok, const char* field, const std::string& message) {
  if (!ok) throw RankConflictError(field, message);
}

void CheckDegree(int value, const char* field) {
  Require(value >= 1 && value <= protocol::kMaxDegree, field,
          Format("%s must be 1..%d (got %d)", field, protocol::kMaxDegree, value));
}

bool PrintableId(const std::string& id) {
  // '/' would split a path, '%' start an escape, '?' a query and '#' a
  // fragment in one, and "." and ".." are the path's own segments (a client
  // or proxy removes them): an id is a path segment as it is, with no
  // escaping needed but '+' in a query.
  if (id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return c > ' ' && c < 127 && c != '/' && c != '%' && c != '?' && c != '#';
  });
}

std::int64_t CoordinateKey(const protocol::JobConfig& c, const protocol::RankInfo& r) {
  return (std::int64_t{r.dp_rank} * c.pp_degree + r.pp_rank) * c.tp_degree + r.tp_rank;
}

}  // namespace

const char* JobPhaseName(JobPhase phase) {
  switch (phase) {
    case JobPhase::kWaitingForRanks:
      return "waiting_for_ranks";
    case JobPhase::kWaitingForProfile:
      return "waiting_for_profile";
    case JobPhase::kReadyToPlan:
      return "ready_to_plan";
    case JobPhase::kPlanned:
      return "planned";
    case JobPhase::kFailed:
      return "failed";
  }
  return "unknown";
}

void CheckJobConfig(protocol::JobConfig* c) {
  Require(
      !c->job_id.empty() && c->job_id.size() <= protocol::kMaxJobIdLength && PrintableId(c->job_id),
      "JobConfig::job_id",
      Format("JobConfig::job_id must be 1..%zu printable characters without spaces, '/', "
             "'%%', '?' or '#', and not '.' or '..' (got %zu characters%s)",
             protocol::kMaxJobIdLength, c->job_id.size(),
             c->job_id.size() <= protocol::kMaxJobIdLength
                 ? (": '" + model::ExcerptText(c->job_id) + "'").c_str()
                 : ""));
  CheckDegree(c->pp_degree, "JobConfig::pp_degree");
  CheckDegree(c->dp_degree, "JobConfig::dp_degree");
  CheckDegree(c->tp_degree, "JobConfig::tp_degree");
  const std::int64_t world = std::int64_t{c->pp_degree} * c->dp_degree * c->tp_degree;
  model::RequireConsistent(
      world <= protocol::kMaxWorldSize, "JobConfig::world_size",
      Format("pp x dp x tp = %lld ranks; a job has at most %lld", static_cast<long long>(world),
             static_cast<long long>(protocol::kMaxWorldSize)));
  if (c->world_size == 0) c->world_size = world;
  model::RequireConsistent(
      c->world_size == world, "JobConfig::world_size",
      Format("JobConfig::world_size must be pp_degree x dp_degree x tp_degree = %d x %d x %d "
             "= %lld (got %lld)",
             c->pp_degree, c->dp_degree, c->tp_degree, static_cast<long long>(world),
             static_cast<long long>(c->world_size)));
  Require(c->spec.stages == c->pp_degree, "Spec::stages",
          Format("the schedule has %d stages but JobConfig::pp_degree is %d; they are the same "
                 "number",
                 c->spec.stages, c->pp_degree));
  solver::PlanRequest request;
  request.spec = c->spec;
  request.p_block_w = c->p_block_w;
  request.resolution_s = c->resolution_s;
  request.slowdown = c->slowdown;
  solver::CheckPlanRequest(request);
  // Impossible shapes (e.g. interleaved M not a multiple of S), without
  // building the schedule: a request thread calls this.
  schedule::CheckSpec(c->spec);
  const std::int64_t instructions =
      std::int64_t{2} * c->spec.stages * c->spec.microbatches * c->spec.chunks;
  model::RequireConsistent(
      instructions <= kMaxPipelineInstructions, "Spec::microbatches",
      Format("the schedule has %lld instructions per pipeline iteration (2 x %d stages x %d "
             "microbatches x %d chunks); a coordinated job has at most %lld: use fewer "
             "microbatches",
             static_cast<long long>(instructions), c->spec.stages, c->spec.microbatches,
             c->spec.chunks, static_cast<long long>(kMaxPipelineInstructions)));
  Require(
      c->gpu.size() <= 256, "JobConfig::gpu",
      Format("JobConfig::gpu is a GPU name of at most 256 characters (got %zu)", c->gpu.size()));
  Require(c->metadata.size() <= protocol::kMaxMetadataLength, "JobConfig::metadata",
          Format("JobConfig::metadata is at most %zu characters (got %zu)",
                 protocol::kMaxMetadataLength, c->metadata.size()));
  CheckStragglerOptions(c->straggler);
}

Job::Job(protocol::JobConfig config) : config_(std::move(config)) {
  CheckJobConfig(&config_);
}

JobPhase Job::phase() const {
  if (planned_) return JobPhase::kPlanned;
  if (!failure_.empty()) return JobPhase::kFailed;
  if (!all_ranks_registered()) return JobPhase::kWaitingForRanks;
  if (!profile_) return JobPhase::kWaitingForProfile;
  return JobPhase::kReadyToPlan;
}

bool Job::RegisterRank(const protocol::RankInfo& r) {
  const protocol::JobConfig& c = config_;
  // A number or coordinate outside the job's shape is valid on its own and
  // conflicts only with the job as registered: a RankConflictError (409).
  RequireInJob(r.rank >= 0 && r.rank < c.world_size, "RankInfo::rank",
               Format("RankInfo::rank must be 0..%lld for a job of %lld ranks (got %d)",
                      static_cast<long long>(c.world_size - 1),
                      static_cast<long long>(c.world_size), r.rank));
  const auto known = ranks_.find(r.rank);
  if (known != ranks_.end()) {
    if (known->second == r) return false;
    const protocol::RankInfo& k = known->second;
    throw RankConflictError(
        "RankInfo::rank",
        Format("rank %d is already registered with job %s with other information (dp %d, pp %d, "
               "tp %d, %zu clocks; given dp %d, pp %d, tp %d, %zu clocks); a restarted job "
               "registers as a new job",
               r.rank, c.job_id.c_str(), k.dp_rank, k.pp_rank, k.tp_rank, k.available_mhz.size(),
               r.dp_rank, r.pp_rank, r.tp_rank, r.available_mhz.size()));
  }
  RequireInJob(r.dp_rank >= 0 && r.dp_rank < c.dp_degree, "RankInfo::dp_rank",
               Format("RankInfo::dp_rank must be 0..%d (dp_degree %d; got %d)", c.dp_degree - 1,
                      c.dp_degree, r.dp_rank));
  RequireInJob(r.pp_rank >= 0 && r.pp_rank < c.pp_degree, "RankInfo::pp_rank",
               Format("RankInfo::pp_rank must be 0..%d (pp_degree %d; got %d)", c.pp_degree - 1,
                      c.pp_degree, r.pp_rank));
  RequireInJob(r.tp_rank >= 0 && r.tp_rank < c.tp_degree, "RankInfo::tp_rank",
               Format("RankInfo::tp_rank must be 0..%d (tp_degree %d; got %d)", c.tp_degree - 1,
                      c.tp_degree, r.tp_rank));
  const std::int64_t key = CoordinateKey(c, r);
  const auto owner = coordinate_owner_.find(key);
  if (owner != coordinate_owner_.end()) {
    throw RankConflictError(
        "RankInfo::rank",
        Format("rank %d claims dp %d, pp %d, tp %d, which rank %d of job %s already holds", r.rank,
               r.dp_rank, r.pp_rank, r.tp_rank, owner->second, c.job_id.c_str()));
  }
  Require(r.available_mhz.size() <= protocol::kMaxFrequencies, "RankInfo::available_mhz",
          Format("RankInfo::available_mhz lists at most %zu clocks (got %zu)",
                 protocol::kMaxFrequencies, r.available_mhz.size()));
  for (int mhz : r.available_mhz) {
    Require(mhz >= 1 && mhz <= 10'000, "RankInfo::available_mhz",
            Format("RankInfo::available_mhz holds SM clocks in MHz, 1..10000 (got %d)", mhz));
  }
  ranks_.emplace(r.rank, r);
  coordinate_owner_.emplace(key, r.rank);
  return true;
}

void Job::CheckProfileMayChange() const {
  if (planned_) {
    throw JobStateError("job " + config_.job_id +
                        " is planned already; its profile cannot change (register a new job to "
                        "plan with another profile)");
  }
}

model::Profile PlannableProfile(const model::Profile& profile, const std::string& name,
                                std::vector<std::string>* notes) {
  model::RowRuleResult rows = model::PlannableRows(profile, name);
  if (notes != nullptr) notes->insert(notes->end(), rows.notes.begin(), rows.notes.end());
  return std::move(rows.profile);
}

PreparedProfile PrepareProfile(const model::Profile& profile, const std::string& job_id) {
  PreparedProfile out;
  out.plannable = std::make_shared<const model::Profile>(
      PlannableProfile(profile, "the profile of job " + job_id, &out.notes));
  out.csv = model::ProfileToCsv(profile);
  return out;
}

void Job::SetProfile(const model::Profile& profile) {
  CheckProfileMayChange();
  // Refused before anything changes: a profile the rule rejects leaves the
  // job as it was.
  SetProfile(PrepareProfile(profile, config_.job_id));
}

void Job::SetProfile(PreparedProfile prepared) {
  CheckProfileMayChange();
  profile_csv_ = std::move(prepared.csv);
  profile_ = std::move(prepared.plannable);
  profile_notes_ = std::move(prepared.notes);
  failure_.clear();  // a new profile is a new attempt
}

solver::PlanRequest Job::PlanRequest() const {
  solver::PlanRequest r;
  r.spec = config_.spec;
  r.p_block_w = config_.p_block_w;
  r.slowdown = config_.slowdown;  // the intrinsic plan: least energy within (1 + s) T
  r.resolution_s = config_.resolution_s;
  r.profile_name = "the profile of job " + config_.job_id;
  return r;
}

void Job::SetPlanFailed(std::string message) {
  if (planned_) throw JobStateError("job " + config_.job_id + " is planned already");
  failure_ = message.empty() ? "planning failed" : std::move(message);
}

void Job::SetPlan(const solver::PipelinePlan& plan, double now_unix_s) {
  const JobPhase p = phase();
  if (p != JobPhase::kReadyToPlan && p != JobPhase::kFailed) {
    throw JobStateError(
        Format("job %s is %s; a plan is installed once every rank is "
               "registered and a profile is set",
               config_.job_id.c_str(), JobPhaseName(p)));
  }
  if (plan.frontier.points.empty() || plan.chosen >= plan.frontier.points.size()) {
    throw JobStateError("the plan for job " + config_.job_id + " has no solved frontier");
  }
  Adopt(plan.schedule, plan.frontier, static_cast<int>(plan.chosen), plan.baseline.time_s,
        plan.p_block_w);
  protocol::PlanSwitch first;
  first.version = 1;
  first.iteration = 0;
  first.time_unix_s = now_unix_s;
  const solver::FrontierPoint& q = frontier_.points[intrinsic_];
  first.reason = Format(
      "initial plan: least energy within the all-max-clock time %.4f s "
      "(%.4f s, %.1f J per pipeline iteration)",
      baseline_time_s_, q.time_s, q.energy_j);
  first.slowdowns.assign(config_.dp_degree, 1.0);
  first.target_s = q.time_s;
  first.point_of_pipeline.assign(config_.dp_degree, intrinsic_);
  Install(std::move(first));
}

void Job::Adopt(schedule::Schedule schedule, solver::Frontier frontier, int intrinsic,
                double baseline_time_s, double p_block_w) {
  std::vector<Candidate> candidates;
  candidates.reserve(frontier.points.size());
  for (const solver::FrontierPoint& q : frontier.points)
    candidates.push_back({q.time_s, q.energy_j});
  CandidateIndex index(std::move(candidates), intrinsic);  // throws before anything changes
  schedule_ = std::move(schedule);
  frontier_ = std::move(frontier);
  intrinsic_ = intrinsic;
  baseline_time_s_ = baseline_time_s;
  p_block_w_ = p_block_w;
  index_.emplace(std::move(index));
  detector_.emplace(config_.dp_degree, config_.straggler);
  window_ = IterationWindow(static_cast<int>(config_.world_size));
  planned_ = true;
  failure_.clear();
}

void Job::Install(protocol::PlanSwitch s) {
  point_of_pipeline_ = s.point_of_pipeline;
  switches_.push_back(std::move(s));
}

SolvedPlan Job::Solved() const {
  if (!planned_) throw JobStateError("job " + config_.job_id + " is not planned yet");
  return {frontier_, intrinsic_, baseline_time_s_, p_block_w_};
}

void Job::RestorePlan(SolvedPlan plan, const std::vector<protocol::PlanSwitch>& switches) {
  const std::string where = "the stored frontier of job " + config_.job_id;
  schedule::Schedule schedule = schedule::Build(config_.spec);
  for (const solver::FrontierPoint& q : plan.frontier.points) {
    if (static_cast<int>(q.mhz.size()) != schedule.num_nodes()) {
      throw InputError("Job::RestorePlan",
                       Format("%s has a point of %zu clocks for a schedule of %d "
                              "instructions",
                              where.c_str(), q.mhz.size(), schedule.num_nodes()));
    }
  }
  const int points = static_cast<int>(plan.frontier.points.size());
  if (switches.empty() || switches.front().version != 1) {
    throw InputError("Job::RestorePlan", where + " comes without its initial plan (version 1)");
  }
  for (std::size_t k = 0; k < switches.size(); ++k) {
    const protocol::PlanSwitch& s = switches[k];
    if (s.version != static_cast<int>(k) + 1 ||
        static_cast<int>(s.point_of_pipeline.size()) != config_.dp_degree ||
        std::any_of(s.point_of_pipeline.begin(), s.point_of_pipeline.end(),
                    [&](int q) { return q < 0 || q >= points; })) {
      throw InputError("Job::RestorePlan",
                       Format("%s: plan switch %zu does not fit the job (version %d, %zu "
                              "pipelines)",
                              where.c_str(), k + 1, s.version, s.point_of_pipeline.size()));
    }
  }
  Adopt(std::move(schedule), std::move(plan.frontier), plan.intrinsic, plan.baseline_time_s,
        plan.p_block_w);
  std::vector<double> slowdowns = switches.back().slowdowns;
  slowdowns.resize(config_.dp_degree, 1.0);
  detector_->Seed(slowdowns);
  switches_ = switches;
  point_of_pipeline_ = switches_.back().point_of_pipeline;
}

std::optional<protocol::RankPlan> Job::PlanFor(int rank) const {
  const auto r = ranks_.find(rank);
  if (r == ranks_.end()) {
    throw RankConflictError("RankInfo::rank", Format("rank %d is not registered with job %s", rank,
                                                     config_.job_id.c_str()));
  }
  if (!planned_) return std::nullopt;
  protocol::RankPlan plan;
  plan.rank = rank;
  plan.pipeline = r->second.dp_rank;
  plan.stage = r->second.pp_rank;
  plan.version = plan_version();
  plan.point = point_of_pipeline_[plan.pipeline];
  plan.reason = switches_.back().reason;
  const solver::FrontierPoint& q = frontier_.points[plan.point];
  plan.predicted = model::Prediction{q.time_s, q.energy_j};
  for (int node : schedule_.stage_order[plan.stage]) {
    model::PlannedInstruction planned;
    planned.instruction = schedule_.nodes[node];
    planned.mhz = q.mhz[node];
    plan.instructions.push_back(std::move(planned));
  }
  plan.frequencies = protocol::ZeusFrequencies(plan.instructions);
  return plan;
}

std::optional<protocol::PlanSwitch> Job::ReportIteration(const protocol::IterationReport& r,
                                                         double now_unix_s, Numbering numbering) {
  if (ranks_.find(r.rank) == ranks_.end()) {
    throw RankConflictError("IterationReport::rank", Format("rank %d is not registered with job %s",
                                                            r.rank, config_.job_id.c_str()));
  }
  protocol::CheckIterationReport(r);
  if (!planned_) return std::nullopt;
  const bool by_rank = numbering == Numbering::kByRank;
  if (by_rank && !window_.Offer(r.rank, r.iteration)) {
    throw RankConflictError(
        "IterationReport::iteration",
        Format("IterationReport::iteration %lld is more than %lld iterations from job %s's "
               "current iteration, %lld (the median of its ranks' latest reports); every rank "
               "counts its iterations from 0 when training starts and reports each once",
               static_cast<long long>(r.iteration), static_cast<long long>(kIterationWindow),
               config_.job_id.c_str(), static_cast<long long>(window_.median())));
  }
  if (r.iteration <= last_completed_) return std::nullopt;
  if (!by_rank && !open_.empty() && r.iteration < open_.begin()->first &&
      static_cast<int>(open_.size()) >= kOpenIterations) {
    return std::nullopt;  // older than every iteration still open
  }
  OpenIteration& it = open_[r.iteration];
  if (it.reported.empty()) {
    it.reported.assign(static_cast<std::size_t>(config_.world_size), 0);
    it.pipeline_time_s.assign(config_.dp_degree, 0.0);
  }
  char& seen = it.reported[static_cast<std::size_t>(r.rank)];
  if (seen) return std::nullopt;  // a retry
  seen = 1;
  ++it.count;
  double& t = it.pipeline_time_s[ranks_.at(r.rank).dp_rank];
  t = std::max(t, r.time_s);
  // Too many open: the one farthest from the ranks' median will not
  // complete (a rank died or skipped, or reported nonsense); ties: the
  // oldest. Server-numbered: measured from the newest, so the oldest goes.
  while (static_cast<int>(open_.size()) > kOpenIterations) {
    const std::int64_t m = by_rank ? window_.median() : open_.rbegin()->first;
    auto farthest = open_.begin();
    std::int64_t worst = -1;
    for (auto k = open_.begin(); k != open_.end(); ++k) {
      const std::int64_t d = k->first > m ? k->first - m : m - k->first;
      if (d > worst) {
        worst = d;
        farthest = k;
      }
    }
    open_.erase(farthest);
    ++dropped_;
  }
  const auto found = open_.find(r.iteration);
  if (found == open_.end() || found->second.count < config_.world_size) return std::nullopt;

  // Complete: iterations before it that are still open will not be.
  const std::vector<double> measured = std::move(found->second.pipeline_time_s);
  for (auto k = open_.begin(); k != open_.end() && k->first <= r.iteration;) {
    if (k->first < r.iteration) ++dropped_;
    k = open_.erase(k);
  }
  last_completed_ = r.iteration;
  ++completed_;
  std::vector<double> predicted(config_.dp_degree);
  for (int p = 0; p < config_.dp_degree; ++p) {
    predicted[p] = frontier_.points[point_of_pipeline_[p]].time_s;
  }
  if (!detector_->Observe(measured, predicted)) return std::nullopt;
  protocol::PlanSwitch s = Decide(r.iteration + 1, now_unix_s);
  if (s.point_of_pipeline == point_of_pipeline_) return std::nullopt;
  Install(s);
  return s;
}

double Job::PredictedSavingJ(const PlanChoice& choice) const {
  // Each pipeline against the intrinsic plan through the same T'. A point's
  // energy covers its own time; through T' it also blocks (T' - t) on each
  // of its stages' GPUs: [E_i + Pb S (T' - t_i)] - [E_c + Pb S (T' - t_c)].
  const solver::FrontierPoint& intrinsic = frontier_.points[intrinsic_];
  const double stages = config_.pp_degree;
  double saving = 0;
  for (int c : choice.candidate_of_pipeline) {
    const solver::FrontierPoint& q = frontier_.points[c];
    saving += intrinsic.energy_j - q.energy_j + p_block_w_ * stages * (q.time_s - intrinsic.time_s);
  }
  return saving * config_.tp_degree;
}

protocol::PlanSwitch Job::Decide(std::int64_t next_iteration, double now_unix_s) {
  const std::vector<double>& slow = detector_->slowdowns();
  const PlanChoice choice = index_->Choose(slow);
  protocol::PlanSwitch s;
  s.version = plan_version() + 1;
  s.iteration = next_iteration;
  s.time_unix_s = now_unix_s;
  s.slowdowns = slow;
  s.target_s = choice.target_s;
  s.point_of_pipeline = choice.candidate_of_pipeline;
  s.predicted_saving_j = PredictedSavingJ(choice);
  std::vector<int> stragglers;
  for (int p = 0; p < config_.dp_degree; ++p) {
    if (slow[p] > 1) stragglers.push_back(p);
  }
  if (stragglers.empty()) {
    s.reason = "recovered: no pipeline straggles; every pipeline runs the initial plan";
  } else {
    std::string who;
    for (std::size_t k = 0; k < stragglers.size() && k < 8; ++k) {
      if (!who.empty()) who += ", ";
      who += Format("%d at %.2fx", stragglers[k], slow[stragglers[k]]);
    }
    if (stragglers.size() > 8) who += Format(" and %zu more", stragglers.size() - 8);
    int moved = 0;
    for (int p = 0; p < config_.dp_degree; ++p) moved += s.point_of_pipeline[p] != intrinsic_;
    s.reason = Format(
        "straggler: pipeline%s %s; T' = %.4f s; %d other pipeline(s) slow down, "
        "saving a predicted %.1f J per iteration",
        stragglers.size() > 1 ? "s" : "", who.c_str(), s.target_s, moved, s.predicted_saving_j);
  }
  return s;
}

protocol::JobStatus Job::Status() const {
  protocol::JobStatus s;
  s.config = config_;
  s.phase = JobPhaseName(phase());
  s.registered_ranks = registered_ranks();
  s.has_profile = has_profile();
  s.plan_version = plan_version();
  s.completed_iterations = completed_;
  s.dropped_iterations = dropped_;
  s.failure = failure_;
  s.profile_notes = profile_notes_;
  if (planned_) {
    protocol::JobStatus::Frontier& f = s.frontier.emplace();
    f.baseline_time_s = baseline_time_s_;
    f.max_clock_energy_j = frontier_.max_clock.energy_j;
    f.p_block_w = p_block_w_;
    f.intrinsic = intrinsic_;
    f.points.reserve(frontier_.points.size());
    for (const solver::FrontierPoint& q : frontier_.points)
      f.points.push_back({q.time_s, q.energy_j});
    s.point_of_pipeline = point_of_pipeline_;
    s.slowdowns = detector_->slowdowns();
    s.switches = switches_;
  }
  return s;
}

}  // namespace joulepipe::coord
