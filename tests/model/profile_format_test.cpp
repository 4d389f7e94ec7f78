// The profile CSV as joulepipe writes it (docs/formats.md, "Profile CSV"):
// the writer and the reader agree to the last bit on points, statistics and
// metadata; metadata lines are checked (file, line, key); unknown keys and
// comments are skipped; Perseus CSVs still read unchanged.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/profile.hpp"
#include "joulepipe/model/version.hpp"

namespace joulepipe::model {
namespace {

const std::string kRealProfile =
    std::string(JOULEPIPE_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100_sxm_bf16.csv";
const std::string kHeader = "stage,instruction,frequency,time,energy\n";
const std::string kRows = "0,forward,1410,0.05,24\n0,backward,1410,0.09,44\n";

// "stage,instruction,frequency" of every data row of a CSV text, in order.
std::vector<std::string> RowKeys(const std::string& text) {
  std::vector<std::string> keys;
  std::istringstream in(text);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      header = true;
      continue;
    }
    size_t comma = line.find(',');
    comma = line.find(',', comma + 1);
    comma = line.find(',', comma + 1);
    keys.push_back(line.substr(0, comma));
  }
  return keys;
}

// Expects `f` to throw InputError whose message has every needle; returns it.
template <typename F>
InputError ExpectInputError(F f, std::initializer_list<std::string> needles) {
  try {
    f();
  } catch (const InputError& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << message;
    }
    return e;
  }
  ADD_FAILURE() << "no InputError";
  return InputError("");
}

void ExpectParseError(const std::string& csv, std::initializer_list<std::string> needles) {
  ExpectInputError([&] { ParseProfileCsv(csv, "P.csv"); }, needles);
}

// Every field of every point and of the metadata, compared exactly (doubles
// bit for bit).
void ExpectSameProfile(const Profile& a, const Profile& b) {
  EXPECT_EQ(a.metadata.gpu, b.metadata.gpu);
  EXPECT_EQ(a.metadata.p_block_w, b.metadata.p_block_w);
  EXPECT_EQ(a.metadata.source, b.metadata.source);
  EXPECT_EQ(a.metadata.date, b.metadata.date);
  EXPECT_EQ(a.metadata.joulepipe_version, b.metadata.joulepipe_version);
  EXPECT_EQ(a.metadata.method, b.metadata.method);
  ASSERT_EQ(a.num_stages(), b.num_stages());
  for (int s = 0; s < a.num_stages(); ++s) {
    for (Kind kind : {Kind::kForward, Kind::kBackward}) {
      const std::vector<ClockPoint>& pa = a.Points(s, kind);
      const std::vector<ClockPoint>& pb = b.Points(s, kind);
      ASSERT_EQ(pa.size(), pb.size()) << "stage " << s << " " << KindName(kind);
      for (size_t i = 0; i < pa.size(); ++i) {
        SCOPED_TRACE("stage " + std::to_string(s) + " " + std::string(KindName(kind)) + " at " +
                     std::to_string(pa[i].mhz));
        EXPECT_EQ(pa[i].mhz, pb[i].mhz);
        EXPECT_EQ(pa[i].time_s, pb[i].time_s);
        EXPECT_EQ(pa[i].energy_j, pb[i].energy_j);
        EXPECT_EQ(pa[i].samples, pb[i].samples);
        EXPECT_EQ(pa[i].time_spread, pb[i].time_spread);
        EXPECT_EQ(pa[i].energy_spread, pb[i].energy_spread);
        EXPECT_EQ(pa[i].confidence, pb[i].confidence);
        EXPECT_EQ(pa[i].approximate, pb[i].approximate);
      }
    }
  }
}

// Two stages; backward lacks one forward clock; values that need all 17
// digits; statistics on some points only.
Profile MeasuredProfile() {
  Profile p;
  p.metadata.gpu = "NVIDIA A100-SXM4-80GB";
  p.metadata.p_block_w = 83.64;
  p.metadata.source = "measured";
  p.metadata.date = "2025-03-01T14:05:09Z";
  p.metadata.joulepipe_version = "0.1.0";
  for (int s = 0; s < 2; ++s) {
    for (int mhz : {1410, 1395, 1200}) {
      ClockPoint f(mhz, (0.1 + 0.2) * (s + 1) * 1410 / mhz, 1.0 / 3.0 * mhz / (s + 1));
      f.samples = 12 + s;
      f.time_spread = 0.012345678901234567;
      f.energy_spread = 1e-300;
      f.confidence = std::nextafter(0.02, 1.0);
      f.approximate = mhz == 1395;
      p.Add(s, Kind::kForward, f);
      if (mhz == 1395) continue;
      ClockPoint b(mhz, 2 * f.time_s, 2 * f.energy_j);
      if (mhz == 1410) b.samples = 7;  // other statistics absent on backward rows
      p.Add(s, Kind::kBackward, b);
    }
  }
  return p;
}

// ---- Round trip ----------------------------------------------------------------

TEST(ProfileFormatTest, WriteThenReadGivesIdenticalPointsStatisticsAndMetadata) {
  const Profile original = MeasuredProfile();
  const std::string text = ProfileToCsv(original);
  const Profile read = ParseProfileCsv(text, "written.csv");
  ExpectSameProfile(original, read);
  EXPECT_EQ(ProfileToCsv(read), text);  // and the text is stable
}

TEST(ProfileFormatTest, TheMethodLineRoundTripsAndIsOneLine) {
  Profile p = MeasuredProfile();
  p.metadata.method = "workload model gpt3-1.3b on a100-pcie-80gb, framework hf-eager; validated";
  const std::string text = ProfileToCsv(p);
  EXPECT_NE(text.find("\n# method: workload model gpt3-1.3b on a100-pcie-80gb, framework "
                      "hf-eager; validated\n"),
            std::string::npos)
      << text;
  ExpectSameProfile(p, ParseProfileCsv(text, "method.csv"));
  p.metadata.method = "two\nlines";
  EXPECT_THROW(ProfileToCsv(p), InputError);
}

TEST(ProfileFormatTest, LayoutMetadataFirstThenPerseusRowOrder) {
  const std::string text = ProfileToCsv(MeasuredProfile());
  const std::string expected_start =
      "# joulepipe profile\n"
      "# gpu: NVIDIA A100-SXM4-80GB\n"
      "# p_block_w: 83.64\n"
      "# source: measured\n"
      "# date: 2025-03-01T14:05:09Z\n"
      "# joulepipe_version: 0.1.0\n"
      "stage,instruction,frequency,time,energy,samples,time_spread,energy_spread,confidence,"
      "approximate\n"
      "0,forward,1410,";
  EXPECT_EQ(text.substr(0, expected_start.size()), expected_start) << text;
  // A row without any statistic leaves their fields empty.
  const size_t at = text.find("0,backward,1200,");
  ASSERT_NE(at, std::string::npos);
  const std::string row = text.substr(at, text.find('\n', at) - at);
  EXPECT_EQ(row.substr(row.size() - 5), ",,,,,") << row;
  // Per stage and clock (highest first): forward, then backward; a clock
  // only one kind has gives one row.
  const std::vector<std::string> expected = {
      "0,forward,1410", "0,backward,1410", "0,forward,1395", "0,forward,1200", "0,backward,1200",
      "1,forward,1410", "1,backward,1410", "1,forward,1395", "1,forward,1200", "1,backward,1200"};
  EXPECT_EQ(RowKeys(text), expected);
}

TEST(ProfileFormatTest, StatisticColumnsOnlyWhenSomePointHasThem) {
  Profile p;
  ClockPoint a(1410, 0.05, 24);
  a.confidence = 0.01;
  p.Add(0, Kind::kForward, a);
  p.Add(0, Kind::kBackward, {1410, 0.09, 44});
  const std::string text = ProfileToCsv(p);
  EXPECT_EQ(text,
            "stage,instruction,frequency,time,energy,confidence\n"
            "0,forward,1410,0.05,24,0.01\n"
            "0,backward,1410,0.09,44,\n");
  ExpectSameProfile(p, ParseProfileCsv(text, "P.csv"));
}

TEST(ProfileFormatTest, WithoutMetadataTheFileIsAPlainPerseusCsv) {
  const Profile perseus = ReadProfileCsv(kRealProfile);
  EXPECT_TRUE(perseus.metadata.gpu.empty());
  EXPECT_FALSE(perseus.metadata.p_block_w.has_value());
  EXPECT_TRUE(perseus.metadata.source.empty());
  const std::string text = ProfileToCsv(perseus);
  EXPECT_EQ(text.rfind(kHeader, 0), 0u) << text.substr(0, 200);
  EXPECT_EQ(text.find('#'), std::string::npos);
  ExpectSameProfile(perseus, ParseProfileCsv(text, "copy.csv"));
  // Perseus orders rows the same way; only its numbers are spelled in fewer
  // digits (and its lines end in CRLF).
  std::ifstream file(kRealProfile, std::ios::binary);
  std::ostringstream original;
  original << file.rdbuf();
  std::string unix_text = original.str();
  unix_text.erase(std::remove(unix_text.begin(), unix_text.end(), '\r'), unix_text.end());
  EXPECT_EQ(RowKeys(text), RowKeys(unix_text));
  EXPECT_EQ(RowKeys(text).size(), 608u);
}

TEST(ProfileFormatTest, WriteProfileCsvWritesTheFileAtomically) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("joulepipe-profile-format-" + std::to_string(::getpid()));
  const std::string path = (dir / "sub" / "P.csv").string();
  const Profile original = MeasuredProfile();
  WriteProfileCsv(path, original);
  ExpectSameProfile(original, ReadProfileCsv(path));
  Profile other;
  other.Add(0, Kind::kForward, {1000, 1, 1});
  WriteProfileCsv(path, other);  // replaces it
  EXPECT_EQ(ReadProfileCsv(path).num_stages(), 1);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir / "sub")) ++entries;
  EXPECT_EQ(entries, 1u);  // no temporary file left
  std::filesystem::remove_all(dir);
}

// ---- Reading metadata ---------------------------------------------------------

TEST(ProfileMetadataTest, ReadsEveryKeyAndTrimsValues) {
  const Profile p = ParseProfileCsv(
      "\xEF\xBB\xBF# joulepipe profile\r\n"
      "#gpu:NVIDIA H100 80GB HBM3  \r\n"
      "  # p_block_w :  106\r\n"
      "# source: simulated\n"
      "\n"
      "# date: 2025-03-01\n"
      "# joulepipe_version: 9.9.9-dev\n" +
          kHeader + kRows,
      "P.csv");
  EXPECT_EQ(p.metadata.gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.metadata.p_block_w, 106.0);
  EXPECT_EQ(p.metadata.source, "simulated");
  EXPECT_EQ(p.metadata.date, "2025-03-01");
  EXPECT_EQ(p.metadata.joulepipe_version, "9.9.9-dev");
  EXPECT_NE(p.Find(0, Kind::kBackward, 1410), nullptr);
}

TEST(ProfileMetadataTest, UnknownKeysAndProseAreIgnored) {
  const Profile p = ParseProfileCsv(
      "# joulepipe profile\n"
      "# written by a later joulepipe\n"
      "# node: gpu-17\n"
      "# calibration: {\"a\": 1}\n"
      "# GPU: upper-case keys are not keys\n"
      "# p_block_w: 80\n" +
          kHeader + kRows,
      "P.csv");
  EXPECT_TRUE(p.metadata.gpu.empty());
  EXPECT_EQ(p.metadata.p_block_w, 80.0);
}

TEST(ProfileMetadataTest, HashLinesAfterTheHeaderAreCommentsEvenIfTheyLookLikeMetadata) {
  const Profile p = ParseProfileCsv(kHeader +
                                        "# measured on node 3\n"
                                        "0,forward,1410,0.05,24\n"
                                        "   # p_block_w: 99999\n"
                                        "# source: nonsense\n"
                                        "0,backward,1410,0.09,44\n"
                                        "#\n",
                                    "P.csv");
  EXPECT_FALSE(p.metadata.p_block_w.has_value());
  EXPECT_TRUE(p.metadata.source.empty());
  EXPECT_EQ(p.Points(0, Kind::kForward).size(), 1u);
  EXPECT_EQ(p.Points(0, Kind::kBackward).size(), 1u);
}

TEST(ProfileMetadataTest, BadPBlockNamesFileLineAndKey) {
  for (const char* bad : {"abc", "106 W", "nan", "inf", "-1", "5000.5", "1e308"}) {
    SCOPED_TRACE(bad);
    const InputError e = ExpectInputError(
        [&] {
          ParseProfileCsv("# joulepipe profile\n# gpu: x\n# p_block_w: " + std::string(bad) + "\n" +
                              kHeader + kRows,
                          "P.csv");
        },
        {"P.csv line 3", "metadata 'p_block_w'", "watts"});
    EXPECT_EQ(e.field(), "");  // a file position, not a struct field
  }
  for (const char* fine : {"0", "5000", "83.64", "+106"}) {
    SCOPED_TRACE(fine);
    EXPECT_NO_THROW(
        ParseProfileCsv("# p_block_w: " + std::string(fine) + "\n" + kHeader + kRows, "P.csv"));
  }
}

TEST(ProfileMetadataTest, BadTextValuesNameFileLineAndKey) {
  ExpectParseError("# source: guessed\n" + kHeader + kRows,
                   {"P.csv line 1", "metadata 'source'", "'guessed'", "measured, simulated"});
  for (const char* bad : {"yesterday", "2025-13-01", "2025-02-00", "2025-3-1", "20250301"}) {
    SCOPED_TRACE(bad);
    ExpectParseError("\n# date: " + std::string(bad) + "\n" + kHeader + kRows,
                     {"P.csv line 2", "metadata 'date'", "ISO 8601", "2025-03-01T14:05:09Z"});
  }
  ExpectParseError("# gpu:   \n" + kHeader + kRows, {"P.csv line 1", "metadata 'gpu'", "empty"});
}

TEST(ProfileMetadataTest, DuplicateKeyNamesBothLines) {
  ExpectParseError(
      "# joulepipe profile\n# p_block_w: 80\n# gpu: x\n# p_block_w: 80\n" + kHeader + kRows,
      {"P.csv line 4", "metadata 'p_block_w'", "twice", "line 2"});
}

TEST(ProfileMetadataTest, MetadataWithoutAHeaderIsNotAProfile) {
  ExpectParseError("# joulepipe profile\n# p_block_w: 80\n",
                   {"P.csv", "only '#' lines", "stage,instruction,frequency,time,energy"});
}

TEST(ProfileMetadataTest, LegacySourceColumnSetsTheSource) {
  const std::string legacy =
      "stage,instruction,frequency,time,energy,source\n"
      "0,forward,1410,0.05,24,simulated\n"
      "0,backward,1410,0.09,44,simulated\n";
  EXPECT_EQ(ParseProfileCsv(legacy, "P.csv").metadata.source, "simulated");
  EXPECT_EQ(ParseProfileCsv("# source: imported\n" + legacy, "P.csv").metadata.source, "imported");
  // Rows that disagree, or a value that is no source, say nothing.
  EXPECT_EQ(ParseProfileCsv("stage,instruction,frequency,time,energy,source\n"
                            "0,forward,1410,0.05,24,simulated\n"
                            "0,backward,1410,0.09,44,measured\n",
                            "P.csv")
                .metadata.source,
            "");
  EXPECT_EQ(ParseProfileCsv("stage,instruction,frequency,time,energy,source\n"
                            "0,forward,1410,0.05,24,zeus\n",
                            "P.csv")
                .metadata.source,
            "");
}

// ---- Reading statistics -------------------------------------------------------

TEST(ProfileStatisticsTest, ReadsColumnsInAnyOrderEmptyMeansAbsent) {
  const Profile p = ParseProfileCsv(
      "approximate,stage,confidence,instruction,frequency,samples,time,energy,rank,"
      "energy_spread,time_spread\n"
      "true,0,0.01,forward,1410,12,0.05,24,3,0.02,0.03\n"
      ",0,,backward,1410,,0.09,44,3,,\n"
      "0,0,,forward,1395,7.0,0.051,23,3,,\n",
      "P.csv");
  const ClockPoint* f = p.Find(0, Kind::kForward, 1410);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->samples, 12);
  EXPECT_EQ(f->time_spread, 0.03);
  EXPECT_EQ(f->energy_spread, 0.02);
  EXPECT_EQ(f->confidence, 0.01);
  EXPECT_EQ(f->approximate, true);
  const ClockPoint* b = p.Find(0, Kind::kBackward, 1410);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->samples || b->time_spread || b->energy_spread || b->confidence || b->approximate);
  const ClockPoint* g = p.Find(0, Kind::kForward, 1395);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->samples, 7);
  EXPECT_EQ(g->approximate, false);
}

TEST(ProfileStatisticsTest, BadStatisticsNameLineAndColumn) {
  const std::string header =
      "stage,instruction,frequency,time,energy,samples,confidence,approximate\n";
  ExpectParseError(header + "0,forward,1410,0.05,24,-1,0.01,0\n",
                   {"P.csv line 2", "column 'samples'", "'-1'"});
  ExpectParseError(header + "0,forward,1410,0.05,24,1.5,0.01,0\n",
                   {"P.csv line 2", "column 'samples'", "'1.5'"});
  ExpectParseError(header + "0,forward,1410,0.05,24,3,nan,0\n",
                   {"P.csv line 2", "column 'confidence'", "'nan'"});
  ExpectParseError(header + "0,forward,1410,0.05,24,3,-0.1,0\n", {"column 'confidence'", "'-0.1'"});
  ExpectParseError(header + "0,forward,1410,0.05,24,3,0.1,maybe\n",
                   {"P.csv line 2", "column 'approximate'", "'maybe'"});
  ExpectParseError("stage,instruction,frequency,time,energy,samples,samples\n0,forward,1,1,1,1,1\n",
                   {"line 1", "'samples'", "twice"});
}

// ---- Writing checks the metadata ------------------------------------------------

TEST(ProfileFormatTest, WriterRefusesMetadataTheReaderWouldRefuse) {
  Profile p;
  p.Add(0, Kind::kForward, {1410, 0.05, 24});
  p.metadata.p_block_w = 9000;
  EXPECT_EQ(
      ExpectInputError([&] { ProfileToCsv(p); }, {"ProfileMetadata::p_block_w", "9000"}).field(),
      "ProfileMetadata::p_block_w");
  p.metadata.p_block_w = std::numeric_limits<double>::quiet_NaN();
  ExpectInputError([&] { ProfileToCsv(p); }, {"ProfileMetadata::p_block_w"});
  p.metadata.p_block_w.reset();
  p.metadata.source = "guessed";
  EXPECT_EQ(
      ExpectInputError([&] { ProfileToCsv(p); }, {"ProfileMetadata::source", "'guessed'"}).field(),
      "ProfileMetadata::source");
  p.metadata.source = "";
  p.metadata.date = "March";
  ExpectInputError([&] { ProfileToCsv(p); }, {"ProfileMetadata::date", "ISO 8601"});
  p.metadata.date = "";
  p.metadata.gpu = "A100\n# p_block_w: 1";
  EXPECT_EQ(
      ExpectInputError([&] { ProfileToCsv(p); }, {"ProfileMetadata::gpu", "line break"}).field(),
      "ProfileMetadata::gpu");
  p.metadata.gpu = "  A100  ";  // written trimmed, as the reader trims
  EXPECT_EQ(ParseProfileCsv(ProfileToCsv(p), "P.csv").metadata.gpu, "A100");
}

// ---- Add names the ClockPoint field --------------------------------------------

TEST(ProfileStatisticsTest, AddRejectsBadStatisticsNamingTheField) {
  Profile p;
  ClockPoint point(1410, 0.05, 24);
  point.samples = -1;
  EXPECT_EQ(ExpectInputError([&] { p.Add(0, Kind::kForward, point, "here"); },
                             {"here", "stage 0 forward at 1410 MHz", "ClockPoint::samples"})
                .field(),
            "ClockPoint::samples");
  point.samples = 3;
  point.energy_spread = std::numeric_limits<double>::infinity();
  EXPECT_EQ(
      ExpectInputError([&] { p.Add(0, Kind::kForward, point); }, {"ClockPoint::energy_spread"})
          .field(),
      "ClockPoint::energy_spread");
  point.energy_spread = 0;
  EXPECT_EQ(ExpectInputError([&] { p.Add(0, Kind::kForward, {1410, -1, 24}); },
                             {"ClockPoint::time_s", "got -1"})
                .field(),
            "ClockPoint::time_s");
  EXPECT_NO_THROW(p.Add(0, Kind::kForward, point));
}

// ---- Version and date ---------------------------------------------------------

TEST(VersionTest, VersionIsTheProjectVersionAndDatesAreIsoUtc) {
  EXPECT_EQ(Version(), JOULEPIPE_VERSION);
  EXPECT_EQ(IsoUtc(std::chrono::system_clock::from_time_t(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(IsoUtc(std::chrono::system_clock::from_time_t(1740837909)), "2025-03-01T14:05:09Z");
  const std::string now = IsoUtcNow();
  EXPECT_EQ(now.size(), 20u);
  Profile p;
  p.Add(0, Kind::kForward, {1410, 0.05, 24});
  p.metadata.date = now;  // what writers put there reads back
  EXPECT_EQ(ParseProfileCsv(ProfileToCsv(p), "P.csv").metadata.date, now);
}

}  // namespace
}  // namespace joulepipe::model
