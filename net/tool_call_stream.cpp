// ToolCallStream (net/tool_call_stream.hpp).
#include "net/tool_call_stream.hpp"

namespace pagoda::net {
namespace {

// Mistral templates accept only 9-character alphanumeric call ids.
std::string call_id(ToolFormat format) {
  std::string id = make_tool_call_id();
  return format == ToolFormat::mistral ? id.substr(5, 9) : id;
}

}  // namespace

std::vector<ChoiceOut> ToolCallStream::deltas(const std::vector<ToolCallEvent>& events) {
  std::vector<ChoiceOut> out;
  for (const ToolCallEvent& e : events) {
    ChoiceOut d;
    if (e.kind == ToolCallEvent::Kind::content) {
      d.text = e.text;
      out.push_back(std::move(d));
      continue;
    }
    ToolCallOut call;
    call.index = e.index;
    if (e.kind == ToolCallEvent::Kind::call_begin) {
      ids_.push_back(call_id(format_));
      call.id = ids_.back();
      call.name = e.text;
    } else {
      call.header = false;
      call.arguments = e.text;
    }
    d.tool_calls.push_back(std::move(call));
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<ChoiceOut> ToolCallStream::feed(std::string_view text) {
  std::vector<ToolCallEvent> events;
  parser_.feed(text, events);
  return deltas(events);
}

std::vector<ChoiceOut> ToolCallStream::finish() {
  std::vector<ToolCallEvent> events;
  parser_.finish(events);
  return deltas(events);
}

std::string ToolCallStream::finish_reason(int32_t calls, const std::string& engine_reason) {
  return calls > 0 && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

void ToolCallStream::parse_whole(ToolFormat format, ChoiceOut& choice) {
  ToolCallParser parser(format);
  std::vector<ToolCallEvent> events;
  parser.feed(choice.text, events);
  parser.finish(events);
  choice.text.clear();
  for (const ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::content) {
      choice.text += e.text;
    } else if (e.kind == ToolCallEvent::Kind::call_begin) {
      choice.tool_calls.push_back(ToolCallOut{e.index, call_id(format), e.text, "", true});
    } else {
      choice.tool_calls.back().arguments += e.text;
    }
  }
  choice.content_null = !choice.tool_calls.empty() && choice.text.empty();
  choice.finish_reason = finish_reason(parser.calls(), choice.finish_reason);
}

}  // namespace pagoda::net
