// Tools into the prompt, and the plan for reading the answer
// (net/tool_prompt.hpp).
#include "net/tool_prompt.hpp"

#include <simdjson.h>

#include "net/json_writer.hpp"
#include "net/tool_grammar.hpp"

namespace pagoda::net {
namespace {

constexpr const char* kPreambleHead =
    "# Tools\n\n"
    "You may call functions to help with the user's request. Their signatures are listed between "
    "<tools> and </tools>, one JSON object per line:\n<tools>";
constexpr const char* kPreambleTail =
    "\n</tools>\n\n"
    "To call a function, answer with a JSON object holding its name and its arguments between "
    "<tool_call> and </tool_call>, one block per call:\n"
    "<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments object>}\n</tool_call>\n"
    "Each function's result comes back between <tool_response> and </tool_response>.";

std::string preamble(const std::vector<ToolSpec>& tools) {
  std::string text = kPreambleHead;
  for (const ToolSpec& t : tools) {
    JsonWriter w;
    w.begin_object().key("name").value(t.name);
    if (!t.description.empty()) w.key("description").value(t.description);
    w.key("parameters").raw(ToolRequest::parameters_schema(t));
    w.end_object();
    text += "\n" + w.take();
  }
  return text + kPreambleTail;
}

// An assistant message's tool calls as <tool_call> blocks.
std::string calls_as_text(const std::string& calls_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element calls;
  std::string text;
  if (parser.parse(calls_json).get(calls) != simdjson::SUCCESS) return text;
  for (simdjson::dom::element call : calls) {
    std::string_view name;
    simdjson::dom::element args;
    if (call["function"]["name"].get_string().get(name) != simdjson::SUCCESS) continue;
    JsonWriter w;
    w.begin_object().key("name").value(name).key("arguments");
    if (call["function"]["arguments"].get(args) == simdjson::SUCCESS) {
      w.raw(simdjson::minify(args));
    } else {
      w.begin_object().end_object();
    }
    w.end_object();
    if (!text.empty()) text += "\n";
    text += "<tool_call>\n" + w.take() + "\n</tool_call>";
  }
  return text;
}

}  // namespace

ToolTemplateInfo server_tool_info(const ServerContext& ctx) {
  ToolTemplateInfo info = detect_tool_format(ctx.engine ? ctx.engine->chat_template_source() : std::string());
  if (auto forced = parse_tool_format(ctx.options.tool_call_parser)) info.format = *forced;
  return info;
}

void rewrite_tool_messages(std::vector<actors::ChatMessage>& messages, const std::vector<ToolSpec>& tools) {
  for (actors::ChatMessage& m : messages) {
    if (!m.tool_calls_json.empty()) {
      const std::string calls = calls_as_text(m.tool_calls_json);
      m.content += m.content.empty() || calls.empty() ? calls : "\n" + calls;
      m.tool_calls_json.clear();
    }
    if (m.role == "tool") {
      m.role = "user";
      m.content = "<tool_response>\n" + m.content + "\n</tool_response>";
      m.tool_call_id.clear();
      m.name.clear();
    }
  }
  if (tools.empty()) return;
  if (!messages.empty() && messages.front().role == "system") {
    messages.front().content += "\n\n" + preamble(tools);
  } else {
    messages.insert(messages.begin(), actors::ChatMessage{"system", preamble(tools)});
  }
}

std::optional<ApiError> prepare_tools(const ToolTemplateInfo& info, OpenAiRequest& req, ToolPlan& plan) {
  const ToolRequest& tools = req.tools;
  auto& messages = req.generate.messages;
  const bool active = tools.active();
  if (!info.native) {
    rewrite_tool_messages(messages, active ? tools.tools : std::vector<ToolSpec>{});
  } else if (active) {
    req.generate.tools_json = tools_template_json(tools.tools);
  }
  plan.parse = active;
  plan.format = info.native ? info.format : ToolFormat::hermes;
  if (!active) return std::nullopt;
  actors::OutputConstraint& constraint = req.generate.sampling.constraint;
  if (tools.choice == ToolChoice::automatic) {
    if (!constraint.active()) constraint = tool_constraint(plan.format, tools);
    return std::nullopt;
  }
  if (constraint.active()) {
    return bad_request("tool_choice \"required\" or a named function cannot be combined with another output "
                       "constraint (response_format, structured_outputs)", "tool_choice");
  }
  constraint = tool_constraint(plan.format, tools);
  return std::nullopt;
}

}  // namespace pagoda::net
