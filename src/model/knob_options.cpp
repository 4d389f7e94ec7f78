#include "joulepipe/model/knob_options.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {

namespace {

// Ascending time, strictly descending energy: each kept option is faster
// than every cheaper one.
std::vector<ComposedOption> ParetoFilter(std::vector<ComposedOption> options) {
  std::sort(options.begin(), options.end(), [](const ComposedOption& a, const ComposedOption& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    if (a.energy_j != b.energy_j) return a.energy_j < b.energy_j;
    return a.mhz > b.mhz;  // ties: the higher clock, so the result is deterministic
  });
  std::vector<ComposedOption> out;
  for (ComposedOption& o : options) {
    if (out.empty() || o.energy_j < out.back().energy_j) out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

std::vector<ComposedOption> ComposePartitions(
    const std::vector<std::vector<PartitionOption>>& partitions) {
  if (partitions.empty()) throw InputError("ComposePartitions: no partitions to compose");
  // The clocks every partition has, and each partition's options by clock.
  std::vector<std::map<int, std::vector<const PartitionOption*>>> by_clock(partitions.size());
  std::set<int> common;
  for (std::size_t p = 0; p < partitions.size(); ++p) {
    if (partitions[p].empty()) {
      throw InputError("partition " + std::to_string(p) + " has no profiled options");
    }
    std::set<int> clocks;
    for (const PartitionOption& o : partitions[p]) {
      if (!std::isfinite(o.time_s) || o.time_s <= 0 || !std::isfinite(o.energy_j) ||
          o.energy_j < 0) {
        throw InputError("partition " + std::to_string(p) + " at " + std::to_string(o.mhz) +
                         " MHz (" + o.knobs + "): time must be > 0 s and energy >= 0 J");
      }
      by_clock[p][o.mhz].push_back(&o);
      clocks.insert(o.mhz);
    }
    if (p == 0) {
      common = clocks;
    } else {
      std::set<int> both;
      std::set_intersection(common.begin(), common.end(), clocks.begin(), clocks.end(),
                            std::inserter(both, both.begin()));
      common = std::move(both);
    }
  }
  if (common.empty()) {
    throw InputError(
        "no SM clock was profiled in every partition: profile each partition at the same "
        "clocks");
  }
  std::vector<ComposedOption> all;
  for (int mhz : common) {
    std::vector<ComposedOption> sums = {{mhz, {}, 0, 0}};
    for (std::size_t p = 0; p < partitions.size(); ++p) {
      std::vector<ComposedOption> next;
      next.reserve(sums.size() * by_clock[p][mhz].size());
      for (const ComposedOption& s : sums) {
        for (const PartitionOption* o : by_clock[p][mhz]) {
          ComposedOption c = s;
          c.knobs.push_back(o->knobs);
          c.time_s += o->time_s;
          c.energy_j += o->energy_j;
          next.push_back(std::move(c));
        }
      }
      sums = ParetoFilter(std::move(next));
    }
    all.insert(all.end(), sums.begin(), sums.end());
  }
  return ParetoFilter(std::move(all));
}

}  // namespace joulepipe::model
