// Instruction identity: one forward or backward of one microbatch on one
// pipeline stage (and, for interleaved schedules, one virtual model chunk).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace joulepipe::model {

enum class Kind : std::uint8_t { kForward = 0, kBackward = 1 };

// "forward" / "backward": the spelling used by profile CSVs and plan files.
std::string_view KindName(Kind kind);

// Parses "forward" / "backward". Returns false on anything else.
bool ParseKind(std::string_view text, Kind* kind);

struct Instruction {
  int stage = 0;       // physical pipeline stage (GPU), 0..S-1
  int chunk = 0;       // virtual model chunk on that stage, 0..V-1 (0 unless interleaved)
  int microbatch = 0;  // 0..M-1
  Kind kind = Kind::kForward;

  friend bool operator==(const Instruction&, const Instruction&) = default;
};

// e.g. "stage 2 chunk 0 forward microbatch 5"
std::string Describe(const Instruction& instruction);

}  // namespace joulepipe::model
