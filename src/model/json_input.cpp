// ParseJsonBounded and Excerpt (json_input.hpp).
//
// The parser is nlohmann's SAX parser, which keeps its own explicit stack
// and never recurses; the document is built here by a SAX handler that
// refuses to open a container beyond the depth limit, so a 70,000-deep
// input stops at level 65 having built 64 levels. Positions come from the
// SAX error callback (a byte offset), turned into line and column here.
#include "joulepipe/model/json_input.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {

namespace {

using nlohmann::json;

// ---- Printable text ---------------------------------------------------------

// Length of the well-formed UTF-8 sequence starting at text[i] (2 to 4
// bytes, no overlongs, no surrogates, at most U+10FFFF), or 0.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// Appends `text` so that the result is printable UTF-8: well-formed UTF-8
// sequences are kept, control characters and stray bytes are escaped
// (\n, \u0001, \xff). In `json_string` mode '"' and '\' are escaped too.
// Stops once `out` holds `limit` bytes.
void AppendPrintable(std::string_view text, bool json_string, size_t limit, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < text.size() && out->size() < limit;) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(text, i);
      if (n > 0) {
        out->append(text.substr(i, n));
        i += n;
      } else {
        *out += "\\x";
        *out += kHex[c >> 4];
        *out += kHex[c & 15];
        ++i;
      }
      continue;
    }
    if (c == '\n') {
      *out += "\\n";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      *out += "\\u00";
      *out += kHex[c >> 4];
      *out += kHex[c & 15];
    } else if (json_string && (c == '"' || c == '\\')) {
      *out += '\\';
      *out += static_cast<char>(c);
    } else {
      *out += static_cast<char>(c);
    }
    ++i;
  }
}

// Cuts `text` to at most `max_chars` bytes without splitting a UTF-8
// sequence (every byte >= 0x80 in it belongs to a well-formed sequence) and
// marks the cut with "...".
void CutWithEllipsis(size_t max_chars, std::string* text) {
  if (text->size() <= max_chars) return;
  size_t end = max_chars;
  while (end > 0 && (static_cast<unsigned char>((*text)[end]) & 0xC0) == 0x80) --end;
  text->resize(end);
  *text += "...";
}

// The last bytes of the token the parser stopped in, printable and short:
// the mistake is at its end ("...99999" for a 5,000-digit number).
std::string TokenTail(std::string_view token) {
  constexpr size_t kMax = 40;
  std::string prefix;
  if (token.size() > kMax) {
    size_t start = token.size() - kMax;
    while (start < token.size() && (static_cast<unsigned char>(token[start]) & 0xC0) == 0x80) {
      ++start;
    }
    token.remove_prefix(start);
    prefix = "...";
  }
  std::string out = prefix;
  AppendPrintable(token, false, 4 * kMax, &out);
  return out;
}

// ---- Positions --------------------------------------------------------------

// "line 3, column 7" for the byte at `offset` (both 1-based; columns count
// bytes, as editors that show byte columns do).
std::string LineColumn(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  const size_t line_start = before.rfind('\n');
  const size_t column = line_start == std::string_view::npos ? offset + 1 : offset - line_start;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// Offset of the bracket that opens level max_depth + 1. Only called once the
// parser has accepted everything before that bracket, so a scan that skips
// strings (with their escapes) sees exactly the parser's nesting.
size_t TooDeepOffset(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return text.size();
}

// ---- Parsing ----------------------------------------------------------------

// Builds the document from SAX events with an explicit stack of open
// containers; refuses to open one more than `max_depth` deep.
class BoundedBuilder : public nlohmann::json_sax<json> {
 public:
  explicit BoundedBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() override { return Put(json(nullptr)) != nullptr; }
  bool boolean(bool value) override { return Put(json(value)) != nullptr; }
  bool number_integer(number_integer_t value) override { return Put(json(value)) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return Put(json(value)) != nullptr; }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    return Put(json(value)) != nullptr;
  }
  bool string(string_t& value) override { return Put(json(std::move(value))) != nullptr; }
  bool binary(binary_t& /*value*/) override { return false; }  // JSON text has none

  bool start_object(std::size_t /*elements*/) override { return Open(json::object()); }
  bool key(string_t& key) override {
    // A key twice in one object: nlohmann keeps the last value silently, so
    // two writers (or a hand edit) could disagree unseen. Refused.
    if (stack_.back()->contains(key)) {
      duplicate_ = true;
      duplicate_key_ = std::move(key);
      duplicate_at_ = Path();
      return false;
    }
    key_ = std::move(key);
    return true;
  }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t /*elements*/) override { return Open(json::array()); }
  bool end_array() override { return Close(); }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const json::exception& error) override {
    error_position_ = position;
    error_token_ = last_token;
    error_id_ = error.id;
    error_what_ = error.what();
    failed_ = true;
    return false;
  }

  json& root() { return root_; }
  bool failed() const { return failed_; }
  bool too_deep() const { return too_deep_; }
  bool duplicate() const { return duplicate_; }
  const std::string& duplicate_key() const { return duplicate_key_; }
  const std::string& duplicate_at() const { return duplicate_at_; }
  std::size_t error_position() const { return error_position_; }
  const std::string& error_token() const { return error_token_; }
  int error_id() const { return error_id_; }
  const std::string& error_what() const { return error_what_; }

 private:
  // Places `value` where the parser is (the root, the next element of the
  // open array, or the value of the last key of the open object) and
  // returns where it now lives. That address stays valid while the value is
  // the innermost open container: nothing is added to its parent meanwhile.
  json* Put(json value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[key_];  // a repeated key keeps the last value
    slot = std::move(value);
    return &slot;
  }

  bool Open(json container) {
    if (static_cast<int>(stack_.size()) >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    stack_.push_back(Put(std::move(container)));
    return true;
  }

  bool Close() {
    stack_.pop_back();
    return true;
  }

  // Where the innermost open container is, as a path from the root
  // ("stages[1]", "inputs"; "" for the root): each level's key or index.
  std::string Path() const {
    std::string out;
    for (std::size_t i = 1; i < stack_.size(); ++i) {
      const json& parent = *stack_[i - 1];
      if (parent.is_array()) {
        // Appended piece by piece: GCC 12 warns (-Wrestrict) on "[" + string.
        out += '[';
        out += std::to_string(parent.size() - 1);
        out += ']';
      } else {
        for (auto it = parent.begin(); it != parent.end(); ++it) {
          if (&it.value() == stack_[i]) {
            out += (out.empty() ? "" : ".") + it.key();
            break;
          }
        }
      }
    }
    return out;
  }

  const int max_depth_;
  json root_;
  std::vector<json*> stack_;  // open containers, outermost first
  std::string key_;
  bool failed_ = false;
  bool too_deep_ = false;
  bool duplicate_ = false;
  std::string duplicate_key_, duplicate_at_;
  std::size_t error_position_ = 0;
  std::string error_token_;
  int error_id_ = 0;
  std::string error_what_;
};

// nlohmann's own wording of a syntax error, without its machinery:
//   "[json.exception.parse_error.101] parse error at line 1, column 4:
//    syntax error while parsing value - invalid literal; last read: 'tru,'"
// becomes "invalid literal (near 'tru,') while reading a value".
std::string DescribeSyntaxError(const BoundedBuilder& builder) {
  std::string what = builder.error_what();
  if (!what.empty() && what.front() == '[') {  // "[json.exception.parse_error.101] "
    const size_t close = what.find("] ");
    what.erase(0, close == std::string::npos ? what.size() : close + 2);
  }
  if (what.rfind("parse error", 0) == 0) {  // "parse error at line 1, column 4: "
    const size_t colon = what.find(": ");
    what.erase(0, colon == std::string::npos ? what.size() : colon + 2);
  }
  std::string context;
  if (what.rfind("syntax error ", 0) == 0) {
    const size_t dash = what.find("- ");
    if (dash != std::string::npos) {
      const std::string head = what.substr(0, dash);  // "syntax error while parsing value "
      const std::string marker = "while parsing ";
      const size_t at = head.find(marker);
      if (at != std::string::npos) {
        context = head.substr(at + marker.size());
        while (!context.empty() && context.back() == ' ') context.pop_back();
      }
      what.erase(0, dash + 2);
    }
  }
  // The token is quoted by nlohmann in full (it may be megabytes long); quote
  // its tail instead.
  const std::string last_read = "; last read: '" + builder.error_token() + "'";
  const size_t at = what.find(last_read);
  const bool quoted = at != std::string::npos;
  if (quoted) what.erase(at, last_read.size());
  std::string out;
  AppendPrintable(what, false, 300, &out);
  CutWithEllipsis(300, &out);
  if (quoted && !builder.error_token().empty()) {
    out += " (near '" + TokenTail(builder.error_token()) + "')";
  }
  if (!context.empty()) {
    out += context == "value" ? " while reading a value" : " while reading an " + context;
  }
  return out;
}

}  // namespace

json ParseJsonBounded(std::string_view text, const std::string& source, int max_depth) {
  BoundedBuilder builder(std::max(max_depth, 1));
  const bool ok = json::sax_parse(text.data(), text.data() + text.size(), &builder);
  if (builder.too_deep()) {
    throw InputError(source + ": JSON nested deeper than " + std::to_string(max_depth) +
                     " levels at " + LineColumn(text, TooDeepOffset(text, max_depth)) +
                     "; joulepipe reads arrays and objects nested at most " +
                     std::to_string(max_depth) +
                     " deep, and its documents need only a few levels: check that this is "
                     "the intended input and is not damaged");
  }
  if (builder.duplicate()) {
    const std::string& at = builder.duplicate_at();
    throw InputError(source + ": the key \"" + ExcerptText(builder.duplicate_key()) +
                     "\" appears twice in " +
                     (at.empty() ? std::string("the top-level object") : "the object at " + at) +
                     "; each key may appear once in an object (joulepipe does not guess which "
                     "value was meant): remove one");
  }
  if (!ok || builder.failed()) {
    // The parser reports the byte after the last one it read: the offending
    // one for a syntax error; for a number too large, the number is the
    // token just read, so point at its first digit.
    const size_t read = builder.error_position();
    const bool too_large = builder.error_id() == 406;  // out_of_range: beyond a double
    const size_t offset = too_large && builder.error_token().size() <= read
                              ? read - builder.error_token().size()
                              : (read > 0 ? read - 1 : 0);
    const std::string where = source + ": not valid JSON at " + LineColumn(text, offset) + ": ";
    const bool blank = text.find_first_not_of(" \t\r\n") == std::string_view::npos ||
                       (text.rfind("\xEF\xBB\xBF", 0) == 0 &&
                        text.find_first_not_of(" \t\r\n", 3) == std::string_view::npos);
    if (blank) throw InputError(where + "the text is empty; expected a JSON document");
    if (too_large) {
      throw InputError(where + "the number " + TokenTail(builder.error_token()) +
                       " is too large for a double (at most about 1.8e308)");
    }
    throw InputError(where + DescribeSyntaxError(builder));
  }
  return std::move(builder.root());
}

// ---- Excerpt ----------------------------------------------------------------

namespace {

// Writes values compactly (as dump() would) until the text reaches its
// budget; containers below kExcerptDepth are elided.
class ExcerptWriter {
 public:
  explicit ExcerptWriter(size_t max_chars) : max_chars_(max_chars) {}

  void Write(const json& value, int depth) {
    constexpr int kExcerptDepth = 2;
    if (Full()) return;
    switch (value.type()) {
      case json::value_t::object: {
        if (value.empty()) {
          out_ += "{}";
          return;
        }
        if (depth >= kExcerptDepth) {
          out_ += "{...}";
          return;
        }
        out_ += '{';
        bool first = true;
        for (auto it = value.begin(); it != value.end(); ++it) {
          if (Full()) return;
          if (!first) out_ += ',';
          first = false;
          WriteString(it.key());
          out_ += ':';
          Write(it.value(), depth + 1);
        }
        out_ += '}';
        return;
      }
      case json::value_t::array: {
        if (value.empty()) {
          out_ += "[]";
          return;
        }
        if (depth >= kExcerptDepth) {
          out_ += "[...]";
          return;
        }
        out_ += '[';
        bool first = true;
        for (const json& element : value) {
          if (Full()) return;
          if (!first) out_ += ',';
          first = false;
          Write(element, depth + 1);
        }
        out_ += ']';
        return;
      }
      case json::value_t::string:
        WriteString(value.get_ref<const std::string&>());
        return;
      case json::value_t::binary:
        out_ += "<binary>";
        return;
      case json::value_t::discarded:
        out_ += "<discarded>";
        return;
      default:  // null, boolean, numbers: short, and dump() does not recurse
        out_ += value.dump();
        return;
    }
  }

  std::string Finish() {
    CutWithEllipsis(max_chars_, &out_);
    return std::move(out_);
  }

 private:
  bool Full() const { return out_.size() > max_chars_; }

  void WriteString(const std::string& text) {
    out_ += '"';
    // At most 4 bytes of output per input byte: look at no more than needed.
    AppendPrintable(std::string_view(text).substr(0, max_chars_ + 1), true, max_chars_ + 1, &out_);
    out_ += '"';
  }

  size_t max_chars_;
  std::string out_;
};

}  // namespace

std::string ExcerptText(std::string_view text, std::size_t max_chars) {
  std::string out;
  AppendPrintable(text.substr(0, max_chars + 1), false, max_chars + 1, &out);
  CutWithEllipsis(max_chars, &out);
  return out;
}

std::string Excerpt(const json& value, std::size_t max_chars) {
  ExcerptWriter writer(max_chars);
  writer.Write(value, 0);
  return writer.Finish();
}

}  // namespace joulepipe::model
