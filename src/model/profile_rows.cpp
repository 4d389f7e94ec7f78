#include "joulepipe/model/profile_rows.hpp"

#include <algorithm>
#include <utility>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"

namespace joulepipe::model {

namespace {

// How `row` disagrees with `reference` (two clocks of one instruction), or
// "" when it does not. Rows of one (stage, kind) have distinct clocks.
std::string Disagreement(const ClockPoint& row, const ClockPoint& reference) {
  const double m = kRowMargin;
  const ClockPoint& high = row.mhz > reference.mhz ? row : reference;
  const ClockPoint& low = row.mhz > reference.mhz ? reference : row;
  const double clock_ratio = static_cast<double>(high.mhz) / low.mhz;
  const double time_ratio = row.time_s / reference.time_s;
  const bool row_is_low = &low == &row;
  if (low.time_s > high.time_s * clock_ratio * m) {
    if (row_is_low) {
      return Format(
          "that is %.3g times as long, but lowering the clock from %d to %d MHz makes an "
          "instruction at most %.3g times as slow (%.3g with a %gx allowance for "
          "noise): only its compute slows with the clock",
          time_ratio, high.mhz, low.mhz, clock_ratio, clock_ratio * m, m);
    }
    return Format(
        "that is only 1/%.3g of the time, but raising the clock from %d to %d MHz "
        "makes an instruction at most %.3g times as fast (%.3g with a %gx allowance "
        "for noise)",
        1 / time_ratio, low.mhz, high.mhz, clock_ratio, clock_ratio * m, m);
  }
  if (low.time_s * m < high.time_s) {
    if (row_is_low) {
      return Format(
          "that is only 1/%.3g of the time, but a lower clock does not make an "
          "instruction faster (beyond a %gx allowance for noise)",
          1 / time_ratio, m);
    }
    return Format(
        "that is %.3g times as long, but a higher clock does not make an instruction "
        "slower (beyond a %gx allowance for noise)",
        time_ratio, m);
  }
  const double power = row.energy_j / row.time_s;
  const double reference_power = reference.energy_j / reference.time_s;
  if (power > reference_power * kMaxPowerRatio || power * kMaxPowerRatio < reference_power) {
    return Format(
        "that is a mean power of %.4g W against %.4g W, but the clocks of one "
        "instruction differ in power by at most %gx",
        power, reference_power, kMaxPowerRatio);
  }
  return "";
}

std::string LineText(const ClockPoint& point) {
  return point.line > 0 ? Format(" (line %d)", point.line) : std::string();
}

// The rows to try as the reference of a (stage, kind): the highest clock and
// up to 15 more spread over the list (all of them for short lists), so the
// check stays linear in the number of rows.
constexpr std::size_t kReferenceCandidates = 16;

// The rows of one (stage, kind) that disagree with its reference row (the
// one that agrees with the most others), each with why.
struct OddRow {
  std::size_t index = 0;
  std::string why;
};
std::size_t ReferenceRow(const std::vector<ClockPoint>& points) {
  const std::size_t n = points.size();
  const std::size_t candidates = std::min(n, kReferenceCandidates);
  std::size_t reference = 0, best_agreements = 0;
  for (std::size_t c = 0; c < candidates; ++c) {
    const std::size_t index = candidates > 1 ? c * (n - 1) / (candidates - 1) : 0;
    std::size_t agreements = 0;
    for (const ClockPoint& other : points) {
      if (&other == &points[index] || Disagreement(other, points[index]).empty()) ++agreements;
    }
    // Ties keep the higher clock (points are highest first).
    if (agreements > best_agreements) {
      best_agreements = agreements;
      reference = index;
    }
  }
  return reference;
}

std::vector<OddRow> OddRows(const std::vector<ClockPoint>& points, std::size_t reference) {
  std::vector<OddRow> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i == reference) continue;
    std::string why = Disagreement(points[i], points[reference]);
    if (!why.empty()) out.push_back({i, std::move(why)});
  }
  return out;
}

void CheckRows(const std::vector<ClockPoint>& points, int stage, Kind kind,
               const std::string& profile_name) {
  if (points.size() < 2) return;
  const std::size_t reference = ReferenceRow(points);
  const std::vector<OddRow> odd = OddRows(points, reference);
  if (odd.empty()) return;
  const ClockPoint& ref = points[reference];
  const ClockPoint& row = points[odd.front().index];
  const std::string where = row.line > 0 ? Format(" line %d", row.line) : std::string();
  throw InputError(Format("%s%s: stage %d %s at %d MHz takes %.6g s and %.6g J, against %.6g s "
                          "and %.6g J at %d MHz%s: ",
                          profile_name.c_str(), where.c_str(), stage,
                          std::string(KindName(kind)).c_str(), row.mhz, row.time_s, row.energy_j,
                          ref.time_s, ref.energy_j, ref.mhz, LineText(ref).c_str()) +
                   odd.front().why +
                   ". The row is not a plausible measurement: re-measure this clock or "
                   "delete the row");
}

}  // namespace

void CheckProfileRows(const Profile& profile, const std::string& profile_name) {
  for (int s : profile.stages()) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      CheckRows(profile.Points(s, kind), s, kind, profile_name);
    }
  }
}

std::vector<ImplausibleRow> ImplausibleRows(const Profile& profile, std::size_t described) {
  std::vector<ImplausibleRow> out;
  for (int s : profile.stages()) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const std::vector<ClockPoint>& points = profile.Points(s, kind);
      if (points.size() < 2) continue;
      const std::size_t reference = ReferenceRow(points);
      const ClockPoint& ref = points[reference];
      for (OddRow& odd : OddRows(points, reference)) {
        const ClockPoint& row = points[odd.index];
        if (out.size() >= described) {
          out.push_back({s, kind, odd.index, row.mhz, std::string()});
          continue;
        }
        out.push_back({s, kind, odd.index, row.mhz,
                       Format("stage %d %s at %d MHz was measured at %.6g s and %.6g J, against "
                              "%.6g s and %.6g J at %d MHz: %s",
                              s, std::string(KindName(kind)).c_str(), row.mhz, row.time_s,
                              row.energy_j, ref.time_s, ref.energy_j, ref.mhz, odd.why.c_str())});
      }
    }
  }
  return out;
}

Profile LeaveOutImplausibleRows(const Profile& profile, std::vector<std::string>* notes) {
  Profile out = profile;
  const std::vector<ImplausibleRow> odd = ImplausibleRows(profile, kMaxRowNotes);
  // Highest index of each (stage, kind) first, so the indices left to
  // remove stay valid (ImplausibleRows lists them ascending per group).
  for (auto it = odd.rbegin(); it != odd.rend(); ++it) {
    out.RemovePoint(it->stage, it->kind, it->index);
  }
  if (notes != nullptr) {
    for (std::size_t i = 0; i < odd.size() && i < kMaxRowNotes; ++i) {
      notes->push_back(odd[i].why +
                       "; that clock is left out of the plan (a noisy measurement or a "
                       "throttled GPU)");
    }
    if (odd.size() > kMaxRowNotes) {
      const ImplausibleRow& last = odd.back();
      notes->push_back(
          Format("%zu more rows were left out of the plan the same way (implausible against their "
                 "instruction's other clocks), the last stage %d %s at %d MHz; %zu of %d rows are "
                 "left",
                 odd.size() - kMaxRowNotes, last.stage, std::string(KindName(last.kind)).c_str(),
                 last.mhz, static_cast<std::size_t>(out.num_rows()), profile.num_rows()));
    }
  }
  return out;
}

Profile NoRowFasterThanTheTopClock(const Profile& profile, std::vector<std::string>* notes) {
  Profile out = profile;
  if (profile.has_knobs() || profile.metadata.source != "measured") return out;
  std::size_t said = 0, unsaid = 0;  // (stage, kind)s with a note, and beyond kMaxRowNotes
  int unsaid_rows = 0;
  for (int s : profile.stages()) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const std::vector<ClockPoint>& points = profile.Points(s, kind);
      if (points.size() < 2) continue;
      const ClockPoint& top = points.front();  // highest clock first
      std::string clocks;
      int faster = 0;
      double most = 0;  // the largest relative difference
      const bool say = notes != nullptr && said < kMaxRowNotes;
      for (std::size_t i = 1; i < points.size(); ++i) {
        if (points[i].time_s >= top.time_s) continue;
        if (say) clocks += Format("%s%d", faster ? ", " : "", points[i].mhz);
        ++faster;
        most = std::max(most, 1 - points[i].time_s / top.time_s);
        out.SetTime(s, kind, i, top.time_s);
      }
      if (faster > 0 && !say) {
        ++unsaid;
        unsaid_rows += faster;
      }
      if (faster > 0 && say) {
        ++said;
        notes->push_back(Format(
            "stage %d %s: %d lower clock%s (%s MHz) measured faster than its highest clock, "
            "%d MHz (by up to %.2f %%): planned as taking as long as at %d MHz, %.6g s, "
            "since a lower clock does not make an instruction faster (noise or a throttled GPU)",
            s, std::string(KindName(kind)).c_str(), faster, faster > 1 ? "s" : "", clocks.c_str(),
            top.mhz, 100 * most, top.mhz, top.time_s));
      }
    }
  }
  if (unsaid > 0 && notes != nullptr) {
    notes->push_back(Format(
        "in %zu more stage instructions, %d lower-clock rows measured faster than their highest "
        "clock were planned at its time the same way",
        unsaid, unsaid_rows));
  }
  return out;
}

RowRuleResult PlannableRows(const Profile& profile, const std::string& profile_name) {
  RowRuleResult out;
  if (profile.metadata.source != "measured") {
    CheckProfileRows(profile, profile_name);
    out.profile = profile;
    return out;
  }
  out.profile =
      NoRowFasterThanTheTopClock(LeaveOutImplausibleRows(profile, &out.notes), &out.notes);
  return out;
}

}  // namespace joulepipe::model
