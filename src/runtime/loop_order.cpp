// InLoopOrder, SameOrder, ClocksText, ShapeText (loop_order.hpp has the contract).
#include "joulepipe/runtime/loop_order.hpp"

#include <algorithm>
#include <tuple>

#include "joulepipe/model/format.hpp"

namespace joulepipe::runtime {

namespace {

using Key = std::tuple<int, int, int>;  // kind, microbatch, chunk

Key KeyOf(const model::PlannedInstruction& p) {
  return {static_cast<int>(p.instruction.kind), p.instruction.microbatch, p.instruction.chunk};
}

Key KeyOf(const LoopStep& s) {
  return {static_cast<int>(s.kind), s.microbatch, s.chunk};
}

}  // namespace

bool InLoopOrder(const std::vector<model::PlannedInstruction>& plan,
                 const std::vector<LoopStep>& loop, std::vector<model::PlannedInstruction>& out,
                 std::string& why) {
  // Plan positions sorted by key: a loop step finds its instruction by binary
  // search, and a key used twice (by the loop or the plan) is a mismatch.
  std::vector<std::size_t> by_key(plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) by_key[i] = i;
  std::sort(by_key.begin(), by_key.end(),
            [&](std::size_t a, std::size_t b) { return KeyOf(plan[a]) < KeyOf(plan[b]); });
  bool same = plan.size() == loop.size();
  for (std::size_t i = 1; same && i < by_key.size(); ++i) {
    same = KeyOf(plan[by_key[i - 1]]) != KeyOf(plan[by_key[i]]);
  }
  std::vector<model::PlannedInstruction> ordered;
  std::vector<bool> used(plan.size(), false);
  if (same) ordered.reserve(loop.size());
  for (std::size_t i = 0; same && i < loop.size(); ++i) {
    const Key key = KeyOf(loop[i]);
    auto it = std::lower_bound(by_key.begin(), by_key.end(), key,
                               [&](std::size_t p, const Key& k) { return KeyOf(plan[p]) < k; });
    same = it != by_key.end() && KeyOf(plan[*it]) == key && !used[*it];
    if (same) {
      used[*it] = true;
      ordered.push_back(plan[*it]);
    }
  }
  if (!same) {
    why = "the schedule this rank ran (" + std::to_string(loop.size()) +
          " forwards/backwards) is not the one planned (" + std::to_string(plan.size()) +
          "): is the pipeline shape the same on every iteration?";
    return false;
  }
  out = std::move(ordered);
  return true;
}

bool SameOrder(const std::vector<model::PlannedInstruction>& plan,
               const std::vector<LoopStep>& loop) {
  if (plan.size() != loop.size()) return false;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (KeyOf(plan[i]) != KeyOf(loop[i])) return false;
  }
  return true;
}

std::string ClocksText(const std::vector<model::PlannedInstruction>& plan) {
  std::string out;
  for (const model::PlannedInstruction& p : plan) {
    if (!out.empty()) out += ' ';
    out += p.instruction.kind == model::Kind::kForward ? 'F' : 'B';
    out += std::to_string(p.instruction.microbatch);
    // Appended piece by piece: GCC 12 warns (-Wrestrict) on "." + string.
    if (p.instruction.chunk != 0) {
      out += '.';
      out += std::to_string(p.instruction.chunk);
    }
    out += '@';
    out += std::to_string(p.mhz);
    if (p.wait_mhz > 0) {
      out += "/wait@";
      out += std::to_string(p.wait_mhz);
    }
    if (!p.knobs.empty()) {
      out += '[';
      out += p.knobs;
      out += ']';
    }
  }
  return out;
}

std::string ShapeText(const model::StageShape& shape) {
  std::string out;
  if (shape.hold_mhz > 0) {
    out += "; waits held at ";
    out += std::to_string(shape.hold_mhz);
    out += " MHz";
  }
  if (shape.start_ramp_s > 0 && !shape.start_ramp_mhz.empty()) {
    out += "; start ramp " + model::Format("%g", shape.start_ramp_s) + " s:";
    for (int mhz : shape.start_ramp_mhz) {
      out += ' ';
      out += std::to_string(mhz);
    }
    out += " MHz";
  }
  if (shape.stop_ramp_s > 0) out += "; stop ramp " + model::Format("%g", shape.stop_ramp_s) + " s";
  return out;
}

}  // namespace joulepipe::runtime
