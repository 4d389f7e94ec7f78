// The deterministic fuzzing engine shared by the input fuzzers in tests/fuzz
// (g++ has no libFuzzer): an input generator (random bytes, mutations of
// valid seeds, hostile values) and a driver that runs one check per input,
// times it, and stops at the first broken invariant.
//
// Every fuzzer binary takes the same flags:
//
//   fuzz_<target> [--iterations N] [--seed S] [--max-seconds T] [--out DIR]
//   fuzz_<target> --replay FILE
//
// It exits 0 after N inputs; 1 when an invariant broke or one input took
// longer than T seconds (default 1). The failing input, and the slowest one,
// are written to DIR (default: the temporary directory) so that a failure can
// be replayed. A crash is a signal; with JOULEPIPE_FUZZ_SANITIZE (the
// default) memory errors, undefined behaviour and leaks are AddressSanitizer,
// UBSan and LeakSanitizer reports, which end the run with a non-zero status.
//
// The same seed gives the same inputs: a failure found in a long run is
// reproduced by running the same seed with as many iterations, or by
// --replay with the file it wrote (one input: its checks, its time).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace joulepipe::fuzz {

struct Options {
  long long iterations = 1000000;
  std::uint64_t seed = 1;
  double max_seconds = 1.0;  // an input slower than this is a failure (a hang)
  std::string out_dir;       // where the failing and slowest inputs go; "" = temp dir
  std::string replay;        // run this one input instead ("" = generate)
};

// Reads the flags above; exits 2 with a usage line on anything else.
Options ParseOptions(int argc, char** argv, const char* name);

// One generated input and the name of the generator that made it, so that
// the report can say what the slowest input was ("deep nesting").
struct Input {
  std::string bytes;
  const char* kind = "";
};

// Hostile values any text format should survive: numbers at and beyond the
// limits of int and double, non-finite spellings, signs, empty and quoted
// values, invalid UTF-8, NUL and control bytes.
const std::vector<std::string>& HostileTokens();

class Generator {
 public:
  Generator(std::uint64_t seed, std::vector<std::string> seeds);

  std::mt19937_64& random() { return random_; }
  // Uniform in [0, n); 0 when n is 0.
  std::size_t Below(std::size_t n) { return n == 0 ? 0 : random_() % n; }
  bool OneIn(std::size_t n) { return Below(n) == 0; }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Below(items.size())];
  }

  const std::vector<std::string>& seeds() const { return seeds_; }
  const std::string& Seed() { return Pick(seeds_); }

  // Random bytes: usually short, now and then up to 64 KiB.
  std::string RandomBytes();
  // 1 to `max_rounds` rounds of: bit flip, byte insertion, deletion of a run,
  // truncation, splicing in part of another seed, a hostile token inserted or
  // replacing a number, duplication of a region, a line duplicated, dropped
  // or swapped, CRLF line ends, a BOM, a NUL byte.
  // `max_rounds` bounds the rounds (1: one small change, which a reader
  // often still accepts, so the checks behind the syntax run too).
  std::string Mutate(std::string text, std::size_t max_rounds = 8);
  // `depth` levels of '[' (or '{"a":' when `objects`), closed when `closed`.
  static std::string Nested(std::size_t depth, bool objects, bool closed);
  // A depth for nesting tests: mostly near the parsers' limit (64), now and
  // then far beyond it (up to 100,000 levels).
  std::size_t NestingDepth();
  // A very long run of one of a few characters (digits, letters, spaces,
  // commas, high bytes), up to `max` bytes.
  std::string LongRun(std::size_t max);

 private:
  std::mt19937_64 random_;
  std::vector<std::string> seeds_;
};

// The mix every fuzzer draws from, in eighths: random bytes (1), the
// format's structured hostile values (2), its extreme shapes (1, reported as
// `extreme_kind`), a seed with one mutation round (1) or up to eight (3).
Input MixedInput(Generator& g, const std::function<std::string(Generator&)>& structured,
                 const std::function<std::string(Generator&)>& extreme, const char* extreme_kind);

// Bit-for-bit equality (a round trip must give back the same doubles).
bool SameBits(double a, double b);

// JSON-shaped fuzzing: replaces the value of one to three members of `text`
// (a random occurrence of a random key from `keys`, each spelled with its
// quotes, e.g. "\"rank\"") with what `replacement` makes. The value's end is
// found by bracket matching outside strings, so a nested value is replaced
// whole. Keys that do not occur are skipped.
std::string ReplaceJsonMembers(Generator& g, std::string text,
                               const std::vector<std::string>& keys,
                               const std::function<std::string(Generator&)>& replacement);

// The invariants of a rejection: its message is at most kMaxMessage
// characters, not empty, and carries no JSON library text
// ("json.exception", "parse_error."). Returns "" or what is wrong.
inline constexpr std::size_t kMaxMessage = 2000;
std::string CheckMessage(std::string_view what);

// Whether `text` is printable UTF-8 (no control characters, every byte >= 0x80
// in a well-formed sequence); counted in the report, not an invariant.
bool PrintableUtf8(std::string_view text);

// Drives a fuzzer: for each of options.iterations inputs from `next`, calls
// `check`, which returns "" when every invariant held or a description of
// the one that broke. `check` must catch what the target is allowed to
// throw; anything escaping it is a failure. `check` may call Accepted() or
// Rejected(message) to have the report count them.
class Driver {
 public:
  Driver(const char* name, Options options);

  void Accepted() { ++accepted_; }
  void Rejected(std::string_view message);
  // Counts an event worth reporting that breaks no invariant (e.g. "round
  // trip skipped: stage id near INT_MAX"); printed with the summary.
  void Note(const std::string& what) { ++notes_[what]; }

  // Returns the process exit status: 0 when all inputs passed.
  int Run(const std::function<Input(Generator&)>& next,
          const std::function<std::string(const std::string&)>& check,
          std::vector<std::string> seeds);

 private:
  void Save(const std::string& what, const std::string& bytes) const;

  const char* name_;
  Options options_;
  long long accepted_ = 0;
  long long rejected_ = 0;
  long long unprintable_messages_ = 0;
  std::size_t longest_message_ = 0;
  std::map<std::string, long long> notes_;
  struct KindStats {
    long long count = 0;
    double seconds = 0;
    double slowest = 0;
  };
  std::map<std::string, KindStats> kinds_;  // per generator, for the report
};

}  // namespace joulepipe::fuzz
