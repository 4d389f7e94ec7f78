// Profile storage and the profile CSV reader and writer (docs/formats.md).
//
// The reader is strict about values (a bad measurement silently accepted would
// silently skew every plan) and lenient about layout: any column order, extra
// columns, CRLF, a UTF-8 BOM, blank lines, '#' comment lines and spaces around
// fields are fine. Every error is an InputError that names the file, the
// 1-based line, the column or metadata key and the offending text, and says
// how to fix it. The writer writes only what the reader reads back exactly.
#include "joulepipe/model/profile.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <tuple>

#include "joulepipe/model/energy.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/json_input.hpp"
#include "joulepipe/model/output_files.hpp"
#include "joulepipe/model/read_file.hpp"

namespace joulepipe::model {

namespace {

// Columns: the five a profile needs (in the order the canonical header lists
// them), the optional statistics (in the order the writer writes them), and
// the legacy per-row `source` of joulepipe 0.1's simulated profiles.
enum Column {
  kStage,
  kInstruction,
  kFrequency,
  kTime,
  kEnergy,
  kNumRequired,
  kSamples = kNumRequired,
  kTimeSpread,
  kEnergySpread,
  kConfidence,
  kApproximate,
  kSourceColumn,
  kNumColumns
};
constexpr std::array<std::string_view, kNumColumns> kColumnNames = {
    "stage",       "instruction",   "frequency",  "time",        "energy", "samples",
    "time_spread", "energy_spread", "confidence", "approximate", "source"};
constexpr std::string_view kCanonicalHeader = "stage,instruction,frequency,time,energy";

// Metadata keys, in the order the writer writes them.
enum MetaKey { kGpu, kPBlock, kSource, kDate, kVersion, kMethod, kNumKeys };
constexpr std::array<std::string_view, kNumKeys> kMetaKeys = {
    "gpu", "p_block_w", "source", "date", "joulepipe_version", "method"};
constexpr std::array<std::string_view, kNumKeys> kMetaFields = {
    "ProfileMetadata::gpu",  "ProfileMetadata::p_block_w",         "ProfileMetadata::source",
    "ProfileMetadata::date", "ProfileMetadata::joulepipe_version", "ProfileMetadata::method"};
constexpr std::string_view kIdentifyingLine = "# joulepipe profile";
constexpr std::array<std::string_view, 3> kSources = {"measured", "simulated", "imported"};

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

// Quotes user text for a message: cut to 60 characters so one absurd line
// cannot flood the terminal, control bytes and invalid UTF-8 escaped
// (\n, \u001b, \xff) so none can cut the message or drive the terminal.
std::string Quote(std::string_view text) {
  return "'" + ExcerptText(text) + "'";
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

// The shortest text that reads back to the same bits (83.64, not
// 83.640000000000001).
std::string Exact(double value) {
  char text[40];
  const std::to_chars_result r = std::to_chars(text, text + sizeof text, value);
  return std::string(text, r.ptr);
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

// ---- Metadata values: one check for the reader and the writer ----------------

bool KnownSource(std::string_view value) {
  return std::find(kSources.begin(), kSources.end(), value) != kSources.end();
}

// ISO 8601: a calendar date YYYY-MM-DD, optionally followed by 'T' and a time
// ("2025-03-01", "2025-03-01T14:05:09Z"). The time is not parsed further: the
// date is a record for people, nothing computes with it.
bool IsoDate(std::string_view value) {
  auto digits = [&](size_t at, size_t n) {
    for (size_t i = at; i < at + n; ++i) {
      if (i >= value.size() || value[i] < '0' || value[i] > '9') return false;
    }
    return true;
  };
  if (!digits(0, 4) || value.size() < 10 || value[4] != '-' || !digits(5, 2) || value[7] != '-' ||
      !digits(8, 2)) {
    return false;
  }
  const int month = (value[5] - '0') * 10 + (value[6] - '0');
  const int day = (value[8] - '0') * 10 + (value[9] - '0');
  if (month < 1 || month > 12 || day < 1 || day > 31) return false;
  return value.size() == 10 || value[10] == 'T';
}

constexpr std::string_view kDateExample = "2025-03-01T14:05:09Z";

// What is wrong with a text metadata value, or "" when it is fine.
std::string TextValueProblem(MetaKey key, std::string_view value) {
  // A lone '\r' inside a line is not a line end to this reader, but is to
  // others: the writer refuses it, so the reader must too (found by
  // tests/fuzz/profile_csv_main.cpp).
  if (value.find('\r') != std::string_view::npos) {
    return "the value contains a carriage return; a metadata value is one line of text";
  }
  if (key == kSource && !KnownSource(value)) {
    return Quote(value) + " is not a profile source; use measured, simulated or imported";
  }
  if (key == kDate && !IsoDate(value)) {
    return Quote(value) + " is not an ISO 8601 date; write the UTC time as e.g. " +
           std::string(kDateExample);
  }
  return "";
}

// ---- Reading -------------------------------------------------------------------

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
  if (value > kMaxStageId) {
    FieldError(where, kStage, text,
               "is over the largest stage id, " + std::to_string(kMaxStageId) +
                   " (1,024 stages x 1,024 virtual chunks); stage ids count a pipeline's "
                   "stages from 0");
  }
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
  if (value > kMaxClockMhz) {
    FieldError(where, kFrequency, text,
               "is above " + std::to_string(kMaxClockMhz) +
                   " MHz, faster than any GPU clocks its SMs; frequency is the SM clock in MHz "
                   "(e.g. 1410), not in kHz or Hz");
  }
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
  if (column == kTime && value > kMaxInstructionSeconds) {
    FieldError(where, column, text,
               "is more than an hour (" + Exact(kMaxInstructionSeconds) +
                   " s) for one forward or backward of one microbatch; time is in seconds "
                   "(e.g. 0.05, not milliseconds): re-measure this clock or delete the row");
  }
  return value;
}

// The statistics columns: an empty field means "not recorded for this row".
std::optional<int> ParseSamples(const std::string& where, std::string_view text) {
  if (text.empty()) return std::nullopt;
  long long value = 0;
  if (!ParseInteger(text, &value) || value < 0) {
    FieldError(where, kSamples, text,
               "is not a sample count; give a whole number >= 0 or leave the field empty");
  }
  return static_cast<int>(value);
}

std::optional<double> ParseStatistic(const std::string& where, Column column,
                                     std::string_view text) {
  if (text.empty()) return std::nullopt;
  double value = 0;
  if (!ParseDouble(text, &value) || !std::isfinite(value) || value < 0) {
    FieldError(where, column, text,
               "is not a relative spread; give a finite number >= 0 (0.01 = 1 %) or leave the "
               "field empty");
  }
  return value;
}

std::optional<bool> ParseApproximate(const std::string& where, std::string_view text) {
  if (text.empty()) return std::nullopt;
  const std::string lower = ToLower(text);
  if (lower == "1" || lower == "true") return true;
  if (lower == "0" || lower == "false") return false;
  FieldError(where, kApproximate, text, "is not a flag; use 1 or 0 (or leave the field empty)");
}

// One "# key: value" line before the header; unknown keys and lines without a
// colon are comments. `first_line` remembers where each key was given.
void ParseMetadataLine(const std::string& source, int line, std::string_view raw,
                       std::array<int, kNumKeys>* first_line, ProfileMetadata* metadata) {
  std::string_view body = Trim(raw);
  body.remove_prefix(1);  // '#'
  const size_t colon = body.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = Trim(body.substr(0, colon));
  const auto known = std::find(kMetaKeys.begin(), kMetaKeys.end(), name);
  if (known == kMetaKeys.end()) return;  // a later version's key, or prose
  const MetaKey key = static_cast<MetaKey>(known - kMetaKeys.begin());
  const std::string_view value = Trim(body.substr(colon + 1));
  const std::string where =
      LineWhere(source, line) + ", metadata '" + std::string(kMetaKeys[key]) + "'";
  if ((*first_line)[key] != 0) {
    throw InputError(where + ": given twice (first on line " + std::to_string((*first_line)[key]) +
                     "); keep one");
  }
  (*first_line)[key] = line;
  if (value.empty())
    throw InputError(where + ": the value is empty; fill it in or delete the line");
  if (key == kPBlock) {
    double watts = 0;
    if (!ParseDouble(value, &watts)) {
      throw InputError(where + ": " + Quote(value) +
                       " is not a number; give the GPU's power while blocked or idle in watts, "
                       "e.g. 83.64");
    }
    try {
      CheckPBlock(watts, "the value");  // the one range check (model/energy.hpp)
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    metadata->p_block_w = watts;
    return;
  }
  const std::string problem = TextValueProblem(key, value);
  if (!problem.empty()) throw InputError(where + ": " + problem);
  switch (key) {
    case kGpu:
      metadata->gpu = value;
      break;
    case kSource:
      metadata->source = value;
      break;
    case kDate:
      metadata->date = value;
      break;
    case kVersion:
      metadata->joulepipe_version = value;
      break;
    case kMethod:
      metadata->method = value;
      break;
    case kPBlock:
    case kNumKeys:
      break;
  }
}

// Where each column sits in a row, from the header (kAbsent: not there).
constexpr size_t kAbsent = static_cast<size_t>(-1);
struct Header {
  std::array<size_t, kNumColumns> index{};
  size_t num_fields = 0;
  // knob.NAME columns: (field index, NAME), in header order.
  std::vector<std::pair<size_t, std::string>> knobs;
};

constexpr std::string_view kKnobPrefix = "knob.";

// A knob name or value: one or more of [A-Za-z0-9_.+-].
bool KnobWord(std::string_view word) {
  if (word.empty()) return false;
  for (char c : word) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The name=value items of a ClockPoint::knobs text, in order; "" has none.
// An item without '=' has an empty value; a trailing ';' gives an empty
// item (KnobsProblem rejects both: names and values are KnobWords).
std::vector<std::pair<std::string_view, std::string_view>> SplitKnobs(std::string_view knobs) {
  std::vector<std::pair<std::string_view, std::string_view>> items;
  if (knobs.empty()) return items;
  while (true) {
    const size_t end = knobs.find(';');
    const std::string_view item = knobs.substr(0, end);
    const size_t eq = item.find('=');
    items.emplace_back(item.substr(0, eq),
                       eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    if (end == std::string_view::npos) break;
    knobs.remove_prefix(end + 1);
  }
  return items;
}

std::string JoinFields(const std::vector<std::string_view>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ',';
    out += fields[i];
  }
  return out;
}

Header ParseHeader(const std::string& where, const std::vector<std::string_view>& fields) {
  Header header;
  header.index.fill(kAbsent);
  header.num_fields = fields.size();
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name = ToLower(fields[i]);
    if (name.rfind(kKnobPrefix, 0) == 0) {
      // Knob names keep their case (they name the framework's settings).
      const std::string knob(Trim(fields[i]).substr(kKnobPrefix.size()));
      if (!KnobWord(knob)) {
        throw InputError(where + ": knob column " + Quote(fields[i]) +
                         " needs a name of letters, digits and _.+- after 'knob.', e.g. "
                         "knob.overlap");
      }
      for (const auto& [j, other] : header.knobs) {
        if (other == knob) {
          throw InputError(where + ": column 'knob." + knob +
                           "' appears twice in the header (fields " + std::to_string(j + 1) +
                           " and " + std::to_string(i + 1) + "); keep one");
        }
      }
      header.knobs.push_back({i, knob});
      continue;
    }
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
  for (int c = 0; c < kNumRequired; ++c) {
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

// The legacy `source` column: the one value every row gives, if they agree.
struct LegacySource {
  std::string value;
  bool consistent = true;
  bool seen = false;

  void Add(std::string_view v) {
    if (!seen) value = v;
    consistent = consistent && value == v;
    seen = true;
  }
};

// Reads one data row into `profile`. `first_line` remembers the line of
// every (stage, kind, clock) so that a duplicate names both lines.
using RowKey = std::tuple<int, Kind, int, std::string>;

void ParseRow(const std::string& source, int line, const Header& header,
              const std::vector<std::string_view>& fields, std::string_view raw,
              std::map<RowKey, int>* first_line, LegacySource* legacy, Profile* profile) {
  const std::string where = LineWhere(source, line);
  if (fields.size() != header.num_fields) {
    throw InputError(where + ": expected " + std::to_string(header.num_fields) +
                     " comma-separated fields (one per header column) but found " +
                     std::to_string(fields.size()) + " in " + Quote(Trim(raw)) +
                     "; fix the row or the header");
  }
  for (int c = 0; c < kNumRequired; ++c) {
    if (fields[header.index[c]].empty()) {
      throw InputError(where + ", column '" + std::string(kColumnNames[c]) +
                       "': the field is empty; fill it in or delete the row");
    }
  }
  auto field = [&](Column c) {
    return header.index[c] == kAbsent ? std::string_view() : fields[header.index[c]];
  };
  const int stage = ParseStage(where, field(kStage));
  const Kind kind = ParseInstruction(where, field(kInstruction));
  ClockPoint point;
  point.mhz = ParseFrequency(where, field(kFrequency));
  point.time_s = ParseMeasurement(where, kTime, field(kTime));
  point.energy_j = ParseMeasurement(where, kEnergy, field(kEnergy));
  point.samples = ParseSamples(where, field(kSamples));
  point.time_spread = ParseStatistic(where, kTimeSpread, field(kTimeSpread));
  point.energy_spread = ParseStatistic(where, kEnergySpread, field(kEnergySpread));
  point.confidence = ParseStatistic(where, kConfidence, field(kConfidence));
  point.approximate = ParseApproximate(where, field(kApproximate));
  point.line = line;
  for (const auto& [index, name] : header.knobs) {
    const std::string_view value = fields[index];
    if (value.empty()) continue;  // this row does not set the knob
    if (!KnobWord(value)) {
      throw InputError(where + ", column 'knob." + name + "': " + Quote(value) +
                       " is not a knob value; use letters, digits and _.+- (e.g. 2, on, "
                       "window-4)");
    }
    if (!point.knobs.empty()) point.knobs += ';';
    point.knobs += name + "=" + std::string(value);
  }
  if (point.energy_j > kMaxInstructionPowerW * point.time_s) {
    FieldError(where, kEnergy, field(kEnergy),
               "J in " + Exact(point.time_s) + " s is a mean power of " +
                   Exact(std::round(point.energy_j / point.time_s)) +
                   " W, more than any GPU draws (at most " + Exact(kMaxInstructionPowerW) +
                   " W); energy is the joules ONE GPU uses for the instruction: re-measure "
                   "this clock or delete the row");
  }
  if (header.index[kSourceColumn] != kAbsent) legacy->Add(field(kSourceColumn));

  auto [it, inserted] = first_line->emplace(RowKey{stage, kind, point.mhz, point.knobs}, line);
  if (!inserted) {
    const std::string knobs = point.knobs.empty() ? "" : " with knobs " + point.knobs;
    throw InputError(where + ": duplicate row for stage " + std::to_string(stage) + " " +
                     std::string(KindName(kind)) + " at " + std::to_string(point.mhz) + " MHz" +
                     knobs + " (first given on line " + std::to_string(it->second) +
                     "); keep one measurement per (stage, instruction, frequency" +
                     (header.knobs.empty() ? "" : ", knobs") + ")");
  }
  profile->Add(stage, kind, point, where);
}

// ---- Writing -------------------------------------------------------------------

// A metadata value as the writer will write it (trimmed, as the reader trims
// it), after checking that the reader will accept it. "" = not written.
std::string WritableText(MetaKey key, const std::string& value) {
  const std::string field(kMetaFields[key]);
  if (value.find_first_of("\r\n") != std::string::npos) {
    throw InputError(field, field + " contains a line break; a profile metadata value is one line");
  }
  const std::string trimmed(Trim(value));
  if (trimmed.empty()) return trimmed;
  const std::string problem = TextValueProblem(key, trimmed);
  if (!problem.empty()) throw InputError(field, field + ": " + problem);
  return trimmed;
}

std::string MetadataLines(const ProfileMetadata& m) {
  std::array<std::string, kNumKeys> values;
  values[kGpu] = WritableText(kGpu, m.gpu);
  if (m.p_block_w) {
    CheckPBlock(*m.p_block_w, std::string(kMetaFields[kPBlock]));
    values[kPBlock] = Exact(*m.p_block_w);
  }
  values[kSource] = WritableText(kSource, m.source);
  values[kDate] = WritableText(kDate, m.date);
  values[kVersion] = WritableText(kVersion, m.joulepipe_version);
  values[kMethod] = WritableText(kMethod, m.method);
  std::string out;
  for (int k = 0; k < kNumKeys; ++k) {
    if (!values[k].empty()) out += "# " + std::string(kMetaKeys[k]) + ": " + values[k] + "\n";
  }
  // No metadata, no '#' lines: the file is a plain Perseus/Zeus CSV that
  // readers without comment support take as it is.
  return out.empty() ? out : std::string(kIdentifyingLine) + "\n" + out;
}

// The value of knob `name` in a ClockPoint::knobs text, "" if absent.
std::string_view KnobValue(std::string_view knobs, std::string_view name) {
  for (const auto& [knob, value] : SplitKnobs(knobs)) {
    if (knob == name) return value;
  }
  return {};
}

void AppendRow(int stage, Kind kind, const ClockPoint& p, const std::array<bool, kNumColumns>& has,
               const std::vector<std::string>& knob_names, std::string* out) {
  *out += std::to_string(stage) + "," + std::string(KindName(kind)) + "," + std::to_string(p.mhz) +
          "," + Exact(p.time_s) + "," + Exact(p.energy_j);
  auto optional = [&](Column c, const auto& value, auto format) {
    if (!has[c]) return;
    *out += ',';
    if (value) *out += format(*value);
  };
  const auto exact = [](double v) { return Exact(v); };
  optional(kSamples, p.samples, [](int v) { return std::to_string(v); });
  optional(kTimeSpread, p.time_spread, exact);
  optional(kEnergySpread, p.energy_spread, exact);
  optional(kConfidence, p.confidence, exact);
  optional(kApproximate, p.approximate, [](bool v) { return std::string(v ? "1" : "0"); });
  for (const std::string& name : knob_names) {
    *out += ',';
    *out += KnobValue(p.knobs, name);
  }
  *out += '\n';
}

}  // namespace

void Profile::RemovePoint(int stage, Kind kind, std::size_t index) {
  std::vector<ClockPoint>& points = points_.at({stage, kind});
  if (index >= points.size()) throw std::out_of_range("Profile::RemovePoint: no such row");
  points.erase(points.begin() + static_cast<std::ptrdiff_t>(index));
}

void Profile::SetTime(int stage, Kind kind, std::size_t index, double time_s) {
  std::vector<ClockPoint>& points = points_.at({stage, kind});
  if (index >= points.size()) throw std::out_of_range("Profile::SetTime: no such row");
  if (!(std::isfinite(time_s) && time_s > 0 && time_s <= kMaxInstructionSeconds)) {
    throw InputError("ClockPoint::time_s",
                     "Profile::SetTime: ClockPoint::time_s must be finite, > 0 and at most an "
                     "hour");
  }
  points[index].time_s = time_s;
}

void Profile::Add(int stage, Kind kind, ClockPoint point, const std::string& where) {
  const std::string what = "stage " + std::to_string(stage) + " " + std::string(KindName(kind)) +
                           " at " + std::to_string(point.mhz) + " MHz";
  if (stage < 0) {
    throw InputError(where + ": stage " + std::to_string(stage) +
                     " is negative; stage ids start at 0");
  }
  if (stage > kMaxStageId) {
    throw InputError(where + ": stage " + std::to_string(stage) +
                     " is over the largest stage id, " + std::to_string(kMaxStageId) +
                     " (1,024 stages x 1,024 virtual chunks)");
  }
  if (point.mhz <= 0 || point.mhz > kMaxClockMhz) {
    throw InputError("ClockPoint::mhz", where + ": " + what +
                                            ": ClockPoint::mhz must be an SM clock of 1.." +
                                            std::to_string(kMaxClockMhz) + " MHz");
  }
  auto check = [&](const char* field, double value, bool ok, const char* rule) {
    if (ok) return;
    char got[64];
    std::snprintf(got, sizeof got, "%g", value);
    throw InputError(
        field, where + ": " + what + ": " + field + " must be " + rule + " (got " + got + ")");
  };
  check("ClockPoint::time_s", point.time_s, std::isfinite(point.time_s) && point.time_s > 0,
        "finite and > 0 seconds");
  check("ClockPoint::energy_j", point.energy_j, std::isfinite(point.energy_j) && point.energy_j > 0,
        "finite and > 0 joules");
  check("ClockPoint::time_s", point.time_s, point.time_s <= kMaxInstructionSeconds,
        "at most an hour (3600 s) per instruction");
  check("ClockPoint::energy_j", point.energy_j,
        point.energy_j <= kMaxInstructionPowerW * point.time_s,
        "at most 5000 W x ClockPoint::time_s (a GPU's mean power over the instruction is at "
        "most 5000 W)");
  if (point.samples) {
    check("ClockPoint::samples", *point.samples, *point.samples >= 0, ">= 0");
  }
  for (auto [field, value] : {std::pair{"ClockPoint::time_spread", point.time_spread},
                              std::pair{"ClockPoint::energy_spread", point.energy_spread},
                              std::pair{"ClockPoint::confidence", point.confidence}}) {
    if (value) check(field, *value, std::isfinite(*value) && *value >= 0, "finite and >= 0");
  }
  const std::string problem = KnobsProblem(point.knobs);
  if (!problem.empty()) {
    throw InputError("ClockPoint::knobs", where + ": " + what + ": ClockPoint::knobs " +
                                              Quote(point.knobs) + " " + problem);
  }
  std::vector<ClockPoint>& points = points_[{stage, kind}];
  // Highest clock first, then fastest, cheapest, knob text.
  const auto before = [](const ClockPoint& a, const ClockPoint& b) {
    if (a.mhz != b.mhz) return a.mhz > b.mhz;
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    if (a.energy_j != b.energy_j) return a.energy_j < b.energy_j;
    return a.knobs < b.knobs;
  };
  for (auto same = std::lower_bound(points.begin(), points.end(), point.mhz,
                                    [](const ClockPoint& p, int mhz) { return p.mhz > mhz; });
       same != points.end() && same->mhz == point.mhz; ++same) {
    if (same->knobs == point.knobs) {
      throw InputError(where + ": duplicate measurement for " + what +
                       (point.knobs.empty() ? "" : " with knobs " + point.knobs) +
                       "; keep one measurement per (stage, instruction, clock" +
                       (point.knobs.empty() ? "" : ", knobs") + ")");
    }
  }
  int index = KnobIndex(point.knobs);
  if (index < 0) {
    if (static_cast<int>(knobs_->size()) > kMaxKnobSettings) {
      throw InputError("ClockPoint::knobs", where + ": " + what + ": more than " +
                                                std::to_string(kMaxKnobSettings) +
                                                " distinct knob settings in one profile");
    }
    // Others (a copy of this profile, a frontier) may hold the table and
    // rely on it not changing: grow a copy then. Sole owner: grow in place.
    if (knobs_.use_count() > 1) knobs_ = std::make_shared<std::vector<std::string>>(*knobs_);
    knobs_->push_back(point.knobs);
    index = static_cast<int>(knobs_->size()) - 1;
  }
  point.knob = static_cast<std::uint16_t>(index);
  points.insert(std::lower_bound(points.begin(), points.end(), point, before), std::move(point));
}

int Profile::KnobIndex(const std::string& knobs) const {
  const auto it = std::find(knobs_->begin(), knobs_->end(), knobs);
  return it == knobs_->end() ? -1 : static_cast<int>(it - knobs_->begin());
}

std::string KnobsProblem(const std::string& knobs) {
  const auto items = SplitKnobs(knobs);
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (!KnobWord(it->first) || !KnobWord(it->second)) {
      return "is not a knob setting: write name=value pairs joined by ';' (names and values of "
             "letters, digits and _.+-), e.g. overlap=2;comm_sms=12";
    }
    const auto same = [&](const auto& other) { return other.first == it->first; };
    if (std::any_of(items.begin(), it, same)) {
      return "names the knob '" + std::string(it->first) + "' twice";
    }
  }
  return "";
}

int Profile::num_stages() const {
  // Keys sort by stage first, so the last key holds the highest stage.
  return points_.empty() ? 0 : points_.rbegin()->first.first + 1;
}

std::vector<int> Profile::stages() const {
  std::vector<int> out;
  for (const auto& entry : points_) {
    if (out.empty() || out.back() != entry.first.first) out.push_back(entry.first.first);
  }
  return out;
}

int Profile::num_rows() const {
  std::size_t rows = 0;
  for (const auto& entry : points_) rows += entry.second.size();
  return static_cast<int>(rows);
}

void Profile::Validate(int expected_stages, const std::string& source) const {
  if (expected_stages < 1) {
    throw InputError("Spec::stages", "Spec::stages must be at least 1 (got " +
                                         std::to_string(expected_stages) + ") to check " + source +
                                         " against it; a pipeline has one stage or more");
  }
  if (points_.empty()) {
    throw InputError(source +
                     ": profile has no measurements; it needs forward and backward "
                     "rows for stages 0.." +
                     std::to_string(expected_stages - 1));
  }
  const std::vector<int> stages = this->stages();
  const bool exact =
      static_cast<int>(stages.size()) == expected_stages && stages.back() == expected_stages - 1;
  if (!exact) {
    std::vector<int> missing;
    for (int s = 0; s < expected_stages; ++s) {
      if (!std::binary_search(stages.begin(), stages.end(), s)) missing.push_back(s);
    }
    std::string message = source + ": profile has stages " + FormatStages(stages) +
                          " but Spec::stages is " + std::to_string(expected_stages);
    if (!missing.empty()) {
      message += (missing.size() == 1 ? "; stage " : "; stages ") + FormatStages(missing) +
                 (missing.size() == 1 ? " is missing" : " are missing");
    }
    message += "; profile every stage 0.." + std::to_string(expected_stages - 1);
    const bool contiguous =
        stages.front() == 0 && stages.back() + 1 == static_cast<int>(stages.size());
    if (contiguous) message += " or set Spec::stages to " + std::to_string(stages.size());
    throw InputError("Spec::stages", message);
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

const ClockPoint* Profile::Find(int stage, Kind kind, int mhz, int knob) const {
  const std::vector<ClockPoint>& points = Points(stage, kind);
  auto pos = std::lower_bound(points.begin(), points.end(), mhz,
                              [](const ClockPoint& p, int m) { return p.mhz > m; });
  // knob 0: the row without knobs at `mhz` if there is one, else the
  // fastest there (the first: points of one clock are fastest first).
  const ClockPoint* first = pos != points.end() && pos->mhz == mhz ? &*pos : nullptr;
  for (; pos != points.end() && pos->mhz == mhz; ++pos) {
    if (pos->knob == knob) return &*pos;
  }
  return knob == 0 ? first : nullptr;
}

const ClockPoint& Profile::MaxClock(int stage, Kind kind) const {
  const std::vector<ClockPoint>& points = Points(stage, kind);
  if (points.empty()) {
    throw std::logic_error("Profile::MaxClock: no clocks for stage " + std::to_string(stage) + " " +
                           std::string(KindName(kind)));
  }
  return *Find(stage, kind, points.front().mhz);  // knob 0 at the highest clock
}

Profile ParseProfileCsv(const std::string& text, const std::string& source) {
  std::string_view rest(text);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);  // UTF-8 BOM

  Profile profile;
  std::optional<Header> header;
  std::map<RowKey, int> first_line;
  std::array<int, kNumKeys> metadata_line{};  // 0: not given
  LegacySource legacy;
  std::vector<std::string_view> fields;
  int header_line = 0;
  int rows = 0;
  bool comments = false;
  for (int line = 1; !rest.empty(); ++line) {
    const size_t newline = rest.find('\n');
    const std::string_view raw = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    const std::string_view trimmed = Trim(raw);
    if (trimmed.empty()) continue;  // blank lines (including trailing ones) carry nothing
    if (trimmed.front() == '#') {
      // Before the header: metadata (or a comment); after it: a comment.
      if (!header) ParseMetadataLine(source, line, raw, &metadata_line, &profile.metadata);
      comments = true;
      continue;
    }
    SplitFields(raw, &fields);
    if (!header) {
      header = ParseHeader(LineWhere(source, line), fields);
      header_line = line;
      continue;
    }
    ParseRow(source, line, *header, fields, raw, &first_line, &legacy, &profile);
    ++rows;
  }
  if (!header) {
    const std::string what = comments ? "has only '#' lines, no CSV header" : "is empty";
    throw InputError(source + ": the file " + what + "; a profile is a CSV with the header " +
                     std::string(kCanonicalHeader) +
                     " and one row per (stage, instruction, frequency)");
  }
  if (rows == 0) {
    throw InputError(source + ": no data rows after the header on line " +
                     std::to_string(header_line) +
                     "; add one row per (stage, instruction, frequency)");
  }
  if (profile.metadata.source.empty() && legacy.seen && legacy.consistent &&
      KnownSource(legacy.value)) {
    profile.metadata.source = legacy.value;
  }
  return profile;
}

Profile ReadProfileCsv(const std::string& path) {
  return ParseProfileCsv(ReadWholeFile(path, "profile"), path);
}

std::string ProfileToCsv(const Profile& profile) {
  std::string out = MetadataLines(profile.metadata);
  // Statistics columns: those some point has.
  std::array<bool, kNumColumns> has{};
  const int stages = profile.num_stages();
  for (int s = 0; s < stages; ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      for (const ClockPoint& p : profile.Points(s, kind)) {
        has[kSamples] = has[kSamples] || p.samples.has_value();
        has[kTimeSpread] = has[kTimeSpread] || p.time_spread.has_value();
        has[kEnergySpread] = has[kEnergySpread] || p.energy_spread.has_value();
        has[kConfidence] = has[kConfidence] || p.confidence.has_value();
        has[kApproximate] = has[kApproximate] || p.approximate.has_value();
      }
    }
  }
  // Knob names in the order they first appear in the knob table.
  std::vector<std::string> knob_names;
  for (const std::string& setting : *profile.knob_settings()) {
    for (const auto& [name, value] : SplitKnobs(setting)) {
      if (std::find(knob_names.begin(), knob_names.end(), name) == knob_names.end()) {
        knob_names.emplace_back(name);
      }
    }
  }
  out += kCanonicalHeader;
  for (int c = kNumRequired; c < kNumColumns; ++c) {
    if (has[c]) out += "," + std::string(kColumnNames[c]);
  }
  for (const std::string& name : knob_names) out += ",knob." + name;
  out += '\n';
  // Per stage, clocks from the highest down, forward before backward; the
  // two kinds' clock lists (each highest first) are merged.
  for (int s = 0; s < stages; ++s) {
    const std::vector<ClockPoint>& forward = profile.Points(s, Kind::kForward);
    const std::vector<ClockPoint>& backward = profile.Points(s, Kind::kBackward);
    size_t f = 0, b = 0;
    while (f < forward.size() || b < backward.size()) {
      const int mhz = std::max(f < forward.size() ? forward[f].mhz : 0,
                               b < backward.size() ? backward[b].mhz : 0);
      if (f < forward.size() && forward[f].mhz == mhz) {
        AppendRow(s, Kind::kForward, forward[f++], has, knob_names, &out);
      }
      if (b < backward.size() && backward[b].mhz == mhz) {
        AppendRow(s, Kind::kBackward, backward[b++], has, knob_names, &out);
      }
    }
  }
  return out;
}

void WriteProfileCsv(const std::string& path, const Profile& profile) {
  WriteFileAtomically(path, ProfileToCsv(profile));
}

}  // namespace joulepipe::model
