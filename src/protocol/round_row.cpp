#include "joulepipe/protocol/round_row.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::protocol {

namespace {

// The slots, in order (the wire form: never reorder, only append).
enum Slot : std::size_t {
  kIteration,
  kPipelineTime,
  kProfileShared,
  kRunningVersion,
  kAnnouncedVersion,
  kPlanningFailed,
  kSweepLeft,
};
static_assert(kSweepLeft + 1 == kRoundRowFloats);

double Whole(std::span<const double> f, Slot slot, const char* member, double most) {
  const double v = f[slot];
  if (!std::isfinite(v) || v < 0 || v > most || v != std::floor(v)) {
    throw model::InputError(std::string("RoundRow::") + member,
                            model::Format("RoundRow::%s is %g; a whole number 0..%g was expected "
                                          "(ranks of one job must run one joulepipe version)",
                                          member, v, most));
  }
  return v;
}

}  // namespace

std::array<double, kRoundRowFloats> RoundRowToFloats(const RoundRow& row) {
  std::array<double, kRoundRowFloats> f{};
  f[kIteration] = static_cast<double>(row.iteration);
  f[kPipelineTime] = row.pipeline_time_s;
  f[kProfileShared] = row.profile_shared ? 1 : 0;
  f[kRunningVersion] = row.running_version;
  f[kAnnouncedVersion] = row.announced_version;
  f[kPlanningFailed] = row.planning_failed ? 1 : 0;
  f[kSweepLeft] = row.sweep_iterations_left;
  return f;
}

RoundRow RoundRowFromFloats(std::span<const double> f) {
  if (f.size() != kRoundRowFloats) {
    throw model::InputError("RoundRow",
                            model::Format("a round's row has %zu numbers; %zu were expected (ranks "
                                          "of one job must run one joulepipe version)",
                                          f.size(), kRoundRowFloats));
  }
  constexpr double kInt = std::numeric_limits<int>::max();
  RoundRow row;
  row.iteration =
      static_cast<std::int64_t>(Whole(f, kIteration, "iteration", 9.007199254740992e15));
  row.pipeline_time_s = f[kPipelineTime];
  if (!std::isfinite(row.pipeline_time_s) || row.pipeline_time_s < 0) {
    throw model::InputError("RoundRow::pipeline_time_s",
                            model::Format("RoundRow::pipeline_time_s is %g; seconds, 0 or more "
                                          "were expected",
                                          row.pipeline_time_s));
  }
  row.profile_shared = Whole(f, kProfileShared, "profile_shared", 1) != 0;
  row.running_version = static_cast<int>(Whole(f, kRunningVersion, "running_version", kInt));
  row.announced_version = static_cast<int>(Whole(f, kAnnouncedVersion, "announced_version", kInt));
  row.planning_failed = Whole(f, kPlanningFailed, "planning_failed", 1) != 0;
  row.sweep_iterations_left = static_cast<int>(Whole(f, kSweepLeft, "sweep_iterations_left", kInt));
  return row;
}

}  // namespace joulepipe::protocol
