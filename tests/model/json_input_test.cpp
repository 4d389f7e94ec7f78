// ParseJsonBounded and Excerpt: every JSON input is refused past a nesting
// limit before it is built, every refusal names the source, line and column
// in plain words, and no message shows more than a short excerpt of a value.
#include "joulepipe/model/json_input.hpp"

#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {
namespace {

using nlohmann::json;

std::string Nested(size_t depth, const std::string& open, const std::string& close,
                   const std::string& inner = "1") {
  std::string text;
  text.reserve(depth * (open.size() + close.size()) + inner.size());
  for (size_t i = 0; i < depth; ++i) text += open;
  text += inner;
  for (size_t i = 0; i < depth; ++i) text += close;
  return text;
}

std::string ErrorOf(const std::string& text, int max_depth = kMaxJsonDepth) {
  try {
    ParseJsonBounded(text, "in.json", max_depth);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  return "";
}

// True when `text` is well-formed UTF-8 without control characters.
bool PrintableUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

void ExpectPlainAndShort(const std::string& message) {
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  EXPECT_EQ(message.find("parse_error"), std::string::npos) << message;
  EXPECT_LE(message.size(), 600u) << message.substr(0, 1000);
  EXPECT_TRUE(PrintableUtf8(message)) << message;
}

TEST(ParseJsonBoundedTest, ReadsWhatJsonParseReads) {
  const std::string text =
      "\xEF\xBB\xBF{\"a\": [1, -2, 3.5, true, null, \"x\\u00e9\"], \"b\": {\"c\": {}}, \"d\": 7}";
  const json doc = ParseJsonBounded(text, "in.json");
  EXPECT_EQ(doc, json::parse(text));
  EXPECT_EQ(doc["d"], 7);
  EXPECT_EQ(ParseJsonBounded("  12  ", "in.json"), 12);
  EXPECT_EQ(ParseJsonBounded("18446744073709551615", "in.json").get<std::uint64_t>(),
            18446744073709551615ull);
}

// Issue 41, item 2: a key twice in one object is refused, naming the key
// and where the object is (nlohmann keeps the last value silently).
TEST(ParseJsonBoundedTest, AKeyTwiceInOneObjectIsRefusedWithWhereItIs) {
  EXPECT_EQ(ErrorOf(R"({"a": 1, "b": 2, "a": 3})"),
            "in.json: the key \"a\" appears twice in the top-level object; each key may appear "
            "once in an object (joulepipe does not guess which value was meant): remove one");
  const std::string plan =
      R"({"stages": [[{"instruction": "forward"}], [{"frequency": 1, "frequency": 2}]]})";
  EXPECT_EQ(ErrorOf(plan).rfind(
                "in.json: the key \"frequency\" appears twice in the object at stages[1][0]; ", 0),
            0u)
      << ErrorOf(plan);
  EXPECT_NE(ErrorOf(R"({"inputs": {"x": {}, "x": {}}})").find("twice in the object at inputs; "),
            std::string::npos);
  // The same key in two objects is fine.
  EXPECT_EQ(ParseJsonBounded(R"([{"a": 1}, {"a": 2}])", "in.json")[1]["a"], 2);
  // A hostile key is quoted short and printable.
  const std::string key = std::string(5000, 'k') + "\\u0001";
  ExpectPlainAndShort(ErrorOf("{\"" + key + "\": 1, \"" + key + "\": 2}"));
}

TEST(ParseJsonBoundedTest, DepthUpToTheLimitIsFineOneMoreIsRefusedWithItsPosition) {
  EXPECT_NO_THROW(ParseJsonBounded(Nested(kMaxJsonDepth, "[", "]"), "in.json"));
  EXPECT_NO_THROW(ParseJsonBounded(Nested(kMaxJsonDepth, "{\"a\":", "}"), "in.json"));
  const std::string message = ErrorOf(Nested(kMaxJsonDepth + 1, "[", "]"));
  EXPECT_EQ(message.rfind("in.json: JSON nested deeper than 64 levels at line 1, column 65", 0), 0u)
      << message;
  ExpectPlainAndShort(message);
  // Brackets inside strings do not count; the column is the bracket's.
  const std::string text = "{\"k\": \"[[[[{{{{\",\n \"v\": " + Nested(4, "[", "]") + "}";
  EXPECT_NO_THROW(ParseJsonBounded(text, "in.json", 5));
  EXPECT_NE(ErrorOf(text, 4).find("at line 2, column 10"), std::string::npos) << ErrorOf(text, 4);
}

TEST(ParseJsonBoundedTest, SeventyThousandLevelsAreRefusedQuicklyNotACrash) {
  for (const auto& [open, close] : {std::pair<std::string, std::string>{"[", "]"},
                                    std::pair<std::string, std::string>{"{\"a\":", "}"}}) {
    const auto start = std::chrono::steady_clock::now();
    const std::string message = ErrorOf(Nested(70000, open, close));
    EXPECT_NE(message.find("nested deeper than 64 levels"), std::string::npos) << message;
    ExpectPlainAndShort(message);
    // Unclosed, too.
    EXPECT_NE(ErrorOf(std::string(70000, '[')).find("deeper than 64"), std::string::npos);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  }
}

TEST(ParseJsonBoundedTest, SyntaxErrorsNameLineAndColumnInPlainWords) {
  std::string message = ErrorOf("{\"version\": 1,, }");
  EXPECT_EQ(message,
            "in.json: not valid JSON at line 1, column 15: unexpected ','; expected "
            "string literal while reading an object key");
  message = ErrorOf("{\n  \"a\": tru\n}");
  EXPECT_EQ(message.rfind("in.json: not valid JSON at line 2, column ", 0), 0u) << message;
  EXPECT_NE(message.find("invalid literal (near '"), std::string::npos) << message;
  EXPECT_NE(message.find("tru"), std::string::npos) << message;
  ExpectPlainAndShort(message);
  EXPECT_EQ(ErrorOf(""),
            "in.json: not valid JSON at line 1, column 1: the text is empty; "
            "expected a JSON document");
  EXPECT_NE(ErrorOf(" \r\n ").find("the text is empty"), std::string::npos);
  EXPECT_EQ(ErrorOf("[1, 2"),
            "in.json: not valid JSON at line 1, column 6: unexpected end of input; expected ']' "
            "while reading an array");
  EXPECT_NE(ErrorOf("{} x").find("line 1, column 4"), std::string::npos) << ErrorOf("{} x");
  for (const std::string& bad :
       {std::string("NaN"), std::string("[Infinity]"), std::string("{\"a\":1,}"),
        std::string("[1 2]"), std::string("\"\\ud800\""), std::string("{\"a\"\x00:1}", 9)}) {
    ExpectPlainAndShort(ErrorOf(bad));
  }
}

TEST(ParseJsonBoundedTest, NumbersBeyondADoubleAreRefusedByName) {
  const std::string message = ErrorOf("{\"watts\": 1e999}");
  EXPECT_EQ(message,
            "in.json: not valid JSON at line 1, column 11: the number 1e999 is too large "
            "for a double (at most about 1.8e308)");
  const std::string huge = ErrorOf("[" + std::string(5000, '9') + ".5]");
  EXPECT_NE(huge.find("the number ...999"), std::string::npos) << huge;
  ExpectPlainAndShort(huge);
  EXPECT_EQ(ParseJsonBounded("1e308", "in.json").get<double>(), 1e308);
}

TEST(ParseJsonBoundedTest, HugeTokensAndBadBytesAreQuotedShortAndPrintable) {
  // An unterminated 1 MB string: nlohmann would quote all of it.
  std::string message = ErrorOf("{\"a\": \"" + std::string(1 << 20, 'x'));
  EXPECT_NE(message.find("missing closing quote"), std::string::npos) << message.substr(0, 300);
  ExpectPlainAndShort(message);
  message = ErrorOf("{\"op\":\"\xff\xfe\"}");
  EXPECT_NE(message.find("not valid JSON at line 1, column 8"), std::string::npos) << message;
  EXPECT_NE(message.find("\\xff"), std::string::npos) << message;
  ExpectPlainAndShort(message);
  message = ErrorOf("[\"a\nb\"]");  // a raw newline inside a string
  EXPECT_NE(message.find("line 1, column 4"), std::string::npos) << message;
  ExpectPlainAndShort(message);
}

TEST(ExcerptTest, SmallValuesReadAsTheirJson) {
  for (const char* text : {"null", "true", "-3", "2.5", "\"ab\"", "[]", "{}", "[1,[2,3]]",
                           "{\"a\":{\"b\":1}}", "18446744073709551615"}) {
    EXPECT_EQ(Excerpt(json::parse(text)), text);
  }
}

TEST(ExcerptTest, BoundedWhateverTheValue) {
  // Built, not parsed: a value from code need not respect the parse limit.
  json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = json::array({std::move(deep)});
  EXPECT_EQ(Excerpt(deep), "[[[...]]]");
  json wide = json::array();
  for (int i = 0; i < 1000000; ++i) wide.push_back(i);
  const std::string excerpt = Excerpt(wide, 30);
  EXPECT_EQ(excerpt.size(), 33u) << excerpt;
  EXPECT_EQ(excerpt.substr(0, 10), "[0,1,2,3,4");
  EXPECT_EQ(excerpt.substr(30), "...");
  const std::string long_string = Excerpt(json(std::string(10 << 20, 'y')), 60);
  EXPECT_EQ(long_string, "\"" + std::string(59, 'y') + "...");
  EXPECT_EQ(Excerpt(json::parse("{\"a\":{\"b\":{\"c\":[]}}}")), "{\"a\":{\"b\":{...}}}");
}

TEST(ExcerptTest, StringsArePrintableUtf8) {
  EXPECT_EQ(Excerpt(json(std::string("a\"b\\c\n\x01"))), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(Excerpt(json(std::string("caf\xc3\xa9 \xff"))), "\"caf\xc3\xa9 \\xff\"");
  // A cut never splits a UTF-8 sequence.
  std::string euros;
  for (int i = 0; i < 40; ++i) euros += "\xe2\x82\xac";
  for (size_t max = 1; max < 20; ++max) EXPECT_TRUE(PrintableUtf8(Excerpt(json(euros), max)));
}

TEST(ExcerptTest, TextIsPrintableAndCut) {
  EXPECT_EQ(ExcerptText("1f1b"), "1f1b");
  EXPECT_EQ(ExcerptText(std::string("a\"b\n\xff", 5)), "a\"b\\n\\xff");
  EXPECT_EQ(ExcerptText(std::string(1 << 20, 'x'), 10), "xxxxxxxxxx...");
  for (size_t max = 1; max < 40; ++max) {
    EXPECT_TRUE(PrintableUtf8(ExcerptText("\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\x01\xff", max)));
  }
}

}  // namespace
}  // namespace joulepipe::model
