#include "fuzz_engine.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace joulepipe::fuzz {

Options ParseOptions(int argc, char** argv, const char* name) {
  Options options;
  for (int i = 1; i < argc; i += 2) {
    const bool has_value = i + 1 < argc;
    if (has_value && std::strcmp(argv[i], "--iterations") == 0) {
      options.iterations = std::atoll(argv[i + 1]);
    } else if (has_value && std::strcmp(argv[i], "--seed") == 0) {
      options.seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (has_value && std::strcmp(argv[i], "--max-seconds") == 0) {
      options.max_seconds = std::atof(argv[i + 1]);
    } else if (has_value && std::strcmp(argv[i], "--out") == 0) {
      options.out_dir = argv[i + 1];
    } else if (has_value && std::strcmp(argv[i], "--replay") == 0) {
      options.replay = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--iterations N] [--seed S] [--max-seconds T] [--out DIR]\n"
                   "       %s --replay FILE\n",
                   name, name);
      std::exit(2);
    }
  }
  return options;
}

const std::vector<std::string>& HostileTokens() {
  static const std::vector<std::string> tokens = {
      "0",
      "-0",
      "-1",
      "1e308",
      "-1e308",
      "1e309",
      "1e-400",
      "4.9e-324",
      "2.2250738585072014e-308",
      "1.7976931348623157e308",
      "2147483647",
      "2147483648",
      "-2147483649",
      "4294967296",
      "9223372036854775807",
      "18446744073709551615",
      "18446744073709551616",
      "99999999999999999999999999999",
      "1410.0",
      "1410.5",
      "1.0e3",
      "0x10",
      "+5",
      "++5",
      "+-5",
      "NaN",
      "nan",
      "-nan",
      "Infinity",
      "-Infinity",
      "inf",
      "+inf",
      "1e",
      ".",
      "-",
      "",
      " ",
      "\"\"",
      "\"",
      "true",
      "false",
      "null",
      "[]",
      "{}",
      "\"\\u0000\"",
      "\"\\ud800\"",
      "\"\\udc00\\ud800\"",
      std::string("\0", 1),
      std::string("a\0b", 3),
      "\xff",
      "\xc3",
      "\xc0\xaf",
      "\xed\xa0\x80",
      "\xf4\x90\x80\x80",
      "\xef\xbb\xbf",
      "\xe2\x82\xac",
      "\r",
      "\r\n",
      "\n",
      "\t",
      ",",
      ":",
      "#",
      "\\",
  };
  return tokens;
}

Generator::Generator(std::uint64_t seed, std::vector<std::string> seeds)
    : random_(seed), seeds_(std::move(seeds)) {}

std::string Generator::RandomBytes() {
  std::string bytes(Below(OneIn(50) ? 65536 : OneIn(4) ? 2048 : 64), '\0');
  for (char& c : bytes) c = static_cast<char>(random_());
  return bytes;
}

std::string Generator::Nested(std::size_t depth, bool objects, bool closed) {
  const std::string open = objects ? "{\"a\":" : "[";
  std::string text;
  text.reserve(depth * (open.size() + 1) + 1);
  for (std::size_t i = 0; i < depth; ++i) text += open;
  if (closed) {
    text += "1";
    text.append(depth, objects ? '}' : ']');
  }
  return text;
}

std::size_t Generator::NestingDepth() {
  if (OneIn(10)) return 1 + Below(100000);
  return 56 + Below(16);  // around the limit of 64
}

std::string Generator::LongRun(std::size_t max) {
  static const char kChars[] = {'9', 'a', ' ', ',', '\xff', '0', '"', '['};
  return std::string(1 + Below(max), kChars[Below(sizeof kChars)]);
}

std::string Generator::Mutate(std::string text, std::size_t max_rounds) {
  const std::size_t rounds = 1 + Below(max_rounds);
  for (std::size_t r = 0; r < rounds; ++r) {
    const std::size_t at = Below(text.size() + 1);
    switch (Below(14)) {
      case 0:  // bit flip
        if (!text.empty()) text[at % text.size()] ^= static_cast<char>(1 << Below(8));
        break;
      case 1:  // a random byte
        text.insert(at, 1, static_cast<char>(random_()));
        break;
      case 2:  // delete a run
        if (at < text.size()) text.erase(at, 1 + Below(16));
        break;
      case 3:  // truncate
        text.resize(at);
        break;
      case 4: {  // splice in part of another seed
        const std::string& other = Seed();
        const std::size_t from = Below(other.size() + 1);
        text.insert(at, other.substr(from, Below(200)));
        break;
      }
      case 5:  // a hostile token
        text.insert(at, Pick(HostileTokens()));
        break;
      case 6: {  // a hostile token in place of a number
        std::size_t start = text.find_first_of("0123456789", at);
        if (start == std::string::npos) start = text.find_first_of("0123456789");
        if (start == std::string::npos) break;
        std::size_t end = text.find_first_not_of("0123456789.eE+-", start);
        if (end == std::string::npos) end = text.size();
        text.replace(start, end - start, Pick(HostileTokens()));
        break;
      }
      case 7:  // duplicate a region
        if (at < text.size()) text.insert(at, text.substr(at, 1 + Below(256)));
        break;
      case 8: {  // duplicate, drop or swap a line
        std::vector<std::string> lines;
        for (std::size_t start = 0; start <= text.size();) {
          const std::size_t end = text.find('\n', start);
          lines.push_back(text.substr(start, end == std::string::npos ? end : end - start));
          if (end == std::string::npos) break;
          start = end + 1;
        }
        const std::size_t i = Below(lines.size()), j = Below(lines.size());
        switch (Below(3)) {
          case 0:
            lines.insert(lines.begin() + static_cast<long>(i), lines[j]);
            break;
          case 1:
            if (lines.size() > 1) lines.erase(lines.begin() + static_cast<long>(i));
            break;
          default:
            std::swap(lines[i], lines[j]);
        }
        text.clear();
        for (std::size_t k = 0; k < lines.size(); ++k) text += (k ? "\n" : "") + lines[k];
        break;
      }
      case 9: {  // CRLF line ends
        std::string crlf;
        for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
        text = crlf;
        break;
      }
      case 10:  // a byte order mark, at the start or anywhere
        text.insert(OneIn(2) ? 0 : at, "\xEF\xBB\xBF");
        break;
      case 11:  // NUL
        text.insert(at, 1, '\0');
        break;
      case 12:  // a long run (a very long line or field)
        text.insert(at, LongRun(OneIn(50) ? 1 << 20 : 4096));
        break;
      default:  // the whole of another seed, appended (duplication)
        text += Seed();
        break;
    }
  }
  return text;
}

std::string CheckMessage(std::string_view what) {
  if (what.empty()) return "the rejection's message is empty";
  if (what.size() > kMaxMessage) {
    return "the rejection's message has " + std::to_string(what.size()) + " characters (limit " +
           std::to_string(kMaxMessage) + ")";
  }
  for (const char* library : {"json.exception", "parse_error.", "type_error.", "out_of_range."}) {
    if (what.find(library) != std::string_view::npos) {
      return std::string("the rejection's message carries the JSON library's text \"") + library +
             "\"";
    }
  }
  return "";
}

bool PrintableUtf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

Driver::Driver(const char* name, Options options) : name_(name), options_(std::move(options)) {}

void Driver::Rejected(std::string_view message) {
  ++rejected_;
  longest_message_ = std::max(longest_message_, message.size());
  if (!PrintableUtf8(message)) ++unprintable_messages_;
}

void Driver::Save(const std::string& what, const std::string& bytes) const {
  const std::filesystem::path dir = options_.out_dir.empty()
                                        ? std::filesystem::temp_directory_path()
                                        : std::filesystem::path(options_.out_dir);
  const std::filesystem::path path =
      dir / (std::string(name_) + "-seed" + std::to_string(options_.seed) + "-" + what + ".bin");
  std::ofstream(path, std::ios::binary) << bytes;
  std::fprintf(stderr, "%s: the %s input (%zu bytes) is in %s\n", name_, what.c_str(), bytes.size(),
               path.c_str());
}

namespace {

// The first bytes of an input, printable, for the report.
std::string Preview(const std::string& bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && out.size() < 120; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return bytes.size() > 120 ? out + "..." : out;
}

}  // namespace

int Driver::Run(const std::function<Input(Generator&)>& next,
                const std::function<std::string(const std::string&)>& check,
                std::vector<std::string> seeds) {
  if (!options_.replay.empty()) {
    std::ifstream in(options_.replay, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read %s\n", name_, options_.replay.c_str());
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    options_.replay.clear();
    options_.iterations = 1;
    return Run([bytes](Generator&) { return Input{bytes, "replayed"}; }, check, {});
  }
  Generator generator(options_.seed, std::move(seeds));
  const auto start = std::chrono::steady_clock::now();
  double slowest = 0;
  Input slowest_input;
  long long done = 0;
  int status = 0;
  for (; done < options_.iterations && status == 0; ++done) {
    const Input input = next(generator);
    const auto t0 = std::chrono::steady_clock::now();
    std::string broken;
    try {
      broken = check(input.bytes);
    } catch (const std::exception& e) {
      broken = std::string("an exception escaped the checks: ") + e.what();
    } catch (...) {
      broken = "a non-standard exception escaped the checks";
    }
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (took > slowest) {
      slowest = took;
      slowest_input = input;
    }
    KindStats& kind = kinds_[input.kind];
    ++kind.count;
    kind.seconds += took;
    kind.slowest = std::max(kind.slowest, took);
    if (broken.empty() && took > options_.max_seconds) {
      broken = "the input took " + std::to_string(took) + " s (limit " +
               std::to_string(options_.max_seconds) + " s)";
    }
    if (!broken.empty()) {
      std::fprintf(stderr, "%s: input %lld (%s, %zu bytes): %s\n  input: %s\n", name_, done,
                   input.kind, input.bytes.size(), broken.substr(0, 4000).c_str(),
                   Preview(input.bytes).c_str());
      Save("failure", input.bytes);
      status = 1;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%s: %lld inputs, seed %llu, %.1f s (%.0f/s); %lld accepted, %lld rejected (longest "
      "message %zu chars, %lld not printable UTF-8); slowest input %.1f ms (%s, %zu bytes): %s\n",
      name_, done, static_cast<unsigned long long>(options_.seed), seconds, done / seconds,
      accepted_, rejected_, longest_message_, unprintable_messages_, slowest * 1e3,
      slowest_input.kind, slowest_input.bytes.size(), status == 0 ? "ok" : "FAILED");
  for (const auto& [what, stats] : kinds_) {
    std::printf("  %s: %lld inputs, %.1f s, mean %.3f ms, slowest %.1f ms\n", what.c_str(),
                stats.count, stats.seconds, stats.seconds / stats.count * 1e3,
                stats.slowest * 1e3);
  }
  for (const auto& [what, count] : notes_) std::printf("  %s: %lld\n", what.c_str(), count);
  std::fflush(stdout);
  if (!options_.out_dir.empty()) Save("slowest", slowest_input.bytes);
  return status;
}

Input MixedInput(Generator& g, const std::function<std::string(Generator&)>& structured,
                 const std::function<std::string(Generator&)>& extreme, const char* extreme_kind) {
  switch (g.Below(8)) {
    case 0:
      return {g.RandomBytes(), "random bytes"};
    case 1:
    case 2:
      return {structured(g), "structured hostile values"};
    case 3:
      return {extreme(g), extreme_kind};
    case 4:
      return {g.Mutate(g.Seed(), 1), "mutated seed"};
    default:
      return {g.Mutate(g.Seed()), "mutated seed"};
  }
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

namespace {

// End of the JSON value starting at `at` (a scalar token, or a bracketed
// value matched outside strings).
std::size_t ValueEnd(const std::string& text, std::size_t at) {
  if (at < text.size() && (text[at] == '[' || text[at] == '{')) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = at; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        ++depth;
      } else if ((c == ']' || c == '}') && --depth == 0) {
        return i + 1;
      }
    }
    return text.size();
  }
  const std::size_t end = text.find_first_of(",}]\n", at);
  return end == std::string::npos ? text.size() : end;
}

}  // namespace

std::string ReplaceJsonMembers(Generator& g, std::string text,
                               const std::vector<std::string>& keys,
                               const std::function<std::string(Generator&)>& replacement) {
  const std::size_t edits = 1 + g.Below(3);
  for (std::size_t e = 0; e < edits; ++e) {
    const std::string& key = g.Pick(keys);
    std::vector<std::size_t> found;
    for (std::size_t p = text.find(key); p != std::string::npos; p = text.find(key, p + 1)) {
      found.push_back(p);
    }
    if (found.empty()) continue;
    const std::size_t at = g.Pick(found) + key.size();
    const std::size_t colon = text.find(':', at);
    if (colon == std::string::npos) continue;
    std::size_t value = colon + 1;
    while (value < text.size() && text[value] == ' ') ++value;
    const std::size_t end = ValueEnd(text, value);
    text.replace(value, end - value, replacement(g));
  }
  return text;
}

}  // namespace joulepipe::fuzz
