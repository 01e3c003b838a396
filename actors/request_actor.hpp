// The request actor: one per request. At start it turns the request into
// prompt ids (explicit ids; chat messages through the model's chat template,
// tokenized without adding BOS again; or plain text with the tokenizer's BOS
// rule), validates the options, has an output constraint compiled (off its
// thread: the answer comes back as a message) and sends (add_atom,
// AddGroup) to the scheduler; it monitors the scheduler (engine shutdown ends it with
// on_error). Per sample it detokenizes incrementally (UTF-8 safe) and applies
// the stop strings: text that could still become a stop string is held back;
// on a match the text before it is emitted, the rest dropped, and the
// scheduler told to finish that sample. It streams to the RequestSink and
// quits when the group is done; a sink that refuses a token, or
// (cancel_atom), cancels the group (every block released by the scheduler).
// (fail_atom, message) ends it with on_error(message) (its remote engine node
// is lost; the group is cancelled too).
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <optional>
#include <string>

#include "actors/constraint_factory.hpp"
#include "actors/engine_types.hpp"
#include "model/chat_template.hpp"
#include "model/model_text.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::actors {

// What every request actor shares (immutable, thread-safe).
struct RequestContext {
  std::shared_ptr<const model::Tokenizer> tokenizer;
  // Compiles output constraints (issue 23); nullptr where this process does
  // not run the engine (a scale-out front end: its nodes compile).
  std::shared_ptr<ConstraintFactory> constraints;
  std::optional<model::ChatTemplate> chat_template;
  std::string bos_token, eos_token;
  int32_t vocab_size = 0;
};

// The context of a model's text files (tokenizer, chat template compiled,
// BOS/EOS strings) for a vocabulary of `vocab` ids; with eos_ids (the
// model's), a ConstraintFactory for structured output. Errors: the template
// does not compile.
Result<std::shared_ptr<const RequestContext>> make_request_context(const model::ModelText& text,
                                                                   int32_t vocab,
                                                                   std::vector<int32_t> eos_ids = {});

// The prompt ids of a request: prompt_ids (checked against the vocabulary),
// else messages through the chat template (no second BOS), else prompt text
// with the tokenizer's BOS rule. Thread-safe (ctx is immutable).
Result<std::vector<int32_t>> request_prompt_ids(const RequestContext& ctx, const GenerateRequest& r);

// The chat prompt text of r.messages (and r.tools_json) through the chat
// template, the clock of strftime_now at `now` when set. Errors: no template,
// a render error, tools / tool_calls that are not JSON. Thread-safe.
Result<std::string> render_chat_prompt(const RequestContext& ctx, const GenerateRequest& r,
                                       std::optional<std::tm> now = std::nullopt);

// The text of token ids (special tokens kept), or an error naming the first
// id outside the vocabulary. Thread-safe (ctx is immutable).
Result<std::string> context_detokenize(const RequestContext& ctx, const std::vector<int32_t>& ids);

caf::actor spawn_request_actor(caf::actor_system& sys, caf::actor scheduler,
                               std::shared_ptr<const RequestContext> context, RequestId id,
                               GenerateRequest request, std::shared_ptr<RequestSink> sink);

// The text of `held` that may be emitted now given the stop strings: all of
// it but the longest suffix that is a prefix of a stop string. On a match,
// returns the text before the earliest match, clears held and sets *matched.
std::string release_text(std::string& held, const std::vector<std::string>& stops, bool* matched);

}  // namespace pagoda::actors
