// ActivityGraph: the schedule's DAG laid out for the solver's inner loops.
// Activities are numbered by topological position (0 = first), so a forward
// pass over 0..n-1 sees every predecessor before its successors; adjacency is
// stored as CSR arrays. Each activity knows its cost hull and physical stage.
#pragma once

#include <vector>

#include "joulepipe/model/profile.hpp"
#include "joulepipe/schedule/schedule.hpp"
#include "joulepipe/solver/cost_hull.hpp"

namespace joulepipe::solver {

struct ActivityGraph {
  int n = 0;
  int num_stages = 0;           // physical stages (GPUs): P_block is paid on each
  std::vector<int> node_of;     // position -> schedule node id
  std::vector<int> pred_begin;  // CSR, size n+1
  std::vector<int> pred;        // predecessor positions
  std::vector<int> succ_begin;  // CSR, size n+1
  std::vector<int> succ;        // successor positions
  std::vector<int> hull_of;     // position -> index into hulls
  std::vector<CostHull> hulls;  // one per (profiled stage, kind) used
};

// Throws model::InputError if the profile lacks a (stage, kind) needed.
ActivityGraph BuildActivityGraph(const schedule::Schedule& schedule, const model::Profile& profile,
                                 double p_block_w);

// Earliest finish of every activity for durations d; returns the makespan.
double EarliestFinish(const ActivityGraph& g, const std::vector<double>& d,
                      std::vector<double>& ef);

// Latest finish of every activity such that the makespan stays <= deadline.
void LatestFinish(const ActivityGraph& g, const std::vector<double>& d, double deadline,
                  std::vector<double>& lf);

}  // namespace joulepipe::solver
