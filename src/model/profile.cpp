// Profile storage and the Perseus/Zeus profile CSV reader.
//
// The reader is strict about values (a bad measurement silently accepted would
// silently skew every plan) and lenient about layout: any column order, extra
// columns, CRLF, a UTF-8 BOM, blank lines and spaces around fields are fine.
// Every error is an InputError that names the file, the 1-based line, the
// column and the offending text, and says how to fix it.
#include "joulepipe/model/profile.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "joulepipe/model/error.hpp"
#include "read_file.hpp"

namespace joulepipe::model {

namespace {

// Columns the reader needs, in the order the canonical header lists them.
enum Column { kStage, kInstruction, kFrequency, kTime, kEnergy, kNumColumns };
constexpr std::array<std::string_view, kNumColumns> kColumnNames = {"stage", "instruction",
                                                                    "frequency", "time", "energy"};
constexpr std::string_view kCanonicalHeader = "stage,instruction,frequency,time,energy";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// Trims a field and drops one pair of surrounding double quotes. Quoted
// fields with embedded commas are not supported: profiles never contain them.
std::string_view CleanField(std::string_view s) {
  s = Trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = Trim(s.substr(1, s.size() - 2));
  return s;
}

void SplitFields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields->push_back(CleanField(line.substr(start)));
      return;
    }
    fields->push_back(CleanField(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

// Quotes user text for a message, shortening it so one absurd line cannot
// flood the terminal.
std::string Quote(std::string_view text) {
  constexpr size_t kMax = 60;
  if (text.size() > kMax) return "'" + std::string(text.substr(0, kMax)) + "...'";
  return "'" + std::string(text) + "'";
}

std::string LineWhere(const std::string& source, int line) {
  return source + " line " + std::to_string(line);
}

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Parses a whole field as a double (locale-independent). Accepts a leading
// '+'; NaN and infinities parse and are left for the caller to reject.
bool ParseDouble(std::string_view s, double* value) {
  if (s.size() > 1 && s.front() == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *value);
  return ec == std::errc() && ptr == end;
}

// Parses a whole field as an integer that fits an int. "1410" and "1410.0"
// are both integers (pandas writes integral floats that way); "1410.5" is not.
bool ParseInteger(std::string_view s, long long* value) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *value);
  if (ec == std::errc() && ptr == end) return *value >= INT_MIN && *value <= INT_MAX;
  double d = 0;
  if (!ParseDouble(s, &d) || !std::isfinite(d) || d != std::floor(d)) return false;
  if (d < INT_MIN || d > INT_MAX) return false;
  *value = static_cast<long long>(d);
  return true;
}

[[noreturn]] void FieldError(const std::string& where, Column column, std::string_view value,
                             const std::string& problem) {
  throw InputError(where + ", column '" + std::string(kColumnNames[column]) + "': " + Quote(value) +
                   " " + problem);
}

int ParseStage(const std::string& where, std::string_view text) {
  long long value = 0;
  if (!ParseInteger(text, &value) || value >= INT_MAX) {
    FieldError(where, kStage, text, "is not a stage id; stage must be an integer 0, 1, 2, ...");
  }
  if (value < 0) FieldError(where, kStage, text, "is negative; stage ids start at 0");
  return static_cast<int>(value);
}

Kind ParseInstruction(const std::string& where, std::string_view text) {
  Kind kind = Kind::kForward;
  if (!ParseKind(text, &kind)) {
    FieldError(where, kInstruction, text,
               "is not an instruction kind; use 'forward' or 'backward'");
  }
  return kind;
}

int ParseFrequency(const std::string& where, std::string_view text) {
  long long value = 0;
  if (!ParseInteger(text, &value)) {
    FieldError(where, kFrequency, text,
               "is not a whole number of MHz; frequency must be an integer SM clock in MHz");
  }
  if (value <= 0) FieldError(where, kFrequency, text, "is not a positive clock; use MHz > 0");
  return static_cast<int>(value);
}

// Time (seconds) and energy (joules) per instruction: finite and > 0.
double ParseMeasurement(const std::string& where, Column column, std::string_view text) {
  const char* unit = column == kTime ? "seconds" : "joules";
  double value = 0;
  if (!ParseDouble(text, &value)) {
    FieldError(where, column, text,
               std::string("is not a number; give ") + unit + " per instruction, e.g. 0.05");
  }
  if (!std::isfinite(value)) {
    FieldError(where, column, text,
               std::string("is not finite; re-measure this clock or delete the row"));
  }
  if (value <= 0) {
    FieldError(where, column, text,
               std::string("is not positive; ") + unit +
                   " per instruction must be > 0 (re-measure this clock or delete the row)");
  }
  return value;
}

// Where each required column sits in a row, from the header.
struct Header {
  std::array<size_t, kNumColumns> index{};
  size_t num_fields = 0;
};

std::string JoinFields(const std::vector<std::string_view>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += fields[i];
  }
  return out;
}

Header ParseHeader(const std::string& where, const std::vector<std::string_view>& fields) {
  constexpr size_t kAbsent = static_cast<size_t>(-1);
  Header header;
  header.index.fill(kAbsent);
  header.num_fields = fields.size();
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name = ToLower(fields[i]);
    for (int c = 0; c < kNumColumns; ++c) {
      if (name != kColumnNames[c]) continue;
      if (header.index[c] != kAbsent) {
        throw InputError(where + ": column '" + name + "' appears twice in the header (fields " +
                         std::to_string(header.index[c] + 1) + " and " + std::to_string(i + 1) +
                         "); keep one");
      }
      header.index[c] = i;
    }
  }
  for (int c = 0; c < kNumColumns; ++c) {
    if (header.index[c] != kAbsent) continue;
    throw InputError(where + ": missing required column '" + std::string(kColumnNames[c]) +
                     "'; the header found is " + Quote(JoinFields(fields)) +
                     " but a profile needs the columns " + std::string(kCanonicalHeader) +
                     " (in any order)");
  }
  return header;
}

// Formats sorted, distinct stage ids compactly: "0..2, 4, 6..7".
std::string FormatStages(const std::vector<int>& stages) {
  std::string out;
  for (size_t i = 0; i < stages.size();) {
    size_t j = i;
    while (j + 1 < stages.size() && stages[j + 1] == stages[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(stages[i]);
    if (j > i) out += ".." + std::to_string(stages[j]);
    i = j + 1;
  }
  return out;
}

// Reads one data row into `profile`. `first_line` remembers the line of
// every (stage, kind, clock) so that a duplicate names both lines.
using RowKey = std::tuple<int, Kind, int>;

void ParseRow(const std::string& source, int line, const Header& header,
              const std::vector<std::string_view>& fields, std::string_view raw,
              std::map<RowKey, int>* first_line, Profile* profile) {
  const std::string where = LineWhere(source, line);
  if (fields.size() != header.num_fields) {
    throw InputError(where + ": expected " + std::to_string(header.num_fields) +
                     " comma-separated fields (one per header column) but found " +
                     std::to_string(fields.size()) + " in " + Quote(Trim(raw)) +
                     "; fix the row or the header");
  }
  for (int c = 0; c < kNumColumns; ++c) {
    if (fields[header.index[c]].empty()) {
      throw InputError(where + ", column '" + std::string(kColumnNames[c]) +
                       "': the field is empty; fill it in or delete the row");
    }
  }
  const int stage = ParseStage(where, fields[header.index[kStage]]);
  const Kind kind = ParseInstruction(where, fields[header.index[kInstruction]]);
  ClockPoint point;
  point.mhz = ParseFrequency(where, fields[header.index[kFrequency]]);
  point.time_s = ParseMeasurement(where, kTime, fields[header.index[kTime]]);
  point.energy_j = ParseMeasurement(where, kEnergy, fields[header.index[kEnergy]]);

  auto [it, inserted] = first_line->emplace(RowKey{stage, kind, point.mhz}, line);
  if (!inserted) {
    throw InputError(where + ": duplicate row for stage " + std::to_string(stage) + " " +
                     std::string(KindName(kind)) + " at " + std::to_string(point.mhz) +
                     " MHz (first given on line " + std::to_string(it->second) +
                     "); keep one measurement per (stage, instruction, frequency)");
  }
  profile->Add(stage, kind, point, where);
}

}  // namespace

void Profile::Add(int stage, Kind kind, ClockPoint point, const std::string& where) {
  const std::string what = "stage " + std::to_string(stage) + " " + std::string(KindName(kind)) +
                           " at " + std::to_string(point.mhz) + " MHz";
  if (stage < 0) throw InputError(where + ": stage " + std::to_string(stage) + " is negative");
  if (point.mhz <= 0) throw InputError(where + ": " + what + ": clock must be > 0 MHz");
  if (!std::isfinite(point.time_s) || point.time_s <= 0) {
    throw InputError(where + ": " + what + ": time must be finite and > 0 seconds");
  }
  if (!std::isfinite(point.energy_j) || point.energy_j <= 0) {
    throw InputError(where + ": " + what + ": energy must be finite and > 0 joules");
  }
  std::vector<ClockPoint>& points = points_[{stage, kind}];
  // Highest clock first; lower_bound finds the first clock <= point.mhz.
  auto pos = std::lower_bound(points.begin(), points.end(), point.mhz,
                              [](const ClockPoint& p, int mhz) { return p.mhz > mhz; });
  if (pos != points.end() && pos->mhz == point.mhz) {
    throw InputError(where + ": duplicate measurement for " + what);
  }
  points.insert(pos, point);
}

int Profile::num_stages() const {
  // Keys sort by stage first, so the last key holds the highest stage.
  return points_.empty() ? 0 : points_.rbegin()->first.first + 1;
}

void Profile::Validate(int expected_stages, const std::string& source) const {
  if (expected_stages < 1) {
    throw InputError(source + ": the pipeline needs at least 1 stage, got --stages " +
                     std::to_string(expected_stages));
  }
  if (points_.empty()) {
    throw InputError(source +
                     ": profile has no measurements; it needs forward and backward "
                     "rows for stages 0.." +
                     std::to_string(expected_stages - 1));
  }
  std::vector<int> stages;
  for (const auto& entry : points_) {
    if (stages.empty() || stages.back() != entry.first.first) stages.push_back(entry.first.first);
  }
  const bool exact =
      static_cast<int>(stages.size()) == expected_stages && stages.back() == expected_stages - 1;
  if (!exact) {
    std::vector<int> missing;
    for (int s = 0; s < expected_stages; ++s) {
      if (!std::binary_search(stages.begin(), stages.end(), s)) missing.push_back(s);
    }
    std::string message = source + ": profile has stages " + FormatStages(stages) +
                          " but --stages is " + std::to_string(expected_stages);
    if (!missing.empty()) {
      message += (missing.size() == 1 ? "; stage " : "; stages ") + FormatStages(missing) +
                 (missing.size() == 1 ? " is missing" : " are missing");
    }
    message += "; profile every stage 0.." + std::to_string(expected_stages - 1);
    const bool contiguous =
        stages.front() == 0 && stages.back() + 1 == static_cast<int>(stages.size());
    if (contiguous) message += " or pass --stages " + std::to_string(stages.size());
    throw InputError(message);
  }
  for (int s = 0; s < expected_stages; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      if (!Points(s, kind).empty()) continue;
      throw InputError(source + ": stage " + std::to_string(s) + " has no " +
                       std::string(KindName(kind)) +
                       " rows; every stage needs forward and backward measurements");
    }
  }
}

const std::vector<ClockPoint>& Profile::Points(int stage, Kind kind) const {
  static const std::vector<ClockPoint> kNone;  // immutable, so not shared state
  auto it = points_.find({stage, kind});
  return it == points_.end() ? kNone : it->second;
}

const ClockPoint* Profile::Find(int stage, Kind kind, int mhz) const {
  const std::vector<ClockPoint>& points = Points(stage, kind);
  auto pos = std::lower_bound(points.begin(), points.end(), mhz,
                              [](const ClockPoint& p, int m) { return p.mhz > m; });
  return pos != points.end() && pos->mhz == mhz ? &*pos : nullptr;
}

const ClockPoint& Profile::MaxClock(int stage, Kind kind) const {
  const std::vector<ClockPoint>& points = Points(stage, kind);
  if (points.empty()) {
    throw std::logic_error("Profile::MaxClock: no clocks for stage " + std::to_string(stage) + " " +
                           std::string(KindName(kind)));
  }
  return points.front();
}

Profile ParseProfileCsv(const std::string& text, const std::string& source) {
  std::string_view rest(text);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 BOM

  Profile profile;
  std::optional<Header> header;
  std::map<RowKey, int> first_line;
  std::vector<std::string_view> fields;
  int header_line = 0;
  int rows = 0;
  for (int line = 1; !rest.empty(); ++line) {
    const size_t newline = rest.find('\n');
    const std::string_view raw = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (Trim(raw).empty()) continue;  // blank lines (including trailing ones) carry nothing
    SplitFields(raw, &fields);
    if (!header) {
      header = ParseHeader(LineWhere(source, line), fields);
      header_line = line;
      continue;
    }
    ParseRow(source, line, *header, fields, raw, &first_line, &profile);
    ++rows;
  }
  if (!header) {
    throw InputError(source + ": the file is empty; a profile is a CSV with the header " +
                     std::string(kCanonicalHeader) +
                     " and one row per (stage, instruction, frequency)");
  }
  if (rows == 0) {
    throw InputError(source + ": no data rows after the header on line " +
                     std::to_string(header_line) +
                     "; add one row per (stage, instruction, frequency)");
  }
  return profile;
}

Profile ReadProfileCsv(const std::string& path) {
  return ParseProfileCsv(ReadWholeFile(path, "profile"), path);
}

}  // namespace joulepipe::model
