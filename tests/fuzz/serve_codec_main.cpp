// fuzz_serve_codec: the JSON readers of `joulepipe serve` (src/serve/codec.hpp:
// ParseBody, then JobConfigFromJson, RankInfoFromJson strict and not,
// IterationReportFromJson, JobInfoFromJson, ProfilingResultFromJson) and
// the coord checks each route runs behind them, under random, mutated and
// hostile request bodies (tests/fuzz/fuzz_engine.hpp has the flags and the
// exit status). Every input goes through every reader, as any body can be
// sent to any route.
//
// Invariants, for every input:
//   * each reader returns a value or throws model::InputError (the only
//     error codec.hpp documents), nothing else; so do coord::CheckJobConfig
//     and coord::Job::RegisterRank behind them;
//   * a rejection's message is short and carries no JSON library text, also
//     after ForApi (the route's renaming); its field() is "" or a
//     "<Struct>[::member]" token, never input text, and after ForApi names
//     no library struct (Spec::, PlanRequest::, Options::);
//   * an accepted JobConfig, its job_id assigned by ZeusStyleJobId when
//     empty (as POST /jobs does), passes CheckJobConfig or is refused by it
//     for a field other than an assigned job_id, quickly (it checks the
//     schedule's shape without building it); a checked config, and an
//     unchecked one that names its
//     world_size, round-trips through JobConfigToJson, dump() and the reader
//     to an equal config, doubles bit for bit;
//   * an accepted RankInfo holds the body's numbers exactly and round-trips
//     through RankInfoToJson; one a job accepts is within coord's ranges;
//   * an accepted IterationReport has iteration >= 0, time in
//     (0, kMaxIterationTimeS], energy absent or in [0, kMaxIterationEnergyJ],
//     and the body's rank and iteration exactly;
//   * an accepted JobInfo has degrees >= 1 and world_size = pp x dp x tp; the
//     job the Zeus route builds from it is never refused for its job id;
//   * an accepted ProfilingResult has rank >= 0, times and energies in the
//     same ranges, and no energies or one per time;
//   * no input takes longer than --max-seconds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_engine.hpp"
#include "joulepipe/coord/job.hpp"
#include "joulepipe/model/error.hpp"
#include "src/serve/codec.hpp"

namespace {

using joulepipe::fuzz::CheckMessage;
using joulepipe::fuzz::Generator;
using joulepipe::fuzz::Input;
using joulepipe::fuzz::MixedInput;
using joulepipe::fuzz::ReplaceJsonMembers;
using joulepipe::fuzz::SameBits;
using joulepipe::model::InputError;
using nlohmann::json;
namespace coord = joulepipe::coord;
namespace serve = joulepipe::serve;
namespace protocol = joulepipe::protocol;

// A fixed clock for ZeusStyleJobId (2024-01-02 03:04:05 UTC).
constexpr std::int64_t kNowUnix = 1'704'164'645;

// A valid checked JobConfig as the store keeps it (JobConfigToJson).
std::string StoredConfig() {
  protocol::JobConfig c;
  c.job_id = "2024-01-02-03-04-05+dp2+pp4+tp1+joulepipe+gpt3";
  c.pp_degree = 4;
  c.dp_degree = 2;
  c.tp_degree = 1;
  c.spec.kind = joulepipe::schedule::Kind::kInterleaved;
  c.spec.stages = 4;
  c.spec.microbatches = 8;
  c.spec.chunks = 2;
  c.p_block_w = 1.0 / 3.0;
  c.resolution_s = 0.0123456789;
  c.gpu = "A100-SXM4-80GB";
  c.metadata = "gpt3 \xe2\x82\xac";
  coord::CheckJobConfig(&c);
  return protocol::JobConfigToJson(c).dump();
}

std::vector<std::string> Seeds() {
  return {
      // POST /jobs
      R"({"job_id": "job-1", "pp_degree": 2, "dp_degree": 2, "tp_degree": 1, "world_size": 4,
 "schedule": "1f1b", "microbatches": 4, "chunks": 1, "p_block_w": 70.5, "resolution_s": 0.005,
 "gpu": "A100-SXM4-80GB", "metadata": "fuzz",
 "straggler": {"threshold": 1.05, "recover_below": 1.03, "window": 2, "min_change": 0.05}})",
      R"({"pp_degree": 4, "dp_degree": 1, "tp_degree": 2, "schedule": "interleaved",
 "microbatches": 8, "chunks": 2})",
      R"({"job_id": null, "pp_degree": 1, "dp_degree": 3, "tp_degree": 1, "world_size": null,
 "schedule": "gpipe", "microbatches": 1, "p_block_w": null, "straggler": {"window": 100}})",
      StoredConfig(),
      // POST /jobs/{id}/ranks, POST /register_rank/{id}
      R"({"rank": 3, "dp_rank": 1, "pp_rank": 1, "tp_rank": 0,
 "available_frequencies": [1410, 1395, 1380, 210]})",
      R"({"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0})",
      R"({"rank": 7, "dp_rank": 1, "pp_rank": 1, "tp_rank": 1, "available_frequencies": null,
 "hostname": "node-7"})",
      // POST /jobs/{id}/iterations
      R"({"rank": 0, "iteration": 12, "time_s": 1.25, "energy_j": 850.5})",
      R"({"rank": 5, "iteration": 0, "time_s": 86400, "energy_j": null})",
      // Zeus: POST /register_job, POST /report_profiling_result/{id}
      R"({"job_id": "", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "world_size": 2,
 "job_metadata": "gpt3 run", "framework": "megatron"})",
      R"({"pp_degree": 4, "dp_degree": 2, "tp_degree": 2, "world_size": 16, "job_metadata": null})",
      R"({"rank": 1, "iter_time": [1.1, 1.2, 1.15], "iter_energy": [100.0, 101.5, 99.0],
 "time_breakdown": {"forward": [[0.1, 0.2]]}, "energy_breakdown": {}})",
      R"({"rank": 0, "iter_time": [0.5], "iter_energy": []})",
  };
}

// JSON texts to put where a value goes: every type, the limits of int,
// int64 and double, the routes' own limits and their neighbours, integral
// floats, strings a job id may not hold, escapes, invalid UTF-8.
const std::vector<std::string> kJsonValues = {
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1",
    "2",
    "3",
    "4",
    "8",
    "1.0",
    "0.5",
    "-0.0",
    "1e-300",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "4294967296",
    "4294967295",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744071562067968",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "1e309",
    "4.9e-324",
    "NaN",
    "Infinity",
    "1024",
    "1025",
    "100000",
    "100001",
    "10000000",
    "10000001",
    "4096",
    "4097",
    "10000",
    "10001",
    "86400",
    "86400.00000000001",
    "1e12",
    "1000000000000.0001",
    "3600",
    "3600.0000001",
    "0.005",
    "1.05",
    "1.03",
    "100",
    "101",
    "70",
    "\"\"",
    "\"1\"",
    "\"1f1b\"",
    "\"gpipe\"",
    "\"interleaved\"",
    "\"1F1B\"",
    "\"job/1\"",
    "\"a b\"",
    "\"\\u0000\"",
    "\"\\u001f\"",
    "\"\\ud800\"",
    "\"\\ud83d\\ude00\"",
    "\"\xff\"",
    "\"\xe2\x82\xac\"",
    "[]",
    "[1]",
    "[[]]",
    "{}",
    "[1410, 1410]",
    "[0]",
    "[10001]",
    "[-1]",
    "[18446744073709551615]",
    "[18446744071562067968]",
    "[9223372036854775808]",
    "[-2147483649]",
    "[2147483647]",
    "[1.5]",
    "[1410.0]",
    "[null]",
    "[\"1410\"]",
    "[0.1, 86400.5]",
    "[1e308]",
    "[-0.0]",
    "[1, 2, 3]",
    "{\"threshold\": 1.05, \"recover_below\": 1.03, \"window\": 2, \"min_change\": 0.05}",
    "{\"threshold\": 100, \"recover_below\": 100, \"window\": 1, \"min_change\": 10}",
    "{\"window\": 0}",
    "{\"x\": 1}"};

const std::vector<std::string> kKeys = {"\"job_id\"",        "\"pp_degree\"",
                                        "\"dp_degree\"",     "\"tp_degree\"",
                                        "\"world_size\"",    "\"schedule\"",
                                        "\"microbatches\"",  "\"chunks\"",
                                        "\"p_block_w\"",     "\"resolution_s\"",
                                        "\"gpu\"",           "\"metadata\"",
                                        "\"straggler\"",     "\"threshold\"",
                                        "\"recover_below\"", "\"window\"",
                                        "\"min_change\"",    "\"rank\"",
                                        "\"dp_rank\"",       "\"pp_rank\"",
                                        "\"tp_rank\"",       "\"available_frequencies\"",
                                        "\"iteration\"",     "\"time_s\"",
                                        "\"energy_j\"",      "\"job_metadata\"",
                                        "\"iter_time\"",     "\"iter_energy\""};

// Unknown members: near misses of real ones, empty, control and high bytes.
const std::vector<std::string> kUnknownKeys = {
    "\"x\"",        "\"Job_id\"",        "\"rank \"",  "\"\"",           "\"\\u0000\"",
    "\"\xff\xfe\"", "\"available_mhz\"", "\"stages\"", "\"--pp-degree\""};

// A list of `n` JSON numbers made by `entry`.
template <typename F>
std::string List(std::size_t n, F entry) {
  std::string out = "[";
  for (std::size_t k = 0; k < n; ++k) out += (k == 0 ? "" : ",") + entry(k);
  return out + "]";
}

// A valid body with the value of one to three members (a random occurrence
// of a key) replaced, and now and then an unknown member added.
std::string HostileField(Generator& g) {
  std::string text = ReplaceJsonMembers(g, g.Seed(), kKeys, [](Generator& g) -> std::string {
    switch (g.Below(8)) {
      case 0:
        return Generator::Nested(g.NestingDepth(), g.OneIn(2), !g.OneIn(10));
      case 1:
        return "\"" + g.LongRun(g.OneIn(10) ? 1 << 20 : 5000) + "\"";
      case 2:
        return std::to_string(g.Below(1u << 31));
      case 3:
        return std::to_string(g.Below(20000));
      default:
        return g.Pick(kJsonValues);
    }
  });
  if (g.OneIn(4)) {  // an unknown member, possibly huge or deep, or a repeated one
    const std::size_t brace = text.find('{');
    if (brace != std::string::npos) {
      const std::string key = g.OneIn(2) ? g.Pick(kUnknownKeys) : g.Pick(kKeys);
      const std::string value =
          g.OneIn(2) ? g.Pick(kJsonValues) : Generator::Nested(g.NestingDepth(), g.OneIn(2), true);
      text.insert(brace + 1, key + ": " + value + ", ");
    }
  }
  return text;
}

// Bodies of extreme shape: lists at and past their limits, deep nesting,
// numbers with thousands of digits, long strings, jobs at the edge of the
// size limits.
std::string Extreme(Generator& g) {
  switch (g.Below(7)) {
    case 0: {  // available_frequencies around protocol::kMaxFrequencies
      const std::size_t n = protocol::kMaxFrequencies - 2 + g.Below(4);
      return R"({"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0, "available_frequencies": )" +
             List(n, [&](std::size_t k) { return std::to_string(1 + (k * 7) % 10000); }) + "}";
    }
    case 1: {  // a Zeus profiling window, now and then around its 100,000 limit
      const std::size_t n = g.OneIn(32) ? 99'999 + g.Below(3) : g.Below(2000);
      const bool energy = g.OneIn(2);
      const bool mismatch = g.OneIn(4);
      return R"({"rank": 2, "iter_time": )" +
             List(n, [](std::size_t k) { return std::to_string(1 + k % 9); }) +
             R"(, "iter_energy": )" +
             (energy ? List(n + (mismatch ? 1 : 0),
                            [](std::size_t k) { return std::to_string(100 + k % 50); })
                     : std::string("[]")) +
             "}";
    }
    case 2:
      return Generator::Nested(g.NestingDepth(), g.OneIn(2), g.OneIn(2));
    case 3:
      return R"({"rank": 0, "iteration": )" + std::string(1 + g.Below(5000), '9') +
             R"(, "time_s": 0.)" + std::string(1 + g.Below(5000), '1') + "}";
    case 4: {  // job ids and metadata around their limits
      const std::size_t id = protocol::kMaxJobIdLength - 2 + g.Below(4);
      const std::size_t meta = protocol::kMaxMetadataLength - 2 + g.Below(4);
      return R"({"job_id": ")" + std::string(g.OneIn(3) ? 0 : id, 'j') +
             R"(", "pp_degree": 2, "dp_degree": 1, "tp_degree": 1, "schedule": "1f1b",)"
             R"( "microbatches": 2, "metadata": ")" +
             std::string(meta, g.OneIn(2) ? 'm' : ' ') + "\"}";
    }
    case 5: {  // degrees near the world size limit
      const int pp = 1 + static_cast<int>(g.Below(1100));
      const int dp = 1 + static_cast<int>(g.Below(100'001));
      const int tp = 1 + static_cast<int>(g.Below(200));
      const long long world = static_cast<long long>(pp) * dp * tp;
      return "{\"pp_degree\": " + std::to_string(pp) + ", \"dp_degree\": " + std::to_string(dp) +
             ", \"tp_degree\": " + std::to_string(tp) +
             ", \"world_size\": " + std::to_string(world) +
             ", \"schedule\": \"1f1b\", \"microbatches\": " + std::to_string(1 + g.Below(64)) + "}";
    }
    default: {  // schedules at the edge of what a job may plan
      const int pp = 1 + static_cast<int>(g.Below(1100));
      const int mb = 1 + static_cast<int>(g.Below(g.OneIn(4) ? 110'000 : 512));
      const int chunks = g.OneIn(2) ? 1 : 1 + static_cast<int>(g.Below(8));
      return "{\"pp_degree\": " + std::to_string(pp) +
             ", \"dp_degree\": 1, \"tp_degree\": 1, \"schedule\": \"" +
             (chunks > 1 ? "interleaved" : (g.OneIn(2) ? "1f1b" : "gpipe")) +
             "\", \"microbatches\": " + std::to_string(mb) +
             ", \"chunks\": " + std::to_string(chunks) + "}";
    }
  }
}

Input Next(Generator& g) {
  return MixedInput(g, HostileField, Extreme, "deep nesting, long lists, extreme jobs");
}

// Whether `field` is "" or a field token, "<Struct>" or "<Struct>::<member>"
// (letters, then lower case and '_'), so that it carries no input text.
bool FieldToken(const std::string& field) {
  const std::size_t colons = field.find("::");
  const std::string head = field.substr(0, colons);
  for (char c : head) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return false;
  }
  if (colons == std::string::npos) return true;
  const std::string member = field.substr(colons + 2);
  if (head.empty() || member.empty()) return false;
  for (char c : member) {
    if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
  }
  return true;
}

// Whether `text` holds `token` ("Options::") as a whole word: not the end of
// another struct's name ("StragglerOptions::").
bool NamesStruct(std::string_view text, std::string_view token) {
  for (std::size_t p = text.find(token); p != std::string_view::npos; p = text.find(token, p + 1)) {
    const char before = p == 0 ? ' ' : text[p - 1];
    if (!((before >= 'A' && before <= 'Z') || (before >= 'a' && before <= 'z'))) return true;
  }
  return false;
}

// The checks of one rejection, as the route sends it (after ForApi).
std::string CheckRejection(const InputError& e, bool zeus) {
  if (std::string broken = CheckMessage(e.what()); !broken.empty()) return broken;
  if (!FieldToken(e.field())) {
    return "the error's field is not a field token: \"" + e.field().substr(0, 80) + "\"";
  }
  const InputError api = zeus ? serve::ForZeus(e) : serve::ForApi(e);
  if (std::string broken = CheckMessage(api.what()); !broken.empty()) {
    return "after ForApi: " + broken;
  }
  for (const char* library : {"Spec::", "PlanRequest::", "Options::"}) {
    if (NamesStruct(api.field(), library) || NamesStruct(api.what(), library)) {
      return std::string("after ForApi the error still names the library's ") + library +
             " (field \"" + api.field() + "\"): " + std::string(api.what()).substr(0, 200);
    }
  }
  return "";
}

// Whether the body's member `key` holds exactly the whole number `n` (an
// unsigned value compared as unsigned: 18446744073709551615 is not -1).
bool Holds(const json& body, const char* key, std::int64_t n) {
  const auto it = body.find(key);
  if (it == body.end()) return false;
  if (it->is_number_unsigned()) return n >= 0 && it->get<std::uint64_t>() == std::uint64_t(n);
  return it->is_number_integer() && it->get<std::int64_t>() == n;
}

bool HoldsEntry(const json& entry, int n) {
  if (entry.is_number_unsigned()) return n >= 0 && entry.get<std::uint64_t>() == std::uint64_t(n);
  return entry.is_number_integer() && entry.get<std::int64_t>() == n;
}

bool SameConfig(const protocol::JobConfig& a, const protocol::JobConfig& b) {
  return a == b && SameBits(a.resolution_s, b.resolution_s) &&
         a.p_block_w.has_value() == b.p_block_w.has_value() &&
         (!a.p_block_w || SameBits(*a.p_block_w, *b.p_block_w)) &&
         SameBits(a.straggler.threshold, b.straggler.threshold) &&
         SameBits(a.straggler.recover_below, b.straggler.recover_below) &&
         SameBits(a.straggler.min_change, b.straggler.min_change);
}

class Checker {
 public:
  explicit Checker(joulepipe::fuzz::Driver& driver) : driver_(driver), job_(RankJob()) {}

  std::string Check(const std::string& text) {
    accepted_ = false;
    first_rejection_.clear();
    json body;
    try {
      body = serve::ParseBody(text);
    } catch (const InputError& e) {
      driver_.Rejected(e.what());
      return CheckRejection(e, false);
    }
    for (auto check : {&Checker::JobConfig, &Checker::RankInfo, &Checker::IterationReport,
                       &Checker::JobInfo, &Checker::ProfilingResult}) {
      if (std::string broken = (this->*check)(body); !broken.empty()) return broken;
    }
    if (accepted_) {
      driver_.Accepted();
    } else {
      driver_.Rejected(first_rejection_);
    }
    return "";
  }

 private:
  // The job ranks register with: 2 stages x 2 pipelines x 2 GPUs each.
  static coord::Job RankJob() {
    protocol::JobConfig c;
    c.job_id = "rank-job";
    c.pp_degree = c.spec.stages = 2;
    c.dp_degree = 2;
    c.tp_degree = 2;
    c.spec.microbatches = 4;
    return coord::Job(c);
  }

  // A rejection by a reader or a check: counted, then checked.
  std::string Refused(const InputError& e, bool zeus, const char* what) {
    if (first_rejection_.empty()) first_rejection_ = e.what();
    driver_.Note(what);
    if (std::string broken = CheckRejection(e, zeus); !broken.empty()) {
      return std::string(what) + ": " + broken;
    }
    return "";
  }

  void Took(const char* what) {
    accepted_ = true;
    driver_.Note(what);
  }

  // JobConfigToJson, dump() (what the store keeps), ParseBody and the
  // reader give back `config`, doubles bit for bit.
  static std::string RoundTrip(const protocol::JobConfig& config) {
    protocol::JobConfig back;
    try {
      back =
          protocol::JobConfigFromJson(serve::ParseBody(protocol::JobConfigToJson(config).dump()));
    } catch (const InputError& e) {
      return std::string("JobConfig round trip: the written config does not read back: ") +
             e.what();
    }
    return SameConfig(config, back) ? "" : "JobConfig round trip: the config differs";
  }

  std::string JobConfig(const json& body) {
    protocol::JobConfig config;
    try {
      config = protocol::JobConfigFromJson(body);
    } catch (const InputError& e) {
      return Refused(e, false, "JobConfig: refused by the reader");
    }
    if (config.world_size != 0) {  // the writer writes world_size 0 only unchecked, unread
      if (std::string broken = RoundTrip(config); !broken.empty()) return "unchecked " + broken;
    }
    const bool assigned = config.job_id.empty();
    if (assigned) {
      config.job_id = serve::ZeusStyleJobId(config.dp_degree, config.pp_degree, config.tp_degree,
                                            config.metadata, kNowUnix);
    }
    try {
      coord::CheckJobConfig(&config);
    } catch (const InputError& e) {
      if (assigned && e.field() == "JobConfig::job_id") {
        return "CheckJobConfig refused the job id ZeusStyleJobId assigned: " +
               std::string(e.what());
      }
      return Refused(e, false, "JobConfig: read, then refused by CheckJobConfig");
    }
    if (std::string broken = RoundTrip(config); !broken.empty()) return broken;
    Took("JobConfig: read, checked and round-tripped");
    return "";
  }

  std::string RankInfo(const json& body) {
    for (const bool strict : {true, false}) {
      protocol::RankInfo info;
      try {
        info = protocol::RankInfoFromJson(body, strict);
      } catch (const InputError& e) {
        if (!strict) return Refused(e, true, "RankInfo (Zeus): refused by the reader");
        if (std::string broken = Refused(e, false, "RankInfo: refused by the reader");
            !broken.empty()) {
          return broken;
        }
        continue;
      }
      if (!Holds(body, "rank", info.rank) || !Holds(body, "dp_rank", info.dp_rank) ||
          !Holds(body, "pp_rank", info.pp_rank) || !Holds(body, "tp_rank", info.tp_rank)) {
        return "an accepted RankInfo's coordinates differ from the body's";
      }
      const auto list = body.find("available_frequencies");
      const bool listed = list != body.end() && !list->is_null();
      if (info.available_mhz.size() != (listed ? list->size() : 0)) {
        return "an accepted RankInfo's available_frequencies has another length than the body's";
      }
      for (std::size_t k = 0; k < info.available_mhz.size(); ++k) {
        if (!HoldsEntry((*list)[k], info.available_mhz[k])) {
          return "RankInfo::available_frequencies[" + std::to_string(k) + "] was read as " +
                 std::to_string(info.available_mhz[k]) + " from " + (*list)[k].dump();
        }
      }
      try {
        if (!(protocol::RankInfoFromJson(serve::ParseBody(protocol::RankInfoToJson(info).dump()),
                                         true) == info)) {
          return "RankInfo round trip: the info differs";
        }
      } catch (const InputError& e) {
        return std::string("the written RankInfo does not read back: ") + e.what();
      }
      // What POST /jobs/{id}/ranks does next: coord's ranges.
      try {
        job_.RegisterRank(info);
      } catch (const InputError& e) {
        if (std::string broken = Refused(e, !strict, "RankInfo: read, then refused by the job");
            !broken.empty()) {
          return broken;
        }
        continue;
      }
      const protocol::JobConfig& c = job_.config();
      if (info.rank < 0 || info.rank >= c.world_size || info.dp_rank < 0 ||
          info.dp_rank >= c.dp_degree || info.pp_rank < 0 || info.pp_rank >= c.pp_degree ||
          info.tp_rank < 0 || info.tp_rank >= c.tp_degree ||
          info.available_mhz.size() > protocol::kMaxFrequencies) {
        return "the job registered a RankInfo out of coord's ranges";
      }
      for (int mhz : info.available_mhz) {
        if (mhz < 1 || mhz > 10'000) return "the job registered a clock outside 1..10000 MHz";
      }
      Took(strict ? "RankInfo: read and registered" : "RankInfo (Zeus): read and registered");
      job_ = RankJob();  // the next input registers into a fresh job
    }
    return "";
  }

  std::string IterationReport(const json& body) {
    protocol::IterationReport r;
    try {
      r = protocol::IterationReportFromJson(body);
    } catch (const InputError& e) {
      return Refused(e, false, "IterationReport: refused by the reader");
    }
    if (!Holds(body, "rank", r.rank) || !Holds(body, "iteration", r.iteration)) {
      return "an accepted IterationReport's rank or iteration differs from the body's";
    }
    if (r.iteration < 0 || !std::isfinite(r.time_s) || r.time_s <= 0 ||
        r.time_s > protocol::kMaxIterationTimeS) {
      return "an accepted IterationReport has an iteration or time out of range";
    }
    if (r.energy_j && (!std::isfinite(*r.energy_j) || *r.energy_j < 0 ||
                       *r.energy_j > protocol::kMaxIterationEnergyJ)) {
      return "an accepted IterationReport has an energy out of range";
    }
    Took("IterationReport: read");
    return "";
  }

  std::string JobInfo(const json& body) {
    protocol::ZeusJobInfo info;
    try {
      info = protocol::JobInfoFromJson(body);
    } catch (const InputError& e) {
      return Refused(e, true, "JobInfo: refused by the reader");
    }
    if (info.pp_degree < 1 || info.dp_degree < 1 || info.tp_degree < 1 ||
        info.world_size != std::int64_t{info.pp_degree} * info.dp_degree * info.tp_degree) {
      return "an accepted JobInfo has degrees < 1 or a world size other than pp x dp x tp";
    }
    // What POST /register_job does next, with Zeus defaults of 1f1b and 4
    // microbatches.
    protocol::JobConfig c;
    c.job_id = serve::ZeusStyleJobId(info.dp_degree, info.pp_degree, info.tp_degree, info.metadata,
                                     kNowUnix);
    if (c.job_id.size() > protocol::kMaxJobIdLength) return "ZeusStyleJobId wrote a long id";
    c.pp_degree = c.spec.stages = info.pp_degree;
    c.dp_degree = info.dp_degree;
    c.tp_degree = info.tp_degree;
    c.world_size = info.world_size;
    c.spec.microbatches = 4;
    c.metadata = info.metadata;
    try {
      coord::CheckJobConfig(&c);
    } catch (const InputError& e) {
      if (e.field() == "JobConfig::job_id") {
        return "CheckJobConfig refused the job id ZeusStyleJobId assigned: " +
               std::string(e.what());
      }
      return Refused(e, true, "JobInfo: read, then refused by CheckJobConfig");
    }
    Took("JobInfo: read and checked");
    return "";
  }

  std::string ProfilingResult(const json& body) {
    protocol::ZeusProfilingResult r;
    try {
      r = protocol::ProfilingResultFromJson(body);
    } catch (const InputError& e) {
      return Refused(e, true, "ProfilingResult: refused by the reader");
    }
    if (!Holds(body, "rank", r.rank) || r.rank < 0) {
      return "an accepted ProfilingResult's rank is negative or differs from the body's";
    }
    if (!r.iter_energy.empty() && r.iter_energy.size() != r.iter_time.size()) {
      return "an accepted ProfilingResult has a number of energies other than of times";
    }
    for (double t : r.iter_time) {
      if (!std::isfinite(t) || t <= 0 || t > protocol::kMaxIterationTimeS) {
        return "an accepted ProfilingResult has a time out of range";
      }
    }
    for (double e : r.iter_energy) {
      if (!std::isfinite(e) || e < 0 || e > protocol::kMaxIterationEnergyJ) {
        return "an accepted ProfilingResult has an energy out of range";
      }
    }
    Took("ProfilingResult: read");
    return "";
  }

  joulepipe::fuzz::Driver& driver_;
  coord::Job job_;
  bool accepted_ = false;
  std::string first_rejection_;
};

}  // namespace

int main(int argc, char** argv) {
  const joulepipe::fuzz::Options options =
      joulepipe::fuzz::ParseOptions(argc, argv, "fuzz_serve_codec");
  joulepipe::fuzz::Driver driver("fuzz_serve_codec", options);
  Checker checker(driver);
  return driver.Run(Next, [&](const std::string& text) { return checker.Check(text); }, Seeds());
}
