// The one way joulepipe reads JSON that someone else wrote (plan files, the
// daemon's configuration and wire protocol, the simulated NVML library's
// configuration, GPU and model files), and the one way a message shows a
// value from such a document.
//
// Two invariants make hostile input harmless:
//   * ParseJsonBounded refuses a document nested deeper than `max_depth`
//     arrays and objects before it builds anything that deep, so no later
//     walk over the document (a reader, a destructor, a dump) can overflow
//     the stack;
//   * Excerpt never walks more than a few levels nor writes more than
//     `max_chars` characters, whatever the value holds. nlohmann's dump()
//     recurses and writes everything, so no message may dump an input value.
//
// Every refusal is a model::InputError whose message names `source`, the
// 1-based line and column, and what is wrong in plain words; it never
// carries nlohmann's exception ids ("[json.exception.parse_error.101]") and
// quotes at most a short, printable excerpt of the input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace joulepipe::model {

// Arrays and objects inside one another. joulepipe's own documents need at
// most 4 levels (a plan: the object, "stages", a stage, an instruction).
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` as one JSON document. Throws InputError when it is not valid
// JSON ("<source>: not valid JSON at line 3, column 7: invalid literal (near
// 'tru,') while reading a value"), when a number is outside the range of a
// double ("... the number 1e999 is too large for a double ..."), or when
// arrays and objects nest deeper than `max_depth` ("<source>: JSON nested
// deeper than 64 levels at line 1, column 65; ..."), or when an object has a
// key twice ("<source>: the key \"version\" appears twice in the object at
// stages[0]; ..."; nlohmann's parser would keep the last value silently). A
// UTF-8 byte order mark is skipped.
nlohmann::json ParseJsonBounded(std::string_view text, const std::string& source,
                                int max_depth = kMaxJsonDepth);

// `value` as JSON-like text for a message: at most `max_chars` characters
// plus "..." when cut, arrays and objects more than 2 levels down shown as
// [...] and {...}, strings quoted with control characters and bytes that are
// not UTF-8 escaped (so the result is printable, valid UTF-8). Never throws
// on any value; the work done is bounded by `max_chars`, not by the value.
std::string Excerpt(const nlohmann::json& value, std::size_t max_chars = 60);

// The same for text that came from a file (a string field's value, a name):
// printable UTF-8 as above, without quotes, at most `max_chars` characters
// plus "..." when cut.
std::string ExcerptText(std::string_view text, std::size_t max_chars = 60);

}  // namespace joulepipe::model
