// How a chat request's tools reach the model, and how its answer is read
// back (issue 23). Called by the chat route after parsing, before the prompt
// is tokenized.
//
// A template that renders tools itself (ToolTemplateInfo::native): the tools
// go to it as `tools` (GenerateRequest::tools_json), messages keep their
// tool_calls / tool_call_id, and the answer is parsed in the detected format
// (or the --tool-call-parser one).
// A template without tool support (the fallback, e.g. SmolLM2's): the
// messages are rewritten before the template sees them:
//  - the tools are written into a system preamble (a Hermes-style
//    <tools></tools> list and how to call one; appended to a leading system
//    message, else a new first system message);
//  - an assistant message's tool calls are appended to its content as
//    <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call> blocks;
//  - a tool message becomes a user message whose content is wrapped in
//    <tool_response>\n...\n</tool_response>;
// and the answer is parsed as hermes.
// tool_choice none: no tools are rendered and nothing is parsed (the
// answer is plain text); old tool messages are still rendered.
// Constraint (net/tool_grammar.hpp): required / named set it (a 400 when the
// request already has another one, e.g. response_format); auto sets its lazy
// form unless the request has another constraint (that one wins).
// Pure apart from reading the engine's template; thread-safe.
#pragma once

#include <optional>
#include <vector>

#include "net/openai_request.hpp"
#include "net/server_context.hpp"
#include "net/tool_format.hpp"

namespace pagoda::net {

// What the answer's reader needs: parse tool calls, and in which format.
struct ToolPlan {
  bool parse = false;
  ToolFormat format = ToolFormat::hermes;
};

// The model's template support, with ServerOptions::tool_call_parser
// applied (it names a format: parse_tool_format accepted it at startup).
ToolTemplateInfo server_tool_info(const ServerContext& ctx);

// Applies the above to a parsed chat request.
std::optional<ApiError> prepare_tools(const ToolTemplateInfo& info, OpenAiRequest& req, ToolPlan& plan);

// The fallback's message rewrite (tools: the preamble's; none: no preamble).
void rewrite_tool_messages(std::vector<actors::ChatMessage>& messages, const std::vector<ToolSpec>& tools);

}  // namespace pagoda::net
