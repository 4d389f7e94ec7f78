#include "activity_graph.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::solver {

ActivityGraph BuildActivityGraph(const schedule::Schedule& schedule, const model::Profile& profile,
                                 double p_block_w) {
  ActivityGraph g;
  g.n = schedule.num_nodes();
  g.num_stages = schedule.spec.stages;
  g.node_of = schedule.topological_order;
  std::vector<int> pos(g.n);
  for (int p = 0; p < g.n; ++p) pos[g.node_of[p]] = p;

  g.pred_begin.assign(g.n + 1, 0);
  g.succ_begin.assign(g.n + 1, 0);
  for (int p = 0; p < g.n; ++p) {
    const int node = g.node_of[p];
    g.pred_begin[p + 1] = g.pred_begin[p] + static_cast<int>(schedule.predecessors[node].size());
    g.succ_begin[p + 1] = g.succ_begin[p] + static_cast<int>(schedule.successors[node].size());
    for (int q : schedule.predecessors[node]) g.pred.push_back(pos[q]);
    for (int q : schedule.successors[node]) g.succ.push_back(pos[q]);
  }

  const int profile_stages = profile.num_stages();
  std::map<std::pair<int, model::Kind>, int> hull_index;
  g.hull_of.resize(g.n);
  for (int p = 0; p < g.n; ++p) {
    const model::Instruction& ins = schedule.nodes[g.node_of[p]];
    const int stage = schedule::ProfileStage(schedule.spec, profile_stages, ins);
    auto [it, inserted] =
        hull_index.try_emplace({stage, ins.kind}, static_cast<int>(g.hulls.size()));
    if (inserted) {
      const auto& points = profile.Points(stage, ins.kind);
      if (points.empty()) {
        throw model::InputError("profile has no " + std::string(model::KindName(ins.kind)) +
                                " clocks for stage " + std::to_string(stage) +
                                "; profile every stage and kind the schedule runs");
      }
      g.hulls.push_back(BuildCostHull(points, p_block_w));
    }
    g.hull_of[p] = it->second;
  }
  return g;
}

double EarliestFinish(const ActivityGraph& g, const std::vector<double>& d,
                      std::vector<double>& ef) {
  ef.resize(g.n);
  double makespan = 0;
  for (int p = 0; p < g.n; ++p) {
    double start = 0;
    for (int k = g.pred_begin[p]; k < g.pred_begin[p + 1]; ++k)
      start = std::max(start, ef[g.pred[k]]);
    ef[p] = start + d[p];
    makespan = std::max(makespan, ef[p]);
  }
  return makespan;
}

void LatestFinish(const ActivityGraph& g, const std::vector<double>& d, double deadline,
                  std::vector<double>& lf) {
  lf.resize(g.n);
  for (int p = g.n - 1; p >= 0; --p) {
    double finish = deadline;
    for (int k = g.succ_begin[p]; k < g.succ_begin[p + 1]; ++k) {
      const int q = g.succ[k];
      finish = std::min(finish, lf[q] - d[q]);
    }
    lf[p] = finish;
  }
}

}  // namespace joulepipe::solver
