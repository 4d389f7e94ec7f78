// GridRounder: steps 3 and 4 of the frontier (rounding every grid deadline,
// refining the requested and sampled ones) on worker threads that run
// alongside the relaxation.
//
// Deadlines descend, as the crashing's makespan does, so a deadline can be
// rounded as soon as the relaxation has passed below it. The list is cut
// into blocks of consecutive deadlines that workers take in order, each
// following the relaxation with its own StepCursor (waiting on the StepFeed
// where it has caught up). A deadline to refine has three refinement starts
// (the rounding, greedy filling from the snapped relaxation, greedy filling
// from all-fastest), each polished and, for requested deadlines, searched;
// each start is a task that idle workers take before any new block. The
// all-fastest start needs no relaxation and is queued at once; the other
// two when the deadline's block has rounded it. The best start is chosen
// afterwards in that order, keeping an earlier one on ties. Every deadline's plan depends only on
// the deadline and its relaxed durations, so the points are the same for any number of workers, and
// the same as rounding the list in one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "activity_graph.hpp"
#include "joulepipe/solver/frontier.hpp"
#include "rounding.hpp"
#include "step_feed.hpp"

namespace joulepipe::solver {

struct GridRounding {
  // In the deadlines' order, consecutive repeats (same time and energy) dropped.
  std::vector<FrontierPoint> points;
  int rounded = 0;  // deadlines rounded
  int refined = 0;  // of which refined
  // The least-energy point of the grid's own deadlines (not a requested
  // one's), an index into points; -1 when none. What it is does not depend
  // on the deadlines a command requested (least_energy.hpp).
  int grid_least = -1;
};

// The frontier point of a position-space plan: clocks (and, with `knobs`,
// knob settings) per schedule node id, its exact time and energy.
FrontierPoint PointOf(const ActivityGraph& g, const RoundedPlan& plan,
                      const model::Profile::KnobTable& knobs);

class GridRounder {
 public:
  // All references must outlive the rounder. `deadlines` descend;
  // `requested` and `sampled` name some of them (requested ones get the
  // neighbourhood search too). With `knobs` the points name each node's knob.
  GridRounder(const ActivityGraph& g, const std::vector<double>& initial, StepFeed& feed,
              const std::vector<double>& deadlines, const std::set<double>& requested,
              const std::set<double>& sampled, const Options& options,
              model::Profile::KnobTable knobs);

  // One worker: takes tasks and blocks until none is left and no block is
  // being rounded (so the last refinement tasks are shared). Only the worker
  // with `report` calls Options::progress. Throws model::Cancelled when
  // Options::cancel is raised; any exception leaves the rounder stopped.
  void Work(bool report);
  // Makes every worker return soon (after an error elsewhere).
  void Stop();
  // After every Work call returned without an exception.
  GridRounding Result();
  // Deadlines to refine (the requested and sampled ones).
  size_t refinements() const { return jobs_.size(); }

 private:
  // A deadline to refine: its rounding, relaxed durations and the three
  // starts' results, filled by the tasks.
  struct Job {
    double deadline = 0;
    bool requested = false;
    std::vector<double> relaxed;
    RoundedPlan rounded;
    RoundedPlan candidates[3];
    bool valid[3] = {false, false, false};  // the start met the deadline
  };
  // One deadline's point in a block, or (job != nullptr) the deadline whose
  // point the refinement decides.
  struct Slot {
    FrontierPoint point;
    Job* job = nullptr;
  };
  void StopIfCancelled() const;
  void RoundBlock(size_t block, StepCursor& cursor);
  void RunTask(Job& job, int start);
  FrontierPoint ToPoint(const RoundedPlan& plan) const;

  const ActivityGraph& g_;
  const std::vector<double>& initial_;
  StepFeed& feed_;
  const std::vector<double>& deadlines_;
  const std::set<double>& requested_;
  const std::set<double>& sampled_;
  const Options& options_;
  const model::Profile::KnobTable knobs_;
  const size_t num_blocks_;

  std::vector<std::vector<Slot>> blocks_;  // per block, written by its worker
  std::deque<Job> jobs_;                   // one per deadline to refine
  std::map<double, Job*> job_of_;          // deadline -> its job
  std::atomic<bool> stopped_{false};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<Job*, int>> tasks_;  // (job, start)
  size_t next_block_ = 0;
  int blocks_in_progress_ = 0;
  size_t blocks_done_ = 0;
};

}  // namespace joulepipe::solver
