// ToolCallScanner: reads one tool-call JSON object a character at a time,
// {"name": "f", "arguments": {...}} (or "parameters" for the arguments, as
// Llama 3.1 writes them), and hands out what a stream needs as soon as it is
// known: the function name once its string closes, and the raw text of the
// arguments value in fragments while it arrives.
//
// Accepted keys: name (a JSON string), arguments / parameters (any JSON
// value), type and id (any value, ignored). Any other key, a second
// arguments value, or text that is not a JSON object is an error (the caller
// then treats what it held as plain text). The scanner checks the object's
// structure (strings, escapes, bracket nesting), not full JSON grammar
// (numbers and literals are taken as written).
//
// Arguments: an object / array / number value is passed through byte for
// byte (leading whitespace dropped). A string value (some models write the
// arguments JSON-encoded) is held until it closes and then handed out
// decoded, in one piece.
//
// A plain value type: not thread-safe, one scanner per call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::net {

class ToolCallScanner {
 public:
  enum class Step : uint8_t { more, done, error };

  // Consumes one character. After done or error, push() must not be called.
  Step push(char c);

  bool has_name() const { return name_done_; }
  const std::string& name() const { return name_; }
  bool saw_arguments() const { return args_seen_; }
  bool arguments_done() const { return args_done_; }
  // The argument text completed since the last call (empty: none yet).
  std::string take_arguments();

 private:
  enum class State : uint8_t { open, key_or_end, key_required, key, colon, value_start, name_string, value,
                               after_value };
  enum class Target : uint8_t { name, arguments, skip };

  Step on_value_start(char c);
  Step on_value(char c);
  Step end_value();
  Step after_value(char c);
  Step on_key_done();
  Step push_name(char c);

  State state_ = State::open;
  Target target_ = Target::skip;
  std::string key_;
  bool escape_ = false;
  // The value being read: bracket stack, whether inside a string, whether a
  // scalar (ends at a delimiter).
  std::string brackets_;
  bool in_string_ = false;
  bool scalar_ = false;
  std::string name_raw_;  // the name literal so far (after its opening quote)
  std::string name_;
  bool name_done_ = false;
  bool args_seen_ = false, args_done_ = false, args_string_ = false;
  std::string args_raw_;    // a string-valued arguments: its literal, held
  std::string args_ready_;  // argument text not yet taken
};

// The text a JSON string literal (quotes included) stands for; false when
// it is not one.
bool decode_json_string(std::string_view literal, std::string& out);

}  // namespace pagoda::net
