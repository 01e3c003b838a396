// Tool-call structural tags (net/tool_grammar.hpp).
#include "net/tool_grammar.hpp"

#include "net/json_writer.hpp"

namespace pagoda::net {
namespace {

// The text around one call's arguments, and between calls.
struct CallShape {
  std::string begin_prefix;  // before the name
  std::string begin_suffix;  // after the name, up to the arguments
  std::string end;           // after the arguments
  std::string separator;     // between two calls
  std::string trigger;       // auto: where a call starts
};

CallShape shape(ToolFormat format) {
  switch (format) {
    case ToolFormat::llama3_json: return {"{\"name\": \"", "\", \"parameters\": ", "}", "; ", "{\"name\": \""};
    case ToolFormat::mistral: return {"{\"name\": \"", "\", \"arguments\": ", "}", ", ", "[TOOL_CALLS]"};
    default: return {"<tool_call>\n{\"name\": \"", "\", \"arguments\": ", "}\n</tool_call>", "\n", "<tool_call>"};
  }
}

void write_tag(JsonWriter& w, const CallShape& s, const ToolSpec& tool) {
  w.begin_object();
  w.key("type").value("tag");
  w.key("begin").value(s.begin_prefix + tool.name + s.begin_suffix);
  w.key("content").begin_object();
  w.key("type").value("json_schema");
  w.key("json_schema").raw(ToolRequest::parameters_schema(tool));
  w.end_object();
  w.key("end").value(s.end);
  w.end_object();
}

void write_tags(JsonWriter& w, const CallShape& s, const ToolRequest& req) {
  w.key("tags").begin_array();
  for (const ToolSpec& tool : req.tools) {
    if (req.choice == ToolChoice::named && tool.name != req.named) continue;
    write_tag(w, s, tool);
  }
  w.end_array();
}

// required / named: one call or several, nothing else.
void write_calls(JsonWriter& w, const CallShape& s, const ToolRequest& req) {
  w.begin_object();
  w.key("type").value("tags_with_separator");
  write_tags(w, s, req);
  w.key("separator").value(s.separator);
  w.key("at_least_one").value(true);
  w.key("stop_after_first").value(!req.parallel);
  w.end_object();
}

// Mistral: the calls inside [TOOL_CALLS][ ... ].
void write_mistral_list(JsonWriter& w, const CallShape& s, const ToolRequest& req) {
  w.begin_object();
  w.key("type").value("tag");
  w.key("begin").value("[TOOL_CALLS][");
  w.key("content");
  write_calls(w, s, req);
  w.key("end").value("]");
  w.end_object();
}

// auto: free text, and a whole call after each trigger.
void write_triggered(JsonWriter& w, ToolFormat format, const CallShape& s, const ToolRequest& req) {
  w.begin_object();
  w.key("type").value("triggered_tags");
  w.key("triggers").begin_array().value(s.trigger).end_array();
  if (format == ToolFormat::mistral) {
    w.key("tags").begin_array();
    ToolRequest all = req;
    all.choice = ToolChoice::required;
    write_mistral_list(w, s, all);
    w.end_array();
  } else {
    write_tags(w, s, req);
  }
  w.key("at_least_one").value(false);
  w.key("stop_after_first").value(!req.parallel || format == ToolFormat::mistral);
  w.end_object();
}

}  // namespace

std::string tool_structural_tag(ToolFormat format, const ToolRequest& req) {
  const CallShape s = shape(format);
  JsonWriter w;
  w.begin_object();
  w.key("type").value("structural_tag");
  w.key("format");
  if (req.choice == ToolChoice::automatic) {
    write_triggered(w, format, s, req);
  } else if (format == ToolFormat::mistral) {
    write_mistral_list(w, s, req);
  } else {
    write_calls(w, s, req);
  }
  w.end_object();
  return w.take();
}

actors::OutputConstraint tool_constraint(ToolFormat format, const ToolRequest& req) {
  actors::OutputConstraint c;
  c.kind = actors::OutputConstraint::Kind::structural_tag;
  c.spec = tool_structural_tag(format, req);
  return c;
}

}  // namespace pagoda::net
