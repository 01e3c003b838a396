// ChatTemplate (see chat_template.hpp).
#include "model/chat_template.hpp"

#include "model/jinja_interpreter.hpp"

namespace pagoda::model {
namespace {

using jinja::Dict;
using jinja::Value;

// transformers' _normalize_chat_messages + _alias_reasoning_fields for one message.
Result<Value> normalize_message(const Value& m) {
  if (!m.is_dict()) {
    return make_error("Chat messages should be dicts, but got " + jinja::repr(m));
  }
  Dict kept;
  for (const auto& [k, v] : m.dict().entries()) {
    if (!v.is_none()) kept.set(k, v);
  }
  static const char* const kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};
  const Value* reasoning = nullptr;
  for (const char* f : kReasoningFields) {
    if ((reasoning = kept.find(std::string_view(f)))) break;
  }
  if (!reasoning) return Value::dict(std::move(kept));
  const Value r = *reasoning;
  Dict aliased;
  aliased.set(Value::string("thinking"), r);
  for (const auto& [k, v] : kept.entries()) aliased.set(k, v);
  aliased.set(Value::string("reasoning_content"), r);
  return Value::dict(std::move(aliased));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::compile(std::string source) {
  auto t = jinja::parse_template(source);
  if (!t) return make_error("chat template: " + t.error().message);
  ChatTemplate ct;
  ct.source_ = std::make_shared<const std::string>(std::move(source));
  ct.tmpl_ = std::make_shared<const jinja::Template>(std::move(*t));
  return ct;
}

Result<std::string> ChatTemplate::render(const ChatRenderInput& in) const {
  if (!in.messages.is_list()) return make_error("chat messages must be a list");
  if (in.messages.items().empty()) {
    return make_error("Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  std::vector<Value> messages;
  for (const Value& m : in.messages.items()) {
    auto n = normalize_message(m);
    if (!n) return n.error();
    messages.push_back(std::move(*n));
  }
  Dict ctx;
  ctx.set(Value::string("bos_token"), Value::string(in.bos_token));
  ctx.set(Value::string("eos_token"), Value::string(in.eos_token));
  if (in.extra_context.is_dict()) {
    for (const auto& [k, v] : in.extra_context.dict().entries()) {
      if (!k.is_string()) return make_error("extra_context keys must be strings");
      const std::string& name = k.str();
      if (name == "messages" || name == "tools" || name == "documents" || name == "add_generation_prompt") {
        return make_error("extra_context may not set '" + name + "'");
      }
      ctx.set(k, v);
    }
  } else if (!in.extra_context.is_undefined() && !in.extra_context.is_none()) {
    return make_error("extra_context must be a dict");
  }
  ctx.set(Value::string("messages"), Value::list(std::move(messages)));
  ctx.set(Value::string("tools"), in.tools.is_undefined() ? Value::none() : in.tools);
  ctx.set(Value::string("documents"), Value::none());
  ctx.set(Value::string("add_generation_prompt"), Value::boolean(in.add_generation_prompt));
  jinja::RenderOptions opts;
  opts.now = in.now;
  return jinja::render(*tmpl_, ctx, opts);
}

}  // namespace pagoda::model
