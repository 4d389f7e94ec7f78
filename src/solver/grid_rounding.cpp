#include "grid_rounding.hpp"

#include <utility>

#include "greedy.hpp"
#include "joulepipe/model/error.hpp"
#include "neighbourhood_search.hpp"
#include "polish.hpp"

namespace joulepipe::solver {

namespace {

// Deadlines per block: small enough that workers share the grid evenly and
// follow the relaxation closely, large enough that taking one is noise.
constexpr size_t kBlockDeadlines = 64;

bool SamePoint(const FrontierPoint& a, const FrontierPoint& b) {
  return a.time_s == b.time_s && a.energy_j == b.energy_j;
}

}  // namespace

GridRounder::GridRounder(const ActivityGraph& g, const std::vector<double>& initial, StepFeed& feed,
                         const std::vector<double>& deadlines, const std::set<double>& requested,
                         const std::set<double>& sampled, const Options& options,
                         model::Profile::KnobTable knobs)
    : g_(g),
      initial_(initial),
      feed_(feed),
      deadlines_(deadlines),
      requested_(requested),
      sampled_(sampled),
      options_(options),
      knobs_(std::move(knobs)),
      num_blocks_((deadlines.size() + kBlockDeadlines - 1) / kBlockDeadlines),
      blocks_(num_blocks_) {
  // Greedy filling from all-fastest needs no relaxation: queued now, it runs
  // while the workers would otherwise wait for the crashing to pass.
  for (double deadline : deadlines) {
    const bool is_requested = requested.count(deadline) > 0;
    if (!is_requested && sampled.count(deadline) == 0) continue;
    Job& job = jobs_.emplace_back();
    job.deadline = deadline;
    job.requested = is_requested;
    job_of_[deadline] = &job;
    tasks_.push_back({&job, 2});
  }
}

void GridRounder::Stop() {
  stopped_.store(true);
  // Taking the lock orders the store before any waiter's next predicate
  // check, so none can check, miss the flag and then sleep through the notify.
  {
    std::lock_guard<std::mutex> lock(mutex_);
  }
  changed_.notify_all();
}

void GridRounder::Work(bool report) {
  StepCursor cursor{0, initial_};
  try {
    if (report && options_.progress) {
      size_t done = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        done = blocks_done_;
      }
      options_.progress("rounding", static_cast<double>(done) / num_blocks_);
    }
    while (true) {
      StopIfCancelled();
      std::pair<Job*, int> task{nullptr, 0};
      size_t block = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] {
          return stopped_.load() || !tasks_.empty() || next_block_ < num_blocks_ ||
                 blocks_in_progress_ == 0;
        });
        if (stopped_.load()) return;
        if (!tasks_.empty()) {
          task = tasks_.front();
          tasks_.pop_front();
        } else if (next_block_ < num_blocks_) {
          block = next_block_++;
          ++blocks_in_progress_;
        } else {
          return;  // nothing queued, nothing being rounded that could queue more
        }
      }
      if (task.first != nullptr) {
        RunTask(*task.first, task.second);
        continue;
      }
      RoundBlock(block, cursor);
      size_t done = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --blocks_in_progress_;
        done = ++blocks_done_;
      }
      changed_.notify_all();
      if (report && options_.progress) {
        options_.progress("rounding", static_cast<double>(done) / num_blocks_);
      }
    }
  } catch (...) {
    Stop();
    throw;
  }
}

void GridRounder::StopIfCancelled() const {
  if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
    throw model::Cancelled("the frontier solve was cancelled");
  }
}

void GridRounder::RoundBlock(size_t block, StepCursor& cursor) {
  const size_t begin = block * kBlockDeadlines;
  const size_t end = std::min(deadlines_.size(), begin + kBlockDeadlines);
  std::vector<Slot>& slots = blocks_[block];
  slots.reserve(end - begin);
  Rounder rounder(g_, options_.p_block_w);
  RoundedPlan rounded;
  std::vector<double> relaxed;
  std::vector<std::pair<Job*, int>> queued;
  for (size_t i = begin; i < end; ++i) {
    if (stopped_.load(std::memory_order_relaxed)) return;
    StopIfCancelled();
    const double deadline = deadlines_[i];
    cursor.RelaxedAt(feed_, deadline, relaxed);
    rounder.Round(relaxed, deadline, rounded);
    if (const auto it = job_of_.find(deadline); it != job_of_.end()) {
      Job* job = it->second;
      job->relaxed = relaxed;
      job->rounded = rounded;
      queued.push_back({job, 0});
      queued.push_back({job, 1});
      slots.push_back({FrontierPoint{}, job});
      continue;
    }
    // Consecutive repeats are common on a fine grid; a slot whose point a
    // job decides is compared when the blocks are joined.
    FrontierPoint point = ToPoint(rounded);
    if (!slots.empty() && slots.back().job == nullptr && SamePoint(slots.back().point, point)) {
      continue;
    }
    slots.push_back({std::move(point), nullptr});
  }
  if (!queued.empty()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.insert(tasks_.end(), queued.begin(), queued.end());
    }
    changed_.notify_all();
  }
}

// One refinement start (see the header): 0 the rounding itself, 1 greedy
// filling from the snapped relaxation, 2 greedy filling from all-fastest;
// each, if it meets the deadline, polished and (requested deadlines)
// improved by the neighbourhood search.
void GridRounder::RunTask(Job& job, int start) {
  const double p_block = options_.p_block_w;
  const StopCheck stop{options_.cancel, &stopped_};
  RoundedPlan candidate;
  if (start == 0) {
    candidate = job.rounded;
  } else if (start == 1) {
    std::vector<int> snapped;
    Rounder(g_, p_block).Snap(job.relaxed, snapped);
    candidate = GreedyFill(g_, p_block, job.deadline, &snapped, stop);
  } else {
    candidate = GreedyFill(g_, p_block, job.deadline, nullptr, stop);
  }
  if (candidate.time_s <= job.deadline) {
    Polisher(g_, p_block).Polish(job.deadline, candidate, 12, stop);
    if (job.requested) NeighbourhoodSearch(g_, p_block, job.deadline, candidate, 2, stop);
    job.valid[start] = true;
  }
  job.candidates[start] = std::move(candidate);
}

FrontierPoint PointOf(const ActivityGraph& g, const RoundedPlan& plan,
                      const model::Profile::KnobTable& knobs) {
  FrontierPoint point{plan.time_s, plan.energy_j, {}, {}, {}};
  point.mhz.resize(g.n);
  if (knobs) {
    point.knob.resize(g.n);
    point.knob_names = knobs;
  }
  for (int p = 0; p < g.n; ++p) {
    const Option& option = g.hulls[g.hull_of[p]].pareto[plan.choice[p]];
    point.mhz[g.node_of[p]] = static_cast<std::uint16_t>(option.mhz);
    if (knobs) point.knob[g.node_of[p]] = static_cast<std::uint16_t>(option.knob);
  }
  return point;
}

FrontierPoint GridRounder::ToPoint(const RoundedPlan& plan) const {
  return PointOf(g_, plan, knobs_);
}

GridRounding GridRounder::Result() {
  GridRounding out;
  out.rounded = static_cast<int>(deadlines_.size());
  out.refined = static_cast<int>(refinements());
  for (std::vector<Slot>& slots : blocks_) {
    for (Slot& slot : slots) {
      if (slot.job != nullptr) {
        // The starts in order, an earlier one kept on ties.
        const Job& job = *slot.job;
        const RoundedPlan* best = &job.rounded;
        for (int start = 0; start < 3; ++start) {
          if (job.valid[start] && job.candidates[start].energy_j < best->energy_j) {
            best = &job.candidates[start];
          }
        }
        slot.point = ToPoint(*best);
      }
      if (out.points.empty() || !SamePoint(out.points.back(), slot.point)) {
        out.points.push_back(std::move(slot.point));
      }
      const int at = static_cast<int>(out.points.size()) - 1;
      const bool requested = slot.job != nullptr && slot.job->requested;
      if (!requested &&
          (out.grid_least < 0 || out.points[at].energy_j < out.points[out.grid_least].energy_j)) {
        out.grid_least = at;
      }
    }
  }
  return out;
}

}  // namespace joulepipe::solver
