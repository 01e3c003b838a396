// Tool-call formats: how a model writes a function call in its text, and how
// the server picks one for the loaded model (issue 23).
//
//  - hermes (Hermes 2 Pro, Qwen2.5, Qwen3, and the fallback below):
//      <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//    anywhere in the text, one block per call.
//  - llama3_json (Llama 3.1/3.2/3.3 JSON tool calling): the answer starts
//    with {"name": "f", "parameters": {...}} (optionally after the special
//    token <|python_tag|>); several calls are separated by ';'.
//  - mistral: [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]. The
//    server streams text with special tokens skipped, so the [TOOL_CALLS]
//    token may not be in the text: an answer that starts with `[{` counts too.
//
// detect_tool_format(template source): the template's own markers decide
// (<tool_call> -> hermes, [TOOL_CALLS] -> mistral, <|python_tag|> or
// "Environment: ipython" -> llama3_json; none of them -> hermes). `native`
// is whether the template reads the `tools` variable at all; a template that
// does not (SmolLM2's, the default model's) gets the fallback: the server
// writes the tools into a Hermes-style system preamble itself and renders
// tool calls and tool results as plain text (net/tool_prompt.hpp), and the
// output is parsed as hermes. `pagoda serve --tool-call-parser NAME`
// overrides the detected format (not `native`).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace pagoda::net {

enum class ToolFormat : uint8_t { hermes, llama3_json, mistral };

struct ToolTemplateInfo {
  ToolFormat format = ToolFormat::hermes;
  bool native = false;  // the template renders `tools` itself
};

// "hermes" (also "qwen", "qwen2.5", "qwen3"), "llama3_json" (also "llama3",
// "llama3.1"), "mistral"; anything else: nullopt.
std::optional<ToolFormat> parse_tool_format(std::string_view name);
const char* tool_format_name(ToolFormat format);

ToolTemplateInfo detect_tool_format(std::string_view template_source);

}  // namespace pagoda::net
