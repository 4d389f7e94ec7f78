// Options beyond the SM clock (issue 15, item 5): a forward or backward of a
// stage made of partitions (e.g. Kareus's overlap partitions of a layer),
// each of which has its own knobs (an overlap configuration, a kernel
// choice) and is profiled at every (clock, knobs) pair. Composing them gives
// the stage's options: one SM clock for the whole instruction (the clock is
// set per instruction), a knob setting per partition.
//
// Compose, per clock present in every partition: the sums of one option per
// partition (times add, energies add: the partitions run one after another),
// kept only where no other sum at any clock is as fast and as cheap (a Pareto
// filter). Exact: a sum that includes a dominated partial sum is dominated
// by the same sum with the dominating one, so filtering after each
// partition loses nothing. The result is what a planner chooses among: each
// option one (clock, knobs) tuple.
#pragma once

#include <string>
#include <vector>

namespace joulepipe::model {

// One profiled configuration of one partition.
struct PartitionOption {
  int mhz = 0;
  std::string knobs;  // the partition's knob setting, e.g. "overlap=2"
  double time_s = 0;
  double energy_j = 0;
};

// One option of the composed instruction.
struct ComposedOption {
  int mhz = 0;
  std::vector<std::string> knobs;  // one per partition, in partition order
  double time_s = 0;
  double energy_j = 0;
};

// Partitions in execution order, each its profiled options. Returns the
// Pareto set, ascending time (strictly descending energy). Throws InputError
// naming the partition on an empty partition, a non-finite or negative
// figure, or no clock that every partition was profiled at.
std::vector<ComposedOption> ComposePartitions(
    const std::vector<std::vector<PartitionOption>>& partitions);

}  // namespace joulepipe::model
