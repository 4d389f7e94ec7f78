// Profile: for each profiled stage and instruction kind, the measured time and
// energy of one instruction at each SM clock.
//
// Invariants (enforced by Profile::Add / Validate and the CSV reader):
//   * every time and energy is finite and > 0;
//   * (stage, kind, clock) is unique;
//   * after Validate(S), stages are exactly 0..S-1 and every (stage, kind)
//     has at least one clock.
// Points of one (stage, kind) are kept sorted by clock, highest first.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joulepipe/model/instruction.hpp"

namespace joulepipe::model {

struct ClockPoint {
  int mhz = 0;
  double time_s = 0;    // seconds per instruction at this clock
  double energy_j = 0;  // joules per instruction at this clock (GPU only)
};

// What a profile says about itself; every field is optional. The CSV carries
// it as "# key: value" lines before the header (docs/formats.md), which
// Perseus/Zeus CSVs simply lack.
struct ProfileMetadata {
  std::string gpu;                  // GPU name, e.g. "NVIDIA A100-SXM4-80GB"
  std::optional<double> p_block_w;  // GPU power while blocked or idle (W)
  std::string source;               // "measured" (in situ), "simulated" or "imported"
  std::string date;                 // when it was made, ISO 8601 UTC
  std::string joulepipe_version;    // the joulepipe that wrote it
};

class Profile {
 public:
  ProfileMetadata metadata;

  // Adds one measurement. Throws InputError on a duplicate or a non-finite or
  // non-positive value; `where` prefixes the message (e.g. "P.csv line 7").
  void Add(int stage, Kind kind, ClockPoint point, const std::string& where = "profile");

  // Number of profiled stages: highest stage id + 1 (0 when empty).
  int num_stages() const;

  // Checks that stages are exactly 0..expected_stages-1 and every
  // (stage, kind) has a clock. Throws InputError naming `source`.
  void Validate(int expected_stages, const std::string& source) const;

  // Points of (stage, kind), highest clock first. Empty if absent.
  const std::vector<ClockPoint>& Points(int stage, Kind kind) const;

  // The point at exactly `mhz`, or nullptr.
  const ClockPoint* Find(int stage, Kind kind, int mhz) const;

  // The highest clock of (stage, kind). Requires a non-empty (stage, kind).
  const ClockPoint& MaxClock(int stage, Kind kind) const;

 private:
  std::map<std::pair<int, Kind>, std::vector<ClockPoint>> points_;
};

// Reads a Perseus/Zeus profile CSV: header with at least the columns
// stage,instruction,frequency,time,energy (any order; extra columns such as
// rank ids are ignored). Throws InputError naming the file, line and field.
Profile ReadProfileCsv(const std::string& path);

// Same, from text already in memory; `source` names it in errors.
Profile ParseProfileCsv(const std::string& text, const std::string& source);

}  // namespace joulepipe::model
