#include "joulepipe/schedule/clock_plans.hpp"

#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/schedule/replay.hpp"

namespace joulepipe::schedule {

std::vector<std::uint16_t> UniformClocks(const Schedule& schedule, const model::Profile& profile,
                                         bool highest) {
  const int profile_stages = profile.num_stages();
  std::vector<std::uint16_t> mhz(schedule.num_nodes());
  for (int node = 0; node < schedule.num_nodes(); ++node) {
    const model::Instruction& ins = schedule.nodes[node];
    const auto& points = profile.Points(ProfileStage(schedule.spec, profile_stages, ins), ins.kind);
    if (points.empty()) {
      throw model::InputError("profile has no " + std::string(model::KindName(ins.kind)) +
                              " clocks for the row " + model::Describe(ins) +
                              " uses; profile every stage and kind the schedule runs");
    }
    // Points are sorted by clock, highest first.
    mhz[node] = static_cast<std::uint16_t>(highest ? points.front().mhz : points.back().mhz);
  }
  return mhz;
}

model::Plan PlanOfClocks(const Schedule& schedule, const std::vector<std::uint16_t>& mhz) {
  model::Plan plan;
  plan.schedule = std::string(KindName(schedule.spec.kind));
  plan.num_stages = schedule.spec.stages;
  plan.num_microbatches = schedule.spec.microbatches;
  plan.num_chunks = schedule.spec.chunks;
  plan.stages.resize(schedule.stage_order.size());
  for (std::size_t s = 0; s < schedule.stage_order.size(); ++s) {
    for (int node : schedule.stage_order[s]) {
      model::PlannedInstruction planned;
      planned.instruction = schedule.nodes[node];
      planned.mhz = mhz[node];
      plan.stages[s].push_back(std::move(planned));
    }
  }
  return plan;
}

}  // namespace joulepipe::schedule
