// The rows of a profile as planning and replay may use them: whether the
// clocks of one instruction agree with one another as DVFS allows, and the
// one rule every front end applies to a profile it reads for planning or
// replay (PlannableRows): `plan`, `simulate`, `evaluate`, `site`, `serve`,
// embedded coordination and the Python calls. One rule, so one profile gets
// one answer whichever command reads it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/profile.hpp"

namespace joulepipe::model {

// Whether the rows of each (stage, kind) agree with one another as DVFS
// allows. For two clocks g > f of one instruction, with a margin of
// kRowMargin for measurement noise:
//   * t(f) >= t(g) / kRowMargin: a lower clock does not make it faster;
//   * t(f) <= t(g) x g/f x kRowMargin: a lower clock slows at most the
//     part of the work that runs at the SM clock, so by at most g/f;
//   * the mean powers e/t at f and g are within kMaxPowerRatio of each other.
// Each row is compared with the row of its (stage, kind) that agrees with
// the most others (usually the highest clock), so the message blames the odd
// row, not its neighbours. Every measured and simulated profile shipped with
// joulepipe passes with room to spare (tests/solver/plan_pipeline_rows_test.cpp).
// Throws InputError naming `profile_name`, the row's line (when it was
// read from a file: ClockPoint::line), clock and figures, the row it was
// compared with, and the fix.
inline constexpr double kRowMargin = 1.5;
inline constexpr double kMaxPowerRatio = 20;
void CheckProfileRows(const Profile& profile, const std::string& profile_name);

// One row CheckProfileRows would refuse: its (stage, kind), its index in
// Points(stage, kind) and clock, and `why` in words about the job (which
// stage, instruction and clock, what was measured against which reference
// row, and the rule it breaks), with no file line.
struct ImplausibleRow {
  int stage = 0;
  Kind kind = Kind::kForward;
  std::size_t index = 0;
  int mhz = 0;
  std::string why;
};
// Every such row, by stage, kind, then index ascending; empty when
// CheckProfileRows passes. The in-situ profiler re-measures these clocks
// once before it reports (runtime/profiler.hpp).
// Only the first `described` rows get their `why` (the others an empty
// one): a profile of half a million odd rows must not build half a million
// sentences to say so.
std::vector<ImplausibleRow> ImplausibleRows(const Profile& profile,
                                            std::size_t described = SIZE_MAX);

// The most notes one rule gives, each about one row or one (stage, kind);
// beyond it one more note counts the rest. A profile's notes are bounded
// whatever its size (a service shows them in every job's status).
inline constexpr std::size_t kMaxRowNotes = 8;

// For a profile measured inside a running job, where nobody can re-measure
// a row (noise, a GPU throttled by its power or thermal cap): the profile
// without the rows CheckProfileRows would refuse, each said in `notes` (when
// given) in words about the job: which stage, instruction and clock, what
// was measured against which reference, and that the clock is left out.
// Every (stage, kind) keeps its reference row, so the result passes
// CheckProfileRows and still fits every schedule the input fitted.
Profile LeaveOutImplausibleRows(const Profile& profile, std::vector<std::string>* notes);

// The one rule for a profile whose highest clock is not its fastest (noise,
// throttling): the baseline is what the job runs today, every instruction at
// its highest clock, and a lower clock does not make an instruction faster,
// so a row measured faster than its (stage, kind)'s highest clock is
// planned as taking as long as that clock (its energy as measured), each
// said in `notes` (when given). No plan is then faster than the baseline:
// every saving is at the baseline's time or slower, within the relaxation's
// bound, and no slowdown is negative. The rule is for profiles joulepipe
// measured in a running job (metadata source "measured"); others (imported
// measurements such as Perseus's, simulated ones) and profiles with knob
// settings (another setting may be faster by design) are returned as they
// are. Every front end that plans a profile applies it (coord's
// PlannableProfile, `joulepipe plan`, Python's plan_pipeline).
Profile NoRowFasterThanTheTopClock(const Profile& profile, std::vector<std::string>* notes);

// The one rule for a profile's rows, by where the profile came from:
//   * a profile joulepipe measured in a running job (metadata source
//     "measured"), where nobody can re-measure a row: the rows
//     CheckProfileRows would refuse are left out (LeaveOutImplausibleRows),
//     then rows faster than their highest clock are planned at its time
//     (NoRowFasterThanTheTopClock);
//   * any other profile (imported, simulated, written by hand), which its
//     user can re-measure or correct: an implausible row is an error
//     (CheckProfileRows, naming the file's line), and no row is changed.
// `notes` says, in words about the job, each row left out or adjusted.
// Every front end that plans or replays a profile applies this once, where
// it reads the profile, and shows the notes.
struct RowRuleResult {
  Profile profile;
  std::vector<std::string> notes;
};
RowRuleResult PlannableRows(const Profile& profile, const std::string& profile_name);

}  // namespace joulepipe::model
