// Tool-calling request fields (net/tool_request.hpp).
#include "net/tool_request.hpp"

#include <algorithm>

#include "net/json_writer.hpp"
#include "net/openai_request.hpp"

namespace pagoda::net {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// {name, description?, parameters?, strict?}; `at` names it in errors.
std::optional<ApiError> read_function(const std::string& at, element v, ToolSpec& tool) {
  object fn;
  if (v.get_object().get(fn) != simdjson::SUCCESS) return bad_request(at + " must be an object", at);
  std::string_view s;
  for (auto field : fn) {
    const std::string where = at + "." + std::string(field.key);
    if (field.value.is_null()) continue;
    if (field.key == "name") {
      if (field.value.get_string().get(s) != simdjson::SUCCESS) return bad_request(where + " must be a string", where);
      tool.name = std::string(s);
    } else if (field.key == "description") {
      if (field.value.get_string().get(s) != simdjson::SUCCESS) return bad_request(where + " must be a string", where);
      tool.description = std::string(s);
    } else if (field.key == "parameters") {
      object schema;
      std::string_view type;
      if (field.value.get_object().get(schema) != simdjson::SUCCESS) {
        return bad_request(where + " must be a JSON Schema object", where);
      }
      if (schema["type"].get_string().get(type) == simdjson::SUCCESS && type != "object") {
        return bad_request(where + " must describe an object (\"type\": \"object\"), not \"" + std::string(type) + "\"",
                           where);
      }
      tool.parameters = simdjson::minify(field.value);
    } else if (field.key == "strict") {
      if (field.value.get_bool().get(tool.strict) != simdjson::SUCCESS) {
        return bad_request(where + " must be a boolean", where);
      }
    } else {
      return bad_request("unknown field '" + where + "'", where);
    }
  }
  if (tool.name.empty()) return bad_request(at + ".name is required", at + ".name");
  if (!valid_name(tool.name)) {
    return bad_request(at + ".name '" + tool.name + "' must be 1-64 characters of a-z, A-Z, 0-9, _ and -",
                       at + ".name");
  }
  return std::nullopt;
}

// tools[i]: {type: "function", function: {...}}.
std::optional<ApiError> read_tool(const std::string& at, element v, ToolSpec& tool) {
  std::string_view type;
  object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return bad_request(at + " must be an object", at);
  if (v["type"].get_string().get(type) != simdjson::SUCCESS || type != "function") {
    return bad_request(at + ".type must be \"function\"", at + ".type");
  }
  element fn;
  if (v["function"].get(fn) != simdjson::SUCCESS) return bad_request(at + ".function is required", at + ".function");
  for (auto field : obj) {
    if (field.key != "type" && field.key != "function") {
      const std::string where = at + "." + std::string(field.key);
      return bad_request("unknown field '" + where + "'", where);
    }
  }
  return read_function(at + ".function", fn, tool);
}

std::optional<ApiError> read_named_choice(std::string_view key, element v, ToolRequest& out) {
  const bool legacy = key == "function_call";
  std::string_view name, type;
  element fn = v;
  if (!legacy) {
    if (v["type"].get_string().get(type) != simdjson::SUCCESS || type != "function" ||
        v["function"].get(fn) != simdjson::SUCCESS) {
      return bad_request("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                         "\"function\": {\"name\": ...}}", "tool_choice");
    }
  }
  if (fn["name"].get_string().get(name) != simdjson::SUCCESS) {
    const std::string at = legacy ? "function_call.name" : "tool_choice.function.name";
    return bad_request(at + " is required (a string)", at);
  }
  out.choice = ToolChoice::named;
  out.named = std::string(name);
  return std::nullopt;
}

// arguments (a JSON string) as the template sees it: the object it encodes,
// else the string itself.
void write_arguments(JsonWriter& w, std::string_view arguments) {
  simdjson::dom::parser parser;
  element parsed;
  if (parser.parse(arguments.data(), arguments.size()).get(parsed) == simdjson::SUCCESS && parsed.is_object()) {
    w.raw(simdjson::minify(parsed));
  } else {
    w.value(arguments);
  }
}

// One {id?, type?, function: {name, arguments}} (or legacy {name, arguments}).
std::optional<ApiError> write_call(const std::string& at, element call, bool legacy, JsonWriter& w) {
  element fn = call;
  std::string_view id, name, arguments;
  if (!legacy && call["function"].get(fn) != simdjson::SUCCESS) {
    return bad_request(at + ".function is required", at + ".function");
  }
  const std::string fat = legacy ? at : at + ".function";
  if (fn["name"].get_string().get(name) != simdjson::SUCCESS) return bad_request(fat + ".name is required", fat + ".name");
  if (fn["arguments"].get_string().get(arguments) != simdjson::SUCCESS) {
    return bad_request(fat + ".arguments must be a string (JSON text)", fat + ".arguments");
  }
  w.begin_object();
  if (!legacy && call["id"].get_string().get(id) == simdjson::SUCCESS) w.key("id").value(id);
  w.key("type").value("function");
  w.key("function").begin_object().key("name").value(name).key("arguments");
  write_arguments(w, arguments);
  w.end_object().end_object();
  return std::nullopt;
}

}  // namespace

std::string ToolRequest::parameters_schema(const ToolSpec& tool) {
  return tool.parameters.empty() ? std::string("{\"type\":\"object\"}") : tool.parameters;
}

std::optional<ApiError> read_tools(std::string_view key, element v, ToolRequest& out) {
  simdjson::dom::array arr;
  const std::string k(key);
  if (v.get_array().get(arr) != simdjson::SUCCESS) return bad_request(k + " must be an array", k);
  for (element item : arr) {
    const std::string at = k + "[" + std::to_string(out.tools.size()) + "]";
    ToolSpec tool;
    auto e = key == "functions" ? read_function(at, item, tool) : read_tool(at, item, tool);
    if (e) return e;
    for (const ToolSpec& t : out.tools) {
      if (t.name == tool.name) return bad_request(at + ": a second tool named '" + tool.name + "'", at + ".name");
    }
    out.tools.push_back(std::move(tool));
  }
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(std::string_view key, element v, ToolRequest& out) {
  out.choice_given = true;
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return read_named_choice(key, v, out);
  if (s == "none") {
    out.choice = ToolChoice::none;
  } else if (s == "auto") {
    out.choice = ToolChoice::automatic;
  } else if (s == "required" && key == "tool_choice") {
    out.choice = ToolChoice::required;
  } else {
    return bad_request(std::string(key) + " '" + std::string(s) + "' is not one of none, auto" +
                           (key == "tool_choice" ? ", required" : "") + " or a named function",
                       std::string(key));
  }
  return std::nullopt;
}

std::optional<ApiError> finish_tools(ToolRequest& req) {
  if (!req.choice_given) req.choice = req.tools.empty() ? ToolChoice::none : ToolChoice::automatic;
  if (req.tools.empty() && req.choice != ToolChoice::none) {
    return bad_request("tool_choice requires tools (there are none)", "tool_choice");
  }
  if (req.choice == ToolChoice::named) {
    const bool known = std::any_of(req.tools.begin(), req.tools.end(),
                                   [&](const ToolSpec& t) { return t.name == req.named; });
    if (!known) {
      return bad_request("tool_choice names the function '" + req.named + "', which is not in tools",
                         "tool_choice");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> read_message_tool_field(const std::string& name, std::string_view key, element v,
                                                actors::ChatMessage& msg) {
  const std::string at = name + "." + std::string(key);
  if (v.is_null()) return std::nullopt;
  if (key == "tool_call_id") {
    std::string_view id;
    if (v.get_string().get(id) != simdjson::SUCCESS) return bad_request(at + " must be a string", at);
    msg.tool_call_id = std::string(id);
    return std::nullopt;
  }
  JsonWriter w;
  w.begin_array();
  if (key == "function_call") {
    if (auto e = write_call(at, v, /*legacy=*/true, w)) return e;
  } else {
    simdjson::dom::array calls;
    if (v.get_array().get(calls) != simdjson::SUCCESS) return bad_request(at + " must be an array", at);
    size_t i = 0;
    for (element call : calls) {
      if (auto e = write_call(at + "[" + std::to_string(i++) + "]", call, /*legacy=*/false, w)) return e;
    }
    if (i == 0) return std::nullopt;
  }
  w.end_array();
  msg.tool_calls_json = w.take();
  return std::nullopt;
}

std::string tools_template_json(const std::vector<ToolSpec>& tools) {
  JsonWriter w;
  w.begin_array();
  for (const ToolSpec& t : tools) {
    w.begin_object().key("type").value("function").key("function").begin_object();
    w.key("name").value(t.name);
    if (!t.description.empty()) w.key("description").value(t.description);
    if (!t.parameters.empty()) w.key("parameters").raw(t.parameters);
    w.end_object().end_object();
  }
  w.end_array();
  return w.take();
}

}  // namespace pagoda::net
