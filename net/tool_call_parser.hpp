// ToolCallParser: splits a model's answer, fed as text deltas, into plain
// content and tool calls of one format (net/tool_format.hpp), in the order
// an OpenAI stream needs them:
//   content   text outside any call (never the call markup);
//   call_begin  a new call: its index (0, 1, ...) and function name, sent as
//             soon as the name is complete;
//   arguments fragments of the call's arguments JSON text; the fragments of
//             one call concatenate to the whole arguments (a call without
//             arguments gets "{}").
// The same parser serves streamed and whole answers (feed everything, then
// finish()), so both see the same calls.
//
// Holding back: text that may still become markup (a partial "<tool_call>",
// the start of a Llama/Mistral answer that may be a call) is held until it
// is decided; a call's text is held until its name is known. What turns out
// not to be a call (no name, a key other than name / arguments / parameters /
// type / id, not a JSON object) goes out as content, markup included.
// Once a call's name went out the call is committed: text that breaks it
// later ends the call (its arguments as far as they went) and is content.
// After the first call, content that is only whitespace (the newlines
// between calls) is dropped; so is a Hermes closing tag.
//
// finish(): the answer ended: held text goes out as content, an open
// committed call ends as it is (e.g. cut by max_tokens).
// A plain value type: not thread-safe; one parser per choice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/tool_call_scanner.hpp"
#include "net/tool_format.hpp"

namespace pagoda::net {

struct ToolCallEvent {
  enum class Kind : uint8_t { content, call_begin, arguments };
  Kind kind = Kind::content;
  int32_t index = 0;  // the call (call_begin, arguments)
  std::string text;   // content text / function name / argument fragment
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolFormat format);

  // Appends the events the text decides (consecutive content or argument
  // fragments of one call are merged into one event).
  void feed(std::string_view text, std::vector<ToolCallEvent>& out);
  void finish(std::vector<ToolCallEvent>& out);
  // Calls begun so far (finish() keeps the count).
  int32_t calls() const { return calls_; }

 private:
  enum class Mode : uint8_t { start, text, call, after_call, expect_call };

  void push(char c);
  void on_start(char c);
  void on_text(char c);
  void on_call(char c);
  void on_after_call(char c);
  void on_expect_call(char c);
  void begin_call(std::string raw);
  void end_call();
  void fail_call(char c);
  void to_text(const std::string& held);
  void content(std::string_view text);
  void emit(ToolCallEvent::Kind kind, std::string_view text);

  ToolFormat format_;
  Mode mode_;
  std::string held_;  // start / text / after_call: undecided text
  std::string raw_;   // call / expect_call: the text since the call's markup began
  std::optional<ToolCallScanner> scanner_;
  bool committed_ = false;  // the current call's name went out
  bool in_array_ = false;   // mistral: inside [ ... ]
  int32_t calls_ = 0;
  std::string ws_hold_;  // whitespace content after a call, dropped unless text follows
  std::vector<ToolCallEvent>* out_ = nullptr;
};

}  // namespace pagoda::net
