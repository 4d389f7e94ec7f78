#include "joulepipe/protocol/messages.hpp"

#include <cmath>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::protocol {

using model::Format;
using model::InputError;

bool IterationTimeOk(double time_s) {
  return std::isfinite(time_s) && time_s > 0 && time_s <= kMaxIterationTimeS;
}

bool IterationEnergyOk(double energy_j) {
  return std::isfinite(energy_j) && energy_j >= 0 && energy_j <= kMaxIterationEnergyJ;
}

void CheckIterationTime(double time_s, const std::string& field, const std::string& name) {
  if (IterationTimeOk(time_s)) return;  // the message is built only for a refusal
  const std::string& shown = name.empty() ? field : name;
  throw InputError(field, Format("%s must be a time in seconds, > 0 and at most %g (got %g)",
                                 shown.c_str(), kMaxIterationTimeS, time_s));
}

void CheckIterationEnergy(double energy_j, const std::string& field, const std::string& name) {
  if (IterationEnergyOk(energy_j)) return;
  const std::string& shown = name.empty() ? field : name;
  throw InputError(field, Format("%s must be joules, 0..%g, or absent when not measured (got %g)",
                                 shown.c_str(), kMaxIterationEnergyJ, energy_j));
}

void CheckIterationReport(const IterationReport& r) {
  model::Require(
      r.iteration >= 0 && r.iteration <= kMaxIteration, "IterationReport::iteration",
      Format("IterationReport::iteration counts from 0, at most %lld (got %lld)",
             static_cast<long long>(kMaxIteration), static_cast<long long>(r.iteration)));
  CheckIterationTime(r.time_s, "IterationReport::time_s");
  if (r.energy_j) CheckIterationEnergy(*r.energy_j, "IterationReport::energy_j");
}

std::vector<std::pair<model::Kind, int>> ZeusFrequencies(
    const std::vector<model::PlannedInstruction>& instructions) {
  std::vector<std::pair<model::Kind, int>> out;
  out.reserve(instructions.size());
  for (const model::PlannedInstruction& p : instructions)
    out.emplace_back(p.instruction.kind, p.mhz);
  return out;
}

}  // namespace joulepipe::protocol
