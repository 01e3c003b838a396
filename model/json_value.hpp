// JSON <-> jinja::Value.
//
// parse_json: JSON text (e.g. the messages list the CLI reads from stdin, or
// an OpenAI request's `messages`/`tools`) -> Value, the way Python's
// json.loads builds objects: objects become insertion-ordered dicts (a
// repeated key keeps its first position and its last value), integers int64,
// other numbers float, strings UTF-8. Integers beyond int64 (e.g.
// transformers' model_max_length 1000000000000000019884624838656) become the
// nearest float, where Python keeps an exact int (model/json_file.hpp). Uses simdjson's DOM parser (full
// validation, trailing garbage rejected); errors name the simdjson error.
//
// to_json: Python's json.dumps(x, ensure_ascii=..., indent=..., separators=...,
// sort_keys=...) byte for byte: float repr, "Infinity"/"NaN", the default
// separators (", ", ": ") or (",", ": ") with an indent, indent as a count of
// spaces or a string, dict keys coerced to strings as Python does (int,
// float, bool, None keys), escapes of control characters, '"' and '\\'
// (non-ASCII kept unless ensure_ascii). Undefined values, namespaces,
// callables and generators are an Error ("Object of type ... is not JSON
// serializable"), as they are in Python.
//
// Thread-safety: both functions are reentrant (parse_json uses a parser per
// call).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpu/result.hpp"
#include "model/jinja_value.hpp"

namespace pagoda::model {

Result<jinja::Value> parse_json(std::string_view text);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // unset: single-line; else the per-level indent text
  std::optional<std::string> item_separator;  // unset: ", " (or "," with indent)
  std::optional<std::string> key_separator;   // unset: ": "
  bool sort_keys = false;
};

Result<std::string> to_json(const jinja::Value& v, const JsonDumpOptions& options = {});

// Appends `s` as a JSON string literal, quotes included: '"', '\\' and
// control characters escaped (\n \r \t \b \f, else \u00XX), other text
// as is; each byte that is not part of well-formed UTF-8 is written as
// `replacement` (default: U+FFFD's UTF-8 bytes; "\\ufffd" gives the escape).
// Shared by every JSON writer outside to_json (model inspection, net/).
void append_json_string(std::string& out, std::string_view s,
                        std::string_view replacement = "\xEF\xBF\xBD");

}  // namespace pagoda::model
