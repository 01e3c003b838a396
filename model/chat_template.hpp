// ChatTemplate: a model's Jinja chat template, rendered exactly as
// transformers' tokenizer.apply_chat_template(messages, tools=...,
// add_generation_prompt=..., tokenize=False, **extra) renders it with jinja2.
//
// What render() mirrors from transformers (tokenization_utils_base.py,
// utils/chat_template_utils.py):
//  - an empty message list is rejected; every message must be a dict;
//  - keys whose value is None are dropped from each message;
//  - a message's reasoning ("reasoning_content", "thinking" or "reasoning")
//    is copied to both "thinking" and "reasoning_content";
//  - the template sees messages, tools (None when absent), documents (None),
//    add_generation_prompt, bos_token, eos_token and the extra_context
//    entries (which may override bos_token/eos_token, as kwargs do);
//  - environment: trim_blocks, lstrip_blocks, loop controls, the sandbox's
//    attribute rules, the custom tojson, raise_exception, strftime_now,
//    namespace and dict globals, and the {% generation %} block.
// Only bos_token and eos_token of the tokenizer's special tokens are passed;
// a template reading unk_token/pad_token sees them undefined.
//
// compile() parses the whole template up front and rejects anything the
// interpreter does not support (see jinja_parser.hpp) with an Error naming
// the construct and line, so an unsupported template never renders a
// silently wrong prompt.
//
// Thread-safety: a compiled ChatTemplate is immutable; render() may be called
// concurrently from several threads.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "gpu/result.hpp"
#include "model/jinja_parser.hpp"
#include "model/jinja_value.hpp"
#include "model/json_value.hpp"

namespace pagoda::model {

struct ChatRenderInput {
  jinja::Value messages;             // list of dicts (role, content, tool_calls, ...)
  jinja::Value tools = jinja::Value::none();  // list of tool schemas; none when absent
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;
  jinja::Value extra_context;        // dict (optional), e.g. {"enable_thinking": false}
  std::optional<std::tm> now;        // strftime_now's clock; unset: current local time
};

class ChatTemplate {
 public:
  static Result<ChatTemplate> compile(std::string source);
  Result<std::string> render(const ChatRenderInput& input) const;
  const std::string& source() const { return *source_; }

 private:
  ChatTemplate() = default;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace pagoda::model
