// The output constraint that makes a model's tool calls well formed
// (issue 23): an xgrammar structural tag (actors::OutputConstraint kind
// structural_tag; the document format is xgrammar's, see
// third_party/xgrammar/cpp/structural_tag.h) built from the request's tools,
// tool_choice and parallel_tool_calls for one format (net/tool_format.hpp).
//
// Every tool becomes one tag: the format's opening text up to and including
// the function's name (so the name is always one of the tools), the
// arguments as a json_schema body (the tool's parameters, {"type":"object"}
// when it has none), then the closing text:
//   hermes:      <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
//   llama3_json: {"name": "NAME", "parameters": ARGS}            (';' between calls)
//   mistral:     [TOOL_CALLS][{"name": "NAME", "arguments": ARGS}, ...]
// What each tool_choice gets:
//   required / named: tags_with_separator, at_least_one (named: that one
//     tool's tag only): the answer is one call (or, with
//     parallel_tool_calls, several), nothing else.
//   auto: triggered_tags: free text until the trigger (the opening text,
//     "<tool_call>" / "{\"name\": \"" / "[TOOL_CALLS]"), then a whole call;
//     the grammar costs nothing before the trigger (lazy).
//   parallel_tool_calls false: stop_after_first (one call at most).
// Mistral's [TOOL_CALLS] is a special token in Mistral vocabularies: the
// grammar names it as text, which only a tokenizer bridge that lets the
// grammar match special tokens by their text can produce.
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "actors/output_constraint.hpp"
#include "net/tool_format.hpp"
#include "net/tool_request.hpp"

namespace pagoda::net {

// The structural tag JSON document; requires req.active().
std::string tool_structural_tag(ToolFormat format, const ToolRequest& req);

// kind structural_tag with the document above.
actors::OutputConstraint tool_constraint(ToolFormat format, const ToolRequest& req);

}  // namespace pagoda::net
