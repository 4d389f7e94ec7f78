// physics::InFlightChunks (the memory model's count of forwards whose
// activations a stage holds at its peak) against the schedules the planner
// and runtime execute (schedule::Build): walk each stage's order, +1 per
// forward, -1 per backward, and take the maximum.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "joulepipe/physics/memory.hpp"
#include "joulepipe/schedule/schedule.hpp"

namespace joulepipe {
namespace {

int PeakInFlight(const schedule::Schedule& s, int stage) {
  int live = 0, peak = 0;
  for (int node : s.stage_order[stage]) {
    live += s.nodes[node].kind == model::Kind::kForward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(MemoryInFlight, MatchesTheExecutedSchedules) {
  int checked = 0;
  for (const auto kind :
       {schedule::Kind::kGPipe, schedule::Kind::k1F1B, schedule::Kind::kInterleaved}) {
    for (int stages : {1, 2, 4, 8}) {
      for (int microbatches : {1, 3, 8, 12, 32}) {
        for (int chunks : {1, 2, 3}) {
          if ((kind == schedule::Kind::kInterleaved) != (chunks > 1)) continue;
          schedule::Spec spec{kind, stages, microbatches, chunks};
          // Megatron's interleaved schedule needs M to be a multiple of S.
          if (kind == schedule::Kind::kInterleaved && microbatches % stages != 0) continue;
          const schedule::Schedule built = schedule::Build(spec);
          physics::PipelineShape shape;
          shape.kind = kind == schedule::Kind::kGPipe  ? physics::PipelineShape::Kind::kGPipe
                       : kind == schedule::Kind::k1F1B ? physics::PipelineShape::Kind::k1F1B
                                                       : physics::PipelineShape::Kind::kInterleaved;
          shape.microbatches = microbatches;
          shape.chunks = chunks;
          for (int stage = 0; stage < stages; ++stage) {
            EXPECT_EQ(physics::InFlightChunks(shape, stages, stage), PeakInFlight(built, stage))
                << schedule::KindName(kind) << " S=" << stages << " M=" << microbatches
                << " V=" << chunks << " stage " << stage;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 150);
}

}  // namespace
}  // namespace joulepipe
