// The JSON files of a model directory (config.json, generation_config.json,
// tokenizer_config.json, tokenizer.json) as HuggingFace writes them.
//
// Python's json module writes integers of any size; transformers puts
// 1000000000000000019884624838656 ("VERY_LARGE_INTEGER") in the
// model_max_length of many tokenizer_config.json files. simdjson rejects
// integers beyond 64 bits ("Problem while parsing a number"), so
// widen_big_integers rewrites each integer literal outside [INT64_MIN,
// UINT64_MAX] as the float literal of the same digits (appends ".0"); such a
// value then reads as the nearest double, as Python's float(int) would give.
// Text inside strings is never touched; everything else is copied byte for
// byte (invalid JSON stays invalid and is reported by the parser).
//
// load_json_file reads a file, widens it and parses it with the given
// parser; errors name the path ("<path>: cannot read: ...", "<path>: invalid
// JSON: ...").
//
// Thread-safety: reentrant; a parser must not be shared between threads.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "gpu/result.hpp"

namespace pagoda::model {

std::string widen_big_integers(std::string_view json);

// The document's root; it lives as long as `parser` (and its next parse).
Result<simdjson::dom::element> load_json_file(const std::string& path,
                                              simdjson::dom::parser& parser);

}  // namespace pagoda::model
