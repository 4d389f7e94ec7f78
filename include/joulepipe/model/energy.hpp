// The energy rule (docs/architecture.md, "Energy accounting"), defined once for the
// planner and the simulator:
//
//   E = sum_i e_i(f_i) + P_block * (G * T - sum_i t_i(f_i))
//
// over G GPUs (stages) that each live through an iteration of length T, with
// instructions i of time t_i and energy e_i at clock f_i. Every GPU is charged
// P_block for each second it is not running an instruction. The replay
// evaluator (schedule/replay.cpp) keeps its own, deliberately independent copy
// so that a test can check the two against each other.
#pragma once

#include <string>

namespace joulepipe::model {

// The blocking part of the rule: P_block * (G * T - sum_i t_i), the energy of
// `gpus` GPUs over an iteration of `iteration_s` seconds while they are not
// running instructions (which took `busy_s` seconds in all).
inline double BlockingEnergyJ(double busy_s, double gpus, double iteration_s, double p_block_w) {
  return p_block_w * (gpus * iteration_s - busy_s);
}

// Energy (J) of `gpus` GPUs over an iteration of `iteration_s` seconds whose
// instructions took `busy_s` seconds and `busy_energy_j` joules in all:
// busy_energy_j + BlockingEnergyJ(...). The arithmetic order is part of the
// contract: planner and simulator figures are reproducible bit for bit.
inline double IterationEnergyJ(double busy_energy_j, double busy_s, double gpus, double iteration_s,
                               double p_block_w) {
  return busy_energy_j + BlockingEnergyJ(busy_s, gpus, iteration_s, p_block_w);
}

// Blocking power must be a finite number of watts, 0 <= P_block <= 5,000 W
// (no GPU board draws more). Throws InputError naming `field` (e.g.
// "PlanRequest::p_block_w") with the plausible range and an example.
void CheckPBlock(double p_block_w, const std::string& field);

}  // namespace joulepipe::model
