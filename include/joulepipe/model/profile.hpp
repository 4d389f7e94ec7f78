// Profile: for each profiled stage and instruction kind, the measured time and
// energy of one instruction at each SM clock.
//
// Invariants (enforced by Profile::Add / Validate and the CSV reader):
//   * every clock is 1..kMaxClockMhz; every time and energy is finite and
//     > 0, a time at most kMaxInstructionSeconds, and energy / time (the
//     GPU's mean power over the instruction) at most kMaxInstructionPowerW;
//     statistics, where present, are >= 0 and finite;
//   * (stage, kind, clock, knobs) is unique;
//   * after Validate(S), stages are exactly 0..S-1 and every (stage, kind)
//     has at least one clock.
// Points of one (stage, kind) are kept sorted by clock, highest first, and
// at one clock by time, fastest first (then energy, then knob text).
//
// Knobs (issue 15, item 5): a row may name a setting of knobs beyond the SM
// clock (e.g. Kareus's overlap configuration), as ClockPoint::knobs; each
// (clock, knobs) tuple is then one option the planner may choose. Rows
// without knobs are what every profile had before, and a profile without
// knobs plans exactly as before. Knob index 0 (the text "") stands for "the
// row without knobs at that clock, or where there is none the fastest
// point there": what code that names only a clock (Find(stage, kind, mhz),
// a plan instruction without knobs) gets.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "joulepipe/model/instruction.hpp"

namespace joulepipe::model {

// What one row of a profile can physically be (docs/limits.md, "Numbers and
// ranges"). Rows outside are typos or broken measurements: the CSV reader and
// Profile::Add refuse them, so no plan or simulation sees them.
inline constexpr int kMaxClockMhz = 10'000;             // no GPU clocks its SMs at 10 GHz
inline constexpr double kMaxInstructionSeconds = 3600;  // one forward or backward: an hour
inline constexpr double kMaxInstructionPowerW = 5'000;  // energy / time; as P_block's bound
// Stage ids are 0..kMaxStageId: a pipeline of 1,024 stages x 1,024 virtual
// chunks (the solver's limits) has no higher one. A larger id is a typo or
// an attack; code that walks stage ids never sees one.
inline constexpr int kMaxStageId = 1024 * 1024 - 1;

struct ClockPoint {
  ClockPoint() = default;
  // The measurement alone, statistics absent: {mhz, time_s, energy_j}.
  ClockPoint(int mhz, double time_s, double energy_j)
      : mhz(mhz), time_s(time_s), energy_j(energy_j) {}

  int mhz = 0;
  double time_s = 0;    // seconds per instruction at this clock
  double energy_j = 0;  // joules per instruction at this clock (GPU only)

  // How good the measurement is, where the profiler recorded it (the
  // in-situ profiler does; Perseus/Zeus and simulated profiles do not).
  // Absent = not known. When present: samples >= 0; the others finite and
  // >= 0. Planning uses only mhz, time_s and energy_j.
  std::optional<int> samples;           // samples behind time_s and energy_j
  std::optional<double> time_spread;    // relative robust std. deviation of time
  std::optional<double> energy_spread;  // same for energy
  std::optional<double> confidence;     // relative 95 % half-width of energy_j
  std::optional<bool> approximate;      // some energy was instant power x time

  // The knob setting of this row: "name=value;name=value" (names and values
  // of [A-Za-z0-9_.+-], names in the profile CSV's column order), "" = none.
  // Profile::Add checks it and sets `knob`, its index in the profile's
  // knob_settings() (0 for ""); an index set by the caller is ignored.
  std::string knobs;
  std::uint16_t knob = 0;

  // The 1-based line of the profile CSV this point was read from
  // (ParseProfileCsv sets it), 0 when it did not come from a file. Messages
  // about the point name it; nothing else reads it, and the writer ignores it.
  int line = 0;
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
  // How it was made, for people (one line): a simulated profile names its
  // model, GPU, parallelism, framework profile and that profile's
  // validation error against real runs.
  std::string method;
};

class Profile {
 public:
  ProfileMetadata metadata;

  // Adds one measurement. Throws InputError on a duplicate, a stage id
  // outside 0..kMaxStageId, a clock outside 1..kMaxClockMhz, a non-finite or non-positive time or
  // energy, a time over kMaxInstructionSeconds, a power (energy / time) over kMaxInstructionPowerW,
  // or a negative or non-finite statistic; `where` prefixes the message (e.g. "P.csv line 7") and
  // the message names the ClockPoint field.
  void Add(int stage, Kind kind, ClockPoint point, const std::string& where = "profile");

  // Number of profiled stages: highest stage id + 1 (0 when empty).
  int num_stages() const;
  // The stage ids that have rows, ascending (may have gaps before Validate).
  // Walk these, not 0..num_stages()-1: the cost is the rows', not the ids'.
  std::vector<int> stages() const;
  // Rows (measurements) in the profile.
  int num_rows() const;

  // Checks that stages are exactly 0..expected_stages-1 and every
  // (stage, kind) has a clock. Throws InputError naming `source`; when the
  // count is what disagrees, its field is "Spec::stages" (the pipeline's
  // stage count, schedule::Spec::stages, which `expected_stages` is).
  void Validate(int expected_stages, const std::string& source) const;

  // Points of (stage, kind), highest clock first. Empty if absent.
  const std::vector<ClockPoint>& Points(int stage, Kind kind) const;
  // Removes Points(stage, kind)[index] (e.g. a measurement left out as
  // implausible); the (stage, kind) keeps its other rows. std::out_of_range
  // for a row that is not there.
  void RemovePoint(int stage, Kind kind, std::size_t index);
  // Sets Points(stage, kind)[index].time_s (finite, > 0; InputError
  // otherwise); the row keeps its clock, energy and statistics.
  void SetTime(int stage, Kind kind, std::size_t index, double time_s);

  // The point at exactly `mhz` with knob setting `knob` (an index into
  // knob_settings()), or nullptr. knob 0 = the row without knobs at `mhz`,
  // or where there is none the fastest point there (in a profile without
  // knobs: the one point at `mhz`).
  const ClockPoint* Find(int stage, Kind kind, int mhz, int knob = 0) const;

  // The highest clock of (stage, kind): Find(stage, kind, that clock).
  // Requires a non-empty (stage, kind).
  const ClockPoint& MaxClock(int stage, Kind kind) const;

  // The distinct knob settings of the rows, in the order first added;
  // [0] is always "" (no knobs). Shared, immutable: frontier points keep it
  // to name their knobs without the profile.
  using KnobTable = std::shared_ptr<const std::vector<std::string>>;
  KnobTable knob_settings() const { return knobs_; }
  bool has_knobs() const { return knobs_->size() > 1; }
  // The index of `knobs` in knob_settings(), or -1.
  int KnobIndex(const std::string& knobs) const;

 private:
  std::map<std::pair<int, Kind>, std::vector<ClockPoint>> points_;
  // Copy on write: Add grows it in place only while no one else holds it.
  std::shared_ptr<std::vector<std::string>> knobs_ = std::make_shared<std::vector<std::string>>(1);
};

// Most knob settings one profile may have (an index is 16 bits).
inline constexpr int kMaxKnobSettings = 65'535;

// Whether `knobs` is a valid ClockPoint::knobs text; "" if so, else what is
// wrong (for messages).
std::string KnobsProblem(const std::string& knobs);

// ---- The profile CSV (docs/formats.md, "Profile CSV") --------------------------
//
//   # joulepipe profile
//   # gpu: NVIDIA H100 80GB HBM3
//   # p_block_w: 106
//   # source: simulated
//   # date: 2025-03-01T14:05:09Z
//   # joulepipe_version: 0.1.0
//   stage,instruction,frequency,time,energy[,samples,time_spread,...]
//   0,forward,1980,0.050285698917243507,30.672959935673806
//
// "# key: value" lines before the header carry ProfileMetadata; a Perseus or
// Zeus CSV (no such lines) is read unchanged. This reader and writer are the
// only code that knows the layout.

// Reads a profile CSV: optional metadata lines, then a header with at least
// the columns stage,instruction,frequency,time,energy (any order), then one
// row per (stage, instruction, frequency). Reads the optional statistics
// columns samples, time_spread, energy_spread, confidence and approximate
// into ClockPoint, each column named knob.NAME into ClockPoint::knobs
// ("NAME=value;..." in column order, empty fields left out), and each
// row's line into ClockPoint::line; other columns
// (rank ids, ...) and unknown metadata keys are ignored; '#' lines after the
// header are comments. A legacy per-row
// `source` column (joulepipe 0.1's simulated profiles) sets metadata.source
// when the file has no "# source:" line and every row agrees. Throws
// InputError naming the file, the line and the column or metadata key, also
// for a row outside the physical bounds above (a clock over kMaxClockMhz, a
// time over an hour, a power over 5,000 W), and for a file (or a pipe, or a
// device such as /dev/zero) over 256 MiB, which it stops reading at the limit.
Profile ReadProfileCsv(const std::string& path);

// Same, from text already in memory; `source` names it in errors.
Profile ParseProfileCsv(const std::string& text, const std::string& source);

// The CSV of `profile`: when any metadata field is set, the line
// "# joulepipe profile" and one "# key: value" line per set field (in the
// order gpu, p_block_w, source, date, joulepipe_version); then the header
// and per stage, per clock (highest first) the forward row, then the
// backward one, as Perseus orders them. A statistics column is written only
// when some point has that statistic (an empty field where another lacks
// it). With knobs, one knob.NAME column per knob name after those (in the
// order names first appear), empty where a row's setting lacks the name.
// Numbers carry 17 significant digits: ParseProfileCsv reads back
// exactly the same points, statistics, knobs and metadata. Throws InputError
// naming the ProfileMetadata field when a metadata value could not be read
// back (p_block_w outside 0..5000 W, source not measured, simulated or
// imported, date not ISO 8601, text with a line break).
std::string ProfileToCsv(const Profile& profile);

// Writes ProfileToCsv(profile) to `path` atomically (WriteFileAtomically:
// readers see the old file or the new one, never a part). Throws InputError
// naming the path on I/O failure.
void WriteProfileCsv(const std::string& path, const Profile& profile);

}  // namespace joulepipe::model
