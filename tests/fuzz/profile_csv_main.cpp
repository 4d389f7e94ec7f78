// fuzz_profile_csv: the profile CSV reader (model::ParseProfileCsv), its
// '# key: value' metadata lines included, under random, mutated and hostile
// input (tests/fuzz/fuzz_engine.hpp has the flags and the exit status).
//
// Invariants, for every input:
//   * the reader returns a profile or throws model::InputError, nothing else;
//     a rejection's message is short and carries no library text;
//   * an accepted profile keeps its invariants (every time and energy finite
//     and > 0, statistics finite and >= 0, clocks > 0 and unique, sorted
//     highest first) and round-trips: ProfileToCsv then ParseProfileCsv gives
//     the same points, statistics and metadata, bit for bit;
//   * no input takes longer than --max-seconds.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "fuzz_engine.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"

namespace {

using joulepipe::fuzz::Generator;
using joulepipe::fuzz::Input;
using joulepipe::fuzz::MixedInput;
using joulepipe::fuzz::SameBits;
using joulepipe::model::ClockPoint;
using joulepipe::model::InputError;
using joulepipe::model::Kind;
using joulepipe::model::Profile;

const std::vector<std::string> kSeeds = {
    // Perseus/Zeus layout, no metadata.
    "stage,instruction,frequency,time,energy\n"
    "0,forward,1410,0.05,24.0\n0,forward,1395,0.051,23.5\n"
    "0,backward,1410,0.1,48.0\n0,backward,1395,0.102,47.1\n"
    "1,forward,1410,0.05,24.0\n1,backward,1410,0.1,48.0\n",
    // joulepipe's own layout: metadata and every statistics column.
    "# joulepipe profile\n# gpu: NVIDIA A40\n# p_block_w: 83.64\n# source: measured\n"
    "# date: 2025-03-01T14:05:09Z\n# joulepipe_version: 0.1.0\n"
    "stage,instruction,frequency,time,energy,samples,time_spread,energy_spread,confidence,"
    "approximate\n"
    "0,forward,1740,0.050285698917243507,30.672959935673806,12,0.01,0.02,0.015,0\n"
    "0,backward,1740,0.1,60.5,12,0.01,0.02,,1\n"
    "0,forward,1500,0.06,28.25,,,,,\n",
    // Other column order, extra columns, quotes, spaces, comments, blank lines.
    "\xEF\xBB\xBF# source: simulated\r\nrank, energy ,time,\"frequency\",instruction,stage\r\n"
    "# a comment\r\n\r\n3,24.0,0.05,1410,\"forward\",0\r\n3,48,0.1,1410,backward,0\r\n",
    // The legacy per-row source column of joulepipe 0.1.
    "stage,instruction,frequency,time,energy,source\n"
    "0,forward,1410,0.05,24,simulated\n0,backward,1410,0.1,48,simulated\n",
    // Integral floats, as pandas writes them; a '+' sign.
    "stage,instruction,frequency,time,energy\n0.0,forward,1410.0,+5e-2,2.4e1\n"
    "0,backward,1410,1e-1,48\n",
};

// Hostile values that read as numbers to the reader but stress the writer
// or the invariants (a stage id near INT_MAX, a subnormal time).
const std::vector<std::string> kEdgeNumbers = {
    "1000000", "2147483646", "4.9e-324", "1e-300", "1e300", "1.7976931348623157e308", "0.1",
    "-0",      "0",          "1",        "1e308",  "2147483647.0"};

const std::vector<std::string> kColumns = {
    "stage",       "instruction",   "frequency",  "time",        "energy", "samples",
    "time_spread", "energy_spread", "confidence", "approximate", "source", "rank"};

const std::vector<std::string> kMetaKeys = {"gpu",  "p_block_w",         "source",
                                            "date", "joulepipe_version", "unknown"};

std::string Field(Generator& g, const std::string& column) {
  if (g.OneIn(3)) return g.Pick(joulepipe::fuzz::HostileTokens());
  if (g.OneIn(4)) return g.Pick(kEdgeNumbers);
  if (column == "stage") return std::to_string(g.Below(4));
  if (column == "instruction") return g.OneIn(2) ? "forward" : "backward";
  if (column == "frequency") return std::to_string(210 + 15 * g.Below(100));
  if (column == "approximate") return g.OneIn(2) ? "1" : "0";
  if (column == "samples") return std::to_string(g.Below(100));
  if (column == "source") return g.OneIn(2) ? "simulated" : "measured";
  return std::to_string(g.Below(1000)) + "." + std::to_string(g.Below(1000));
}

std::string MetaValue(Generator& g, const std::string& key) {
  switch (g.Below(4)) {
    case 0:
      return g.Pick(joulepipe::fuzz::HostileTokens());
    case 1:
      return g.LongRun(g.OneIn(10) ? 100000 : 200);
    default:
      if (key == "p_block_w") return g.Pick(kEdgeNumbers);
      if (key == "source") return g.OneIn(2) ? "imported" : "simulated";
      if (key == "date") return g.OneIn(2) ? "2025-03-01" : "2025-13-40T00:00Z";
      return "NVIDIA H100 \xe2\x80\x94 80GB";
  }
}

// A CSV built field by field with hostile values in random places.
std::string StructuredCsv(Generator& g) {
  std::string csv;
  if (g.OneIn(3)) csv += "# joulepipe profile\n";
  for (std::size_t i = g.Below(4); i > 0; --i) {
    const std::string& key = g.Pick(kMetaKeys);
    csv += "#" + std::string(g.OneIn(4) ? "" : " ") + key + (g.OneIn(8) ? "" : ":") + " " +
           MetaValue(g, key) + "\n";
  }
  std::vector<std::string> columns = {"stage", "instruction", "frequency", "time", "energy"};
  for (std::size_t i = g.Below(4); i > 0; --i) columns.push_back(g.Pick(kColumns));
  for (std::size_t i = 0; i < columns.size(); ++i) {
    std::swap(columns[i], columns[g.Below(columns.size())]);
  }
  if (g.OneIn(10)) columns.erase(columns.begin() + static_cast<long>(g.Below(columns.size())));
  for (std::size_t i = 0; i < columns.size(); ++i) csv += (i ? "," : "") + columns[i];
  csv += g.OneIn(5) ? "\r\n" : "\n";
  const std::size_t rows = g.OneIn(50) ? 1 + g.Below(5000) : g.Below(12);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      std::string value = g.OneIn(6) ? g.Pick(joulepipe::fuzz::HostileTokens())
                                     : Field(g, columns[i]);
      if (g.OneIn(20)) value = "\"" + value + "\"";
      if (g.OneIn(20)) value = " " + value + " ";
      csv += (i ? "," : "") + value;
    }
    if (g.OneIn(30)) csv += ",extra";
    csv += g.OneIn(5) ? "\r\n" : "\n";
  }
  return csv;
}

// A size for a long line: up to 16 KiB, one time in 8 up to 1 MiB.
std::size_t Big(Generator& g) { return g.OneIn(8) ? 1 << 20 : 1 << 14; }

// Shapes no seed has: very long lines and fields, very wide rows, only
// comments, only blank lines.
std::string Extreme(Generator& g) {
  switch (g.Below(8)) {
    case 0:  // one very long field
      return "stage,instruction,frequency,time,energy\n0,forward,1410," + g.LongRun(Big(g)) +
             ",24\n";
    case 1: {  // a header of many columns
      std::string csv;
      for (std::size_t i = g.Below(Big(g) / 10); i > 0; --i) csv += "c,";
      return csv + "stage,instruction,frequency,time,energy\n0,forward,1410,0.05,24\n";
    }
    case 2: {  // a row of many fields
      std::string row = "0,forward,1410,0.05,24";
      for (std::size_t i = g.Below(Big(g) / 10); i > 0; --i) row += ",1";
      return "stage,instruction,frequency,time,energy\n" + row + "\n";
    }
    case 3:  // a very long metadata line
      return "# gpu: " + g.LongRun(Big(g)) + "\n" + kSeeds[0];
    case 4: {  // only comments or blank lines
      std::string csv;
      for (std::size_t i = g.Below(1000); i > 0; --i) csv += g.OneIn(2) ? "#\n" : " \r\n";
      return csv;
    }
    case 6: {  // a valid number spelled with very many digits, in any numeric column
      const std::string zeros(g.Below(Big(g)), '0');
      const std::string number = g.OneIn(2) ? "0." + zeros + "5" : "0.00001" + zeros;
      std::string row[] = {"0", "forward", "1410", "0.05", "24"};
      row[g.OneIn(2) ? 3 : g.OneIn(2) ? 4 : 2] = number;
      return "stage,instruction,frequency,time,energy\n" + row[0] + "," + row[1] + "," + row[2] +
             "," + row[3] + "," + row[4] + "\n";
    }
    default: {  // NUL bytes everywhere
      std::string csv = g.Seed();
      for (char& c : csv) {
        if (g.OneIn(10)) c = '\0';
      }
      return csv;
    }
  }
}

Input Next(Generator& g) {
  return MixedInput(g, StructuredCsv, Extreme, "long lines and fields");
}

template <typename T>
bool SameOptional(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  if constexpr (std::is_same_v<T, double>) {
    return SameBits(*a, *b);
  } else {
    return *a == *b;
  }
}

// The (stage, kind) lists of `profile`, found without walking every stage id
// up to the highest (a profile may have one row for stage 2147483646).
std::map<std::pair<int, Kind>, std::vector<ClockPoint>> Lists(const Profile& profile,
                                                              const std::vector<int>& stages) {
  std::map<std::pair<int, Kind>, std::vector<ClockPoint>> lists;
  for (int s : stages) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      if (!profile.Points(s, kind).empty()) lists[{s, kind}] = profile.Points(s, kind);
    }
  }
  return lists;
}

// The stage ids a CSV names (an upper bound: rows of rejected lines are not
// in the profile, and Lists skips ids without points).
std::vector<int> StageIds(const Profile& profile) {
  std::vector<int> stages;
  const int n = profile.num_stages();
  if (n <= 100000) {
    for (int s = 0; s < n; ++s) stages.push_back(s);
  } else {
    for (int s = 0; s < 100000; ++s) stages.push_back(s);
    stages.push_back(n - 1);
  }
  return stages;
}

std::string CheckProfile(const Profile& profile, const std::vector<int>& stages) {
  for (const auto& [key, points] : Lists(profile, stages)) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      const ClockPoint& p = points[i];
      if (p.mhz <= 0 || (i > 0 && points[i - 1].mhz <= p.mhz)) {
        return "clocks not positive, unique and highest first";
      }
      if (!std::isfinite(p.time_s) || !(p.time_s > 0) || !std::isfinite(p.energy_j) ||
          !(p.energy_j > 0)) {
        return "a time or energy that is not finite and > 0 was accepted";
      }
      if ((p.samples && *p.samples < 0) ||
          (p.time_spread && !(std::isfinite(*p.time_spread) && *p.time_spread >= 0)) ||
          (p.energy_spread && !(std::isfinite(*p.energy_spread) && *p.energy_spread >= 0)) ||
          (p.confidence && !(std::isfinite(*p.confidence) && *p.confidence >= 0))) {
        return "a statistic that is negative or not finite was accepted";
      }
    }
  }
  return "";
}

std::string Compare(const Profile& a, const Profile& b, const std::vector<int>& stages) {
  if (a.num_stages() != b.num_stages()) return "the number of stages differs";
  const auto la = Lists(a, stages), lb = Lists(b, stages);
  if (la.size() != lb.size()) return "the (stage, instruction) lists differ";
  for (const auto& [key, points] : la) {
    const auto it = lb.find(key);
    if (it == lb.end() || it->second.size() != points.size()) {
      return "stage " + std::to_string(key.first) + " has a different number of clocks";
    }
    for (std::size_t i = 0; i < points.size(); ++i) {
      const ClockPoint &p = points[i], &q = it->second[i];
      if (p.mhz != q.mhz || !SameBits(p.time_s, q.time_s) || !SameBits(p.energy_j, q.energy_j) ||
          !SameOptional(p.samples, q.samples) || !SameOptional(p.time_spread, q.time_spread) ||
          !SameOptional(p.energy_spread, q.energy_spread) ||
          !SameOptional(p.confidence, q.confidence) ||
          !SameOptional(p.approximate, q.approximate)) {
        return "stage " + std::to_string(key.first) + " clock " + std::to_string(p.mhz) +
               " differs";
      }
    }
  }
  const auto &ma = a.metadata, &mb = b.metadata;
  if (ma.gpu != mb.gpu || !SameOptional(ma.p_block_w, mb.p_block_w) || ma.source != mb.source ||
      ma.date != mb.date || ma.joulepipe_version != mb.joulepipe_version) {
    return "the metadata differs";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const joulepipe::fuzz::Options options =
      joulepipe::fuzz::ParseOptions(argc, argv, "fuzz_profile_csv");
  joulepipe::fuzz::Driver driver("fuzz_profile_csv", options);
  return driver.Run(
      Next,
      [&](const std::string& text) -> std::string {
        Profile profile;
        try {
          profile = joulepipe::model::ParseProfileCsv(text, "fuzz.csv");
        } catch (const InputError& e) {
          driver.Rejected(e.what());
          return joulepipe::fuzz::CheckMessage(e.what());
        }
        driver.Accepted();
        const std::vector<int> stages = StageIds(profile);
        if (std::string broken = CheckProfile(profile, stages); !broken.empty()) return broken;
        // The writer walks every stage id up to the highest; a profile whose
        // highest id is absurd is checked above but not written (reported).
        if (profile.num_stages() > 100000) {
          driver.Note("not written back: highest stage id above 100000");
          return "";
        }
        std::string csv;
        try {
          csv = joulepipe::model::ProfileToCsv(profile);
        } catch (const InputError& e) {
          return std::string("the writer refused an accepted profile: ") + e.what();
        }
        Profile back;
        try {
          back = joulepipe::model::ParseProfileCsv(csv, "written.csv");
        } catch (const InputError& e) {
          return std::string("the written profile does not read back: ") + e.what();
        }
        if (std::string broken = Compare(profile, back, stages); !broken.empty()) {
          return "round trip: " + broken;
        }
        return "";
      },
      kSeeds);
}
