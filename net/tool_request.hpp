// The tool-calling fields of a chat completion request (issue 23), as the
// OpenAI API defines them:
//  - tools: [{type: "function", function: {name, description?, parameters?,
//    strict?}}]; legacy functions: [{name, description?, parameters?}].
//    A name is 1-64 characters of [a-zA-Z0-9_-], unique; parameters, when
//    given, is a JSON Schema object whose "type", if any, is "object".
//  - tool_choice: "none" | "auto" | "required" | {type: "function",
//    function: {name}}; legacy function_call: "none" | "auto" | {name}.
//    Default: "auto" with tools, "none" without; anything but "none"
//    without tools is a 400, as is a named function that is not in tools.
//  - parallel_tool_calls: bool (default true): false allows one call.
//  - messages: an assistant message's tool_calls ([{id, type: "function",
//    function: {name, arguments}}], arguments a JSON string) and legacy
//    function_call ({name, arguments}); role "tool" with tool_call_id and
//    content (legacy role "function" with name: a tool message too).
// Answers always use the tools shape (message.tool_calls), also for a
// request in the legacy functions form.
// Each error is a 400 naming the field (param) and the problem.
// Pure functions; thread-safe.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/engine_types.hpp"

namespace pagoda::net {

struct ApiError;

struct ToolSpec {
  std::string name, description;
  std::string parameters;  // the JSON Schema (minified JSON text); empty: none given
  bool strict = false;
};

enum class ToolChoice : uint8_t { none, automatic, required, named };

struct ToolRequest {
  std::vector<ToolSpec> tools;
  ToolChoice choice = ToolChoice::automatic;
  bool choice_given = false;
  std::string named;     // ToolChoice::named: the function
  bool parallel = true;  // parallel_tool_calls

  // Calls are parsed from the answer (tools given, choice not none).
  bool active() const { return !tools.empty() && choice != ToolChoice::none; }
  // The schema of a tool's arguments ({"type":"object"} when none given).
  static std::string parameters_schema(const ToolSpec& tool);
};

// tools (legacy: functions) and tool_choice (legacy: function_call).
std::optional<ApiError> read_tools(std::string_view key, simdjson::dom::element v, ToolRequest& out);
std::optional<ApiError> read_tool_choice(std::string_view key, simdjson::dom::element v, ToolRequest& out);
// The checks that need every field (choice vs tools, the named function).
std::optional<ApiError> finish_tools(ToolRequest& req);

// One message's tool fields: key is "tool_calls", "function_call" or
// "tool_call_id"; `name` is "messages[i]". Returns nullopt when handled.
std::optional<ApiError> read_message_tool_field(const std::string& name, std::string_view key,
                                                simdjson::dom::element v, actors::ChatMessage& msg);

// The tools as the chat template sees them: a JSON array of
// {"type":"function","function":{"name","description"?,"parameters"?}}.
std::string tools_template_json(const std::vector<ToolSpec>& tools);

}  // namespace pagoda::net
