// ToolCallStream: one chat choice's answer through a ToolCallParser, shaped
// as OpenAI answer pieces (net/openai_response.hpp's ChoiceOut):
//  - streaming: feed() / finish() return the deltas of a text piece: a
//    content delta, a call's first delta (index, id, type, name, arguments
//    ""), or an argument fragment; ids are "call_" + random hex (mistral:
//    9 hex digits, what its templates accept), fixed at a call's first delta;
//  - whole answers: parse_whole() turns a choice's text into content (null
//    when it is empty and there are calls) and tool_calls.
// finish_reason(): "tool_calls" when the answer made a call and the engine
// stopped it normally ("stop"); otherwise the engine's reason (a call cut
// by max_tokens stays "length").
// A plain value type: not thread-safe, one per choice (CompletionStream
// calls it from its sink callbacks, one at a time).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "net/openai_response.hpp"
#include "net/tool_call_parser.hpp"

namespace pagoda::net {

class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat format) : format_(format), parser_(format) {}

  // The deltas (ChoiceOut.index left 0) the text decides.
  std::vector<ChoiceOut> feed(std::string_view text);
  std::vector<ChoiceOut> finish();
  int32_t calls() const { return parser_.calls(); }

  static std::string finish_reason(int32_t calls, const std::string& engine_reason);
  // choice.text -> content + tool_calls.
  static void parse_whole(ToolFormat format, ChoiceOut& choice);

 private:
  std::vector<ChoiceOut> deltas(const std::vector<ToolCallEvent>& events);

  ToolFormat format_;
  ToolCallParser parser_;
  std::vector<std::string> ids_;
};

}  // namespace pagoda::net
