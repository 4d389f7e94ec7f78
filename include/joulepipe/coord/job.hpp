// Job: the coordination policy for one training job's ranks, as a state
// machine with no I/O, no threads and no clock of its own (callers pass the
// time). Both front ends drive it: the embedded coordinator (rank 0 of the
// job) and `joulepipe serve` (HTTP, SQLite); neither re-implements a step.
//
//   registered ──(every rank registered)──> waiting for a profile
//       ──(profile set)──> ready to plan ──(SetPlan)──> planned
//                                        └─(SetPlanFailed)──> failed
//
// The profile may come before the ranks. Planning (solver::PlanPipeline,
// seconds to minutes) is the caller's to run, off any request thread:
// ready_to_plan() says when, PlanRequest() says what.
//
// Once planned, every data-parallel pipeline runs a frontier point: the
// intrinsic one (least energy within the all-max-clock time T) unless a
// straggler is known. Iteration reports (per rank: the time its pipeline
// work took, and its GPU energy) are gathered per iteration; an iteration is
// complete when every rank has reported it. Each complete iteration feeds
// the StragglerDetector (straggler.hpp); when it changes its verdict, the
// plans are chosen again with the Perseus rule (plan_choice.hpp): a plan
// switch, with a new plan version, a reason, the time and the predicted
// saving. Ranks run a switch from the next iteration boundary after they
// see it.
//
// Persistence is by replay: a store records the config, each rank, the
// profile text, the solved plan (Solved) and each switch; a new Job fed
// the same calls (RestorePlan for the solved plan and the switches)
// is in the same state, except the detector's window of recent iterations,
// which refills.
//
// Errors: model::InputError naming the field (JobConfig::dp_degree,
// RankInfo::pp_rank, IterationReport::time_s, ...) with the range and fix;
// JobStateError for a call the job's state does not allow (e.g. a profile
// after planning), which a service answers with 409.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "joulepipe/coord/iteration_window.hpp"
#include "joulepipe/coord/plan_choice.hpp"
#include "joulepipe/coord/straggler.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/plan.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/protocol/job.hpp"
#include "joulepipe/protocol/messages.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "joulepipe/solver/plan_pipeline.hpp"

namespace joulepipe::coord {

// The messages a job and its ranks send and receive, and their ranges, are
// the protocol's, one definition each (protocol/job.hpp,
// protocol/messages.hpp): the job's config, a rank's registration, its
// iteration report (and the rules on its numbers) and its plan, a plan
// switch, the job's status. They are named protocol::X everywhere.

// Instructions of one pipeline iteration (2 x stages x microbatches x
// chunks) a coordinated job may have: planning more takes hours, and a
// request must not make the service build it (pp 64 x 7,812 microbatches).
inline constexpr std::int64_t kMaxPipelineInstructions = 1'000'000;
// Iterations kept open for late reports; older incomplete ones are dropped.
inline constexpr int kOpenIterations = 16;

class JobStateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A request valid on its own that conflicts with the job as registered: a
// rank number or coordinate outside the job's shape, the same rank with other
// information, another rank at its coordinates, or a rank the job does not
// know. An InputError naming the field, that a service answers with 409 (the
// job's state decides, not the request's form), not 400.
class RankConflictError : public model::InputError {
 public:
  using model::InputError::InputError;
};

// Checks every field (and fills world_size when 0). Throws model::InputError.
void CheckJobConfig(protocol::JobConfig* config);

// The profile a coordinated job plans with: the one rule for a profile's
// rows (model::PlannableRows) that every front end applies. A profile
// measured in the job itself (the in-situ profiler), where a noisy sample or
// a GPU throttled by its power cap makes a row implausible and nobody can
// re-measure it, has such rows left out, not the whole plan, and rows
// measured faster than their highest clock planned at its time, each said
// in `notes` when given; any other profile with an implausible row is
// refused (model::InputError naming `name`), as `joulepipe plan` refuses it.
model::Profile PlannableProfile(const model::Profile& profile, const std::string& name,
                                std::vector<std::string>* notes);

// A profile with the one rule applied (PlannableProfile), ready for
// Job::SetProfile. The rule's cost grows with the rows, so a service
// prepares a profile outside the lock that guards its jobs and sets it
// under the lock in O(1).
struct PreparedProfile {
  std::shared_ptr<const model::Profile> plannable;
  std::vector<std::string> notes;  // bounded (model::kMaxRowNotes per rule, and a count)
  // What a store keeps and a replay reads: the profile's rows and metadata
  // as model::ProfileToCsv writes them, never the bytes it came in (an
  // upload's padding and comments are not kept).
  std::string csv;
};
// Throws what PlannableProfile throws; `job_id` names the job in messages.
PreparedProfile PrepareProfile(const model::Profile& profile, const std::string& job_id);

// A solved plan as a store keeps it: the frontier (every point's clocks),
// which point is the intrinsic plan, the all-max-clock time and P_block.
struct SolvedPlan {
  solver::Frontier frontier;
  int intrinsic = 0;
  double baseline_time_s = 0;
  double p_block_w = 0;
};

enum class JobPhase { kWaitingForRanks, kWaitingForProfile, kReadyToPlan, kPlanned, kFailed };
const char* JobPhaseName(JobPhase phase);  // "waiting_for_ranks", ..., "planned", "failed"

class Job {
 public:
  // Checks the config (CheckJobConfig).
  explicit Job(protocol::JobConfig config);

  const protocol::JobConfig& config() const { return config_; }
  JobPhase phase() const;
  const std::string& failure() const { return failure_; }

  // Returns true when the rank is new, false when it was registered with
  // identical info. Throws InputError for a rank or coordinate out of range
  // or a bad clock, and RankConflictError for the same rank with different
  // info or another rank at the same (dp, pp, tp) coordinates (the same rank
  // is checked right after its number, another rank's coordinates before
  // the clocks: a conflicting registration is a conflict whatever else it
  // says).
  bool RegisterRank(const protocol::RankInfo& info);
  int registered_ranks() const { return static_cast<int>(ranks_.size()); }
  bool all_ranks_registered() const { return registered_ranks() == config_.world_size; }
  const std::map<int, protocol::RankInfo>& ranks() const { return ranks_; }

  // The profile to plan with (replaces an earlier one), less the rows a
  // measurement inside the job cannot make plausible (PlannableProfile):
  // profile() and profile_notes() say what was kept and what was left out.
  // JobStateError once planned. profile_csv() is what a store keeps
  // (PreparedProfile::csv): a replay leaves out the same rows.
  void SetProfile(const model::Profile& profile);
  // The same with the rule applied beforehand (PrepareProfile): O(1).
  void SetProfile(PreparedProfile prepared);
  // One line per row left out, in words about the job (stage, instruction,
  // clock, what was measured); empty when every row was kept.
  const std::vector<std::string>& profile_notes() const { return profile_notes_; }
  // SetProfile's state rule alone (JobStateError once planned), for a caller
  // that checks before the profile is parsed.
  void CheckProfileMayChange() const;
  bool has_profile() const { return profile_ != nullptr; }
  const std::string& profile_csv() const { return profile_csv_; }
  const model::Profile* profile() const { return profile_.get(); }
  // The same profile, shared: a planner thread keeps it alive while it
  // solves without holding the caller's lock or copying the rows.
  std::shared_ptr<const model::Profile> shared_profile() const { return profile_; }

  // Every rank registered, a profile, not planned, not failed.
  bool ready_to_plan() const { return phase() == JobPhase::kReadyToPlan; }
  // What to plan: the job's schedule, P_block and grid.
  solver::PlanRequest PlanRequest() const;
  // Installs a solved plan (solver::PlanPipeline on profile() with
  // PlanRequest()): plan version 1, every pipeline on the chosen point.
  // JobStateError unless ready to plan (or failed: a retry).
  void SetPlan(const solver::PipelinePlan& plan, double now_unix_s);
  void SetPlanFailed(std::string message);

  // Restores a plan stored from Solved() and the switches recorded since
  // (in order; the first is version 1). Throws InputError naming
  // Job::RestorePlan for a plan or switches that do not fit this job.
  void RestorePlan(SolvedPlan plan, const std::vector<protocol::PlanSwitch>& switches);
  SolvedPlan Solved() const;  // JobStateError unless planned

  int plan_version() const { return switches_.empty() ? 0 : switches_.back().version; }
  // The rank's plan under the current version; nullopt before planning.
  // InputError for an unregistered rank.
  std::optional<protocol::RankPlan> PlanFor(int rank) const;
  const std::vector<protocol::PlanSwitch>& switches() const { return switches_; }
  const solver::Frontier* frontier() const { return planned_ ? &frontier_ : nullptr; }
  int intrinsic_point() const { return intrinsic_; }
  double baseline_time_s() const { return baseline_time_s_; }  // all max clocks

  // Records one rank's report. When it completes an iteration, the detector
  // sees it; a plan switch it causes is appended to switches() and returned.
  // Reports before planning, repeated reports (a client's retry) and
  // reports of iterations already completed or dropped are accepted and
  // ignored (nullopt). InputError for an unregistered rank, a bad time or
  // energy, and an iteration outside 0..10^12 or more than
  // kIterationWindow from the ranks' median (iteration_window.hpp: one
  // rank's nonsense cannot stall the job's straggler detection). At most
  // kOpenIterations are open; beyond, the one farthest from the median is
  // dropped.
  //
  // Numbering::kByServer is for iteration numbers the caller assigned
  // itself (Zeus's /result, where the service numbers each rank's entries
  // in order, many per request): no window (the numbers cannot be
  // nonsense) and, beyond kOpenIterations, the oldest open one is dropped.
  enum class Numbering { kByRank, kByServer };
  std::optional<protocol::PlanSwitch> ReportIteration(const protocol::IterationReport& report,
                                                      double now_unix_s,
                                                      Numbering numbering = Numbering::kByRank);
  std::int64_t completed_iterations() const { return completed_; }
  std::int64_t dropped_iterations() const { return dropped_; }
  const StragglerDetector* detector() const { return detector_ ? &*detector_ : nullptr; }
  // Per pipeline, the plan it runs now.
  const std::vector<int>& point_of_pipeline() const { return point_of_pipeline_; }

  // Everything a status page shows (no frontier mhz vectors).
  protocol::JobStatus Status() const;

 private:
  struct OpenIteration {
    std::vector<double> pipeline_time_s;  // max over the pipeline's ranks
    std::vector<char> reported;           // per rank
    int count = 0;
  };
  // Takes a solved frontier (SetPlan, RestorePlan): the candidate index, a
  // fresh detector, planned. Throws InputError for a bad intrinsic index
  // before changing anything.
  void Adopt(schedule::Schedule schedule, solver::Frontier frontier, int intrinsic,
             double baseline_time_s, double p_block_w);
  void Install(protocol::PlanSwitch s);
  protocol::PlanSwitch Decide(std::int64_t next_iteration, double now_unix_s);
  double PredictedSavingJ(const PlanChoice& choice) const;

  protocol::JobConfig config_;
  std::map<int, protocol::RankInfo> ranks_;
  std::map<std::int64_t, int> coordinate_owner_;   // (dp, pp, tp) key -> rank
  std::shared_ptr<const model::Profile> profile_;  // never changed once set
  std::string profile_csv_;
  std::vector<std::string> profile_notes_;
  std::string failure_;

  bool planned_ = false;
  schedule::Schedule schedule_;
  solver::Frontier frontier_;
  int intrinsic_ = 0;
  double baseline_time_s_ = 0;
  double p_block_w_ = 0;
  std::optional<CandidateIndex> index_;
  std::vector<int> point_of_pipeline_;
  std::vector<protocol::PlanSwitch> switches_;

  std::optional<StragglerDetector> detector_;
  IterationWindow window_;  // sized by Adopt
  std::map<std::int64_t, OpenIteration> open_;
  std::int64_t completed_ = 0, dropped_ = 0, last_completed_ = -1;
};

}  // namespace joulepipe::coord
