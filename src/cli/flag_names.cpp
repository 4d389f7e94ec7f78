#include "flag_names.hpp"

#include <string_view>
#include <utility>

namespace joulepipe::cli {

namespace {

// Library field -> joulepipe flag. A token is replaced only where it ends at
// a non-identifier character, so "JobSpec::stall_s" never matches inside
// "JobSpec::stall_seconds". Where a flag's unit differs from the field's
// (resolution_s vs --resolution-ms), library messages quote values with
// their unit, so the message stays true under either name.
constexpr std::pair<std::string_view, std::string_view> kFlagNames[] = {
    // schedule::Spec
    {"Spec::kind", "--schedule"},
    {"Spec::stages", "--stages"},
    {"Spec::microbatches", "--microbatches"},
    {"Spec::chunks", "--chunks"},
    // task calls (solver::PlanRequest, sim::SimulateRequest, ...)
    {"PlanRequest::p_block_w", "--p-block"},
    {"PlanRequest::slowdown", "--slowdown"},
    {"PlanRequest::resolution_s", "--resolution-ms"},
    {"PlanRequest::max_plans", "--max-plans"},
    // physics: workload and simulated profiles

    // model: output directories and files

};

bool IdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string WithFlagNames(const std::string& message) {
  std::string out = message;
  for (const auto& [field, flag] : kFlagNames) {
    std::size_t at = out.find(field);
    while (at != std::string::npos) {
      const std::size_t end = at + field.size();
      const bool whole = (end == out.size() || !IdentifierChar(out[end])) &&
                         (at == 0 || (!IdentifierChar(out[at - 1]) && out[at - 1] != ':'));
      if (whole) {
        out.replace(at, field.size(), flag);
        at = out.find(field, at + flag.size());
      } else {
        at = out.find(field, end);
      }
    }
  }
  return out;
}

}  // namespace joulepipe::cli
