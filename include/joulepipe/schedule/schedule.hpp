// Pipeline schedules: per-stage instruction order and the dependency DAG of one
// training iteration.
//
// Nodes are instructions. An edge u -> v means v cannot start before u ends:
//   * consecutive instructions on one stage (a GPU runs one at a time);
//   * forward of virtual stage k -> forward of virtual stage k+1 (same microbatch);
//   * backward of virtual stage k+1 -> backward of virtual stage k;
//   * forward -> backward of the last virtual stage (same microbatch).
// Virtual stage k = chunk * S + stage (plain schedules have one chunk, so k = stage).
// P2P transfer time is not modelled here (it is part of the profiled times).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "joulepipe/model/instruction.hpp"

namespace joulepipe::schedule {

enum class Kind { kGPipe, k1F1B, kInterleaved };

// "gpipe" | "1f1b" | "interleaved"
std::string_view KindName(Kind kind);
bool ParseKind(std::string_view text, Kind* kind);

struct Spec {
  Kind kind = Kind::k1F1B;
  int stages = 1;        // S >= 1
  int microbatches = 1;  // M >= 1
  int chunks = 1;        // V: 1 unless interleaved (>= 2 there)

  friend bool operator==(const Spec&, const Spec&) = default;
};

// The schedule's shape for people: "1f1b, 8 stages x 12 microbatches", with
// " x V chunks" appended when there are several chunks.
std::string ShapeText(const Spec& spec);

struct Schedule {
  Spec spec;
  std::vector<model::Instruction> nodes;       // node id -> instruction
  std::vector<std::vector<int>> stage_order;   // [stage] -> node ids in execution order
  std::vector<std::vector<int>> successors;    // node id -> node ids (deduplicated)
  std::vector<std::vector<int>> predecessors;  // node id -> node ids (deduplicated)
  std::vector<int> topological_order;          // every node once, dependencies first

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  // Node id of an instruction, or -1.
  int Find(const model::Instruction& instruction) const;
};

// Checks the counts every schedule needs: S >= 1 and M >= 1. Throws
// model::InputError naming Spec::stages or Spec::microbatches. Build makes the
// same check (after the kind); callers use it to check a spec before reading
// files.
void CheckStagesAndMicrobatches(const Spec& spec);

// Every check Build makes, without building: the kind, S >= 1, M >= 1, the
// chunks the kind needs, M a multiple of S for interleaved, at most 50
// million instructions. O(1); a service checks a request with it before
// doing any work. Throws model::InputError as Build does.
void CheckSpec(const Spec& spec);

// Builds the schedule. Throws model::InputError for impossible shapes (e.g.
// S < 1, M < 1, interleaved with V < 2 or M not a multiple of S), naming the
// Spec field to change in the message and as InputError::field()
// (e.g. "Spec::chunks").
//
// Orders:
//   gpipe       all forwards (microbatch 0..M-1), then all backwards (0..M-1).
//   1f1b        Megatron/DeepSpeed non-interleaved: warm-up forwards
//               min(S-s-1, M), then alternate forward/backward, then cool-down
//               backwards.
//   interleaved Megatron's interleaved 1F1B: M*V virtual microbatches per
//               stage, warm-up (S-s-1)*2 + (V-1)*S (all of them when M == S),
//               chunk of virtual microbatch k is (k mod S*V) / S (reversed for
//               backwards), microbatch is (k / (S*V)) * S + k mod S.
Schedule Build(const Spec& spec);

}  // namespace joulepipe::schedule
