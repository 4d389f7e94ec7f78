#include "max_flow.hpp"

#include <algorithm>

namespace joulepipe::solver {

namespace {
// Residual capacities below this count as zero. Capacities are marginal
// energy costs in J/s (>= ~1e-3 when non-zero), so this is pure round-off.
constexpr double kResidualEpsilon = 1e-9;
}  // namespace

void FlowNetwork::Reset(int nodes) {
  n_ = nodes;
  built_ = false;
  reachable_from_ = -1;
  from_.clear();
  arcs_.clear();
  flow_.clear();
}

int FlowNetwork::AddArc(int u, int v, double capacity, double reverse) {
  built_ = false;
  reachable_from_ = -1;
  const int id = static_cast<int>(flow_.size());
  from_.push_back(u);
  from_.push_back(v);
  arcs_.push_back({v, capacity});
  arcs_.push_back({u, reverse});
  flow_.push_back(0);
  return id;
}

// Groups arc ids by tail node (CSR over `order_`) for the level graph walks.
void FlowNetwork::Build() {
  first_.assign(n_ + 1, 0);
  for (int u : from_) ++first_[u + 1];
  for (int v = 0; v < n_; ++v) first_[v + 1] += first_[v];
  order_.resize(from_.size());
  std::vector<int> fill(first_.begin(), first_.end() - 1);
  for (int a = 0; a < static_cast<int>(from_.size()); ++a) order_[fill[from_[a]]++] = a;
  built_ = true;
}

bool FlowNetwork::Levels(int s, int t) {
  level_.assign(n_, -1);
  std::vector<int>& queue = current_;  // reused as the BFS queue
  queue.clear();
  queue.push_back(s);
  level_[s] = 0;
  for (size_t head = 0; head < queue.size(); ++head) {
    const int u = queue[head];
    // Nodes at t's level or beyond cannot be on a shortest augmenting path.
    if (level_[t] >= 0 && level_[u] >= level_[t]) break;
    for (int k = first_[u]; k < first_[u + 1]; ++k) {
      const Arc& a = arcs_[order_[k]];
      if (a.residual > kResidualEpsilon && level_[a.to] < 0) {
        level_[a.to] = level_[u] + 1;
        queue.push_back(a.to);
      }
    }
  }
  return level_[t] >= 0;
}

// One augmenting path in the level graph, found by a depth-first walk with
// an explicit stack of arcs (path_): the walk is as deep as the path is long,
// which grows with the pipeline (a 100,000-microbatch job has paths of
// hundreds of thousands of nodes), so it must not recurse. Same order and
// same arithmetic as the recursive form: an arc that leads to a dead end is
// passed over by advancing its tail's current-arc pointer; a path that
// reaches t carries its bottleneck, and no pointer moves on success.
double FlowNetwork::Augment(int s, int t) {
  path_.clear();
  int u = s;
  while (u != t) {
    bool advanced = false;
    for (int& k = current_[u]; k < first_[u + 1]; ++k) {
      const int id = order_[k];
      const Arc& a = arcs_[id];
      if (a.residual <= kResidualEpsilon || level_[a.to] != level_[u] + 1) continue;
      path_.push_back(id);
      u = a.to;
      advanced = true;
      break;
    }
    if (advanced) continue;
    if (path_.empty()) return 0;  // s itself is a dead end: the phase is over
    // u is a dead end: retreat over the arc that led here and move its
    // tail past it.
    const int id = path_.back();
    path_.pop_back();
    u = from_[id];
    ++current_[u];
  }
  double pushed = 1e300;
  for (int id : path_) pushed = std::min(pushed, arcs_[id].residual);
  for (int id : path_) {
    arcs_[id].residual -= pushed;
    arcs_[id ^ 1].residual += pushed;
    flow_[id >> 1] += (id & 1) ? -pushed : pushed;
  }
  return pushed;
}

double FlowNetwork::MaxFlow(int s, int t) {
  if (!built_) Build();
  double total = 0;
  reachable_from_ = -1;
  while (Levels(s, t)) {
    current_.assign(first_.begin(), first_.end() - 1);
    while (true) {
      const double pushed = Augment(s, t);
      if (pushed <= 0) break;
      total += pushed;
    }
  }
  // The last BFS did not reach t, so it stopped nowhere early: the nodes it
  // levelled are exactly those reachable from s in the final residual.
  reachable_from_ = s;
  return total;
}

void FlowNetwork::Freeze(int arc) {
  reachable_from_ = -1;
  arcs_[2 * arc].residual = 0;
  arcs_[2 * arc + 1].residual = 0;
}

std::vector<char> FlowNetwork::Reachable(int s) {
  if (!built_) Build();
  if (reachable_from_ == s) {
    std::vector<char> seen(n_, 0);
    for (int v = 0; v < n_; ++v) seen[v] = level_[v] >= 0;
    return seen;
  }
  std::vector<char> seen(n_, 0);
  std::vector<int> stack{s};
  seen[s] = 1;
  while (!stack.empty()) {
    const int u = stack.back();
    stack.pop_back();
    for (int k = first_[u]; k < first_[u + 1]; ++k) {
      const Arc& a = arcs_[order_[k]];
      if (a.residual > kResidualEpsilon && !seen[a.to]) {
        seen[a.to] = 1;
        stack.push_back(a.to);
      }
    }
  }
  return seen;
}

}  // namespace joulepipe::solver
