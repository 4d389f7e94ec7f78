// Instruction names. The spellings here are a file format: profile CSVs,
// plan JSON and the PointSolution literal all use "forward" / "backward".
#include "joulepipe/model/instruction.hpp"

namespace joulepipe::model {

std::string_view KindName(Kind kind) {
  return kind == Kind::kForward ? "forward" : "backward";
}

bool ParseKind(std::string_view text, Kind* kind) {
  if (text == "forward") {
    *kind = Kind::kForward;
    return true;
  }
  if (text == "backward") {
    *kind = Kind::kBackward;
    return true;
  }
  return false;
}

// Always names the chunk, even for non-interleaved schedules (chunk 0), so
// that every message has the same shape and can be grepped the same way.
std::string Describe(const Instruction& instruction) {
  std::string out = "stage " + std::to_string(instruction.stage);
  out += " chunk " + std::to_string(instruction.chunk);
  out += ' ';
  out += KindName(instruction.kind);
  out += " microbatch " + std::to_string(instruction.microbatch);
  return out;
}

}  // namespace joulepipe::model
