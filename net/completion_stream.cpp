// CompletionStream (net/completion_stream.hpp).
#include "net/completion_stream.hpp"

#include "actors/engine_errors.hpp"

namespace pagoda::net {
namespace {

// JSON around one token's text and logprob entry (quotes, keys, number).
constexpr size_t kTokenOverhead = 48;

std::string too_large_message(size_t limit) {
  return "the response would exceed " + std::to_string(limit) +
         " bytes (max_response_bytes): use stream: true, or ask for fewer tokens, choices or logprobs";
}

}  // namespace

using actors::FinishReason;

CompletionStream::CompletionStream(std::shared_ptr<ServerContext> context, std::shared_ptr<Responder> responder,
                                   ResponseMeta meta, StreamSettings settings)
    : context_(std::move(context)),
      responder_(std::move(responder)),
      meta_(std::move(meta)),
      settings_(settings),
      choices_(size_t(std::max(settings.n, 1))) {
  for (size_t i = 0; i < choices_.size(); ++i) {
    choices_[i].index = int32_t(i);
    choices_[i].has_logprobs = settings_.logprobs;
  }
  if (settings_.tools.parse && settings_.stream && !settings_.beam) {
    tool_streams_.assign(choices_.size(), ToolCallStream(settings_.tools.format));
  }
}

std::string CompletionStream::finish_name(FinishReason reason, bool shutting_down) {
  switch (reason) {
    case FinishReason::length: return "length";
    case FinishReason::abort: return shutting_down ? "shutdown" : "abort";
    case FinishReason::error: return "error";
    default: return "stop";
  }
}

void CompletionStream::begin() {
  if (!settings_.stream) return;
  responder_->start_stream(200);
  if (meta_.kind != ApiKind::chat) return;
  for (const ChoiceOut& c : choices_) {
    ChoiceOut first;
    first.index = c.index;
    first.role = true;
    responder_->send_event(chunk_body(meta_, first, settings_.include_usage));
  }
}

std::string CompletionStream::token_text(int32_t id) const {
  auto text = context_->engine->detokenize({id});
  return text ? std::move(text).value() : std::string();
}

TokenLogprob CompletionStream::token_logprob(const actors::TokenDelta& delta) const {
  TokenLogprob t;
  t.token = token_text(delta.token_id);
  t.logprob = delta.logprob;
  const size_t k = std::min({delta.top_tokens.size(), delta.top_logprobs.size(), size_t(settings_.top_logprobs)});
  for (size_t i = 0; i < k; ++i) t.top.push_back(TopCandidate{token_text(delta.top_tokens[i]), delta.top_logprobs[i]});
  return t;
}

bool CompletionStream::on_token(const actors::TokenDelta& delta) {
  if (refused_) return false;
  if (delta.index < 0 || size_t(delta.index) >= choices_.size()) return !responder_->closed();
  ChoiceOut& acc = choices_[size_t(delta.index)];
  const bool with_logprob = settings_.logprobs && delta.token_id >= 0;
  if (!settings_.stream) {
    acc.text += delta.text;
    body_estimate_ += delta.text.size();
    if (with_logprob) {
      acc.logprobs.push_back(token_logprob(delta));
      const TokenLogprob& t = acc.logprobs.back();
      body_estimate_ += 2 * (t.token.size() + kTokenOverhead);  // tokens[] and top_logprobs' own entry
      for (const TopCandidate& c : t.top) body_estimate_ += c.token.size() + kTokenOverhead;
    }
    if (body_estimate_ > context_->options.max_response_bytes) return refuse_too_large();
    return !responder_->closed();
  }
  if (!tool_streams_.empty()) return send_tool_deltas(delta, with_logprob);
  if (delta.text.empty() && !with_logprob) return !responder_->closed();
  ChoiceOut chunk;
  chunk.index = delta.index;
  chunk.text = delta.text;
  chunk.has_logprobs = settings_.logprobs;
  chunk.text_offset = acc.text_offset;
  if (with_logprob) {
    chunk.logprobs.push_back(token_logprob(delta));
    acc.text_offset += int32_t(chunk.logprobs.back().token.size());
  }
  return responder_->send_event(chunk_body(meta_, chunk, settings_.include_usage));
}

bool CompletionStream::send_tool_deltas(const actors::TokenDelta& delta, bool with_logprob) {
  ChoiceOut& acc = choices_[size_t(delta.index)];
  std::vector<ChoiceOut> pieces = tool_streams_[size_t(delta.index)].feed(delta.text);
  if (pieces.empty() && with_logprob) pieces.emplace_back();
  bool ok = !responder_->closed();
  for (size_t i = 0; i < pieces.size() && ok; ++i) {
    ChoiceOut& chunk = pieces[i];
    chunk.index = delta.index;
    chunk.has_logprobs = settings_.logprobs;
    chunk.text_offset = acc.text_offset;
    if (i == 0 && with_logprob) {
      chunk.logprobs.push_back(token_logprob(delta));
      acc.text_offset += int32_t(chunk.logprobs.back().token.size());
    }
    ok = responder_->send_event(chunk_body(meta_, chunk, settings_.include_usage));
  }
  return ok;
}

std::vector<ChoiceOut> CompletionStream::final_choices(const actors::RequestDone& done) {
  const bool shutting_down = context_->shutting_down.load();
  std::vector<ChoiceOut> out;
  if (settings_.beam) {
    for (size_t i = 0; i < done.beams.size(); ++i) {
      ChoiceOut c;
      c.index = int32_t(i);
      c.text = done.beams[i].text;
      c.finish_reason = finish_name(done.beams[i].finish, shutting_down);
      out.push_back(std::move(c));
    }
    return out;
  }
  out = std::move(choices_);
  choices_.clear();
  for (size_t i = 0; i < out.size(); ++i) {
    const FinishReason r = i < done.finish.size() ? done.finish[i] : FinishReason::abort;
    out[i].finish_reason = finish_name(r, shutting_down);
    if (!settings_.tools.parse) continue;
    if (settings_.stream) {
      out[i].finish_reason = ToolCallStream::finish_reason(tool_streams_[i].calls(), out[i].finish_reason);
    } else {
      ToolCallStream::parse_whole(settings_.tools.format, out[i]);
    }
  }
  return out;
}

void CompletionStream::finish_stream(const actors::RequestDone& done) {
  for (size_t i = 0; i < tool_streams_.size(); ++i) {
    for (ChoiceOut& piece : tool_streams_[i].finish()) {
      piece.index = int32_t(i);
      piece.has_logprobs = settings_.logprobs;
      responder_->send_event(chunk_body(meta_, piece, settings_.include_usage));
    }
  }
  for (ChoiceOut& c : final_choices(done)) {
    if (!settings_.beam) c.text.clear();  // streamed already
    c.logprobs.clear();
    c.has_logprobs = settings_.logprobs;
    responder_->send_event(chunk_body(meta_, c, settings_.include_usage));
  }
  if (settings_.include_usage) {
    responder_->send_event(usage_chunk_body(meta_, Usage{done.prompt_tokens, done.completion_tokens, done.spec_drafted, done.spec_accepted}));
  }
  responder_->send_event("[DONE]");
  responder_->end_stream();
}

bool CompletionStream::refuse_too_large() {
  refused_ = true;
  choices_.clear();  // frees what was accumulated
  choices_.shrink_to_fit();
  ticket_.reset();
  context_->requests_rejected.fetch_add(1, std::memory_order_relaxed);
  const ApiError error{400, too_large_message(context_->options.max_response_bytes), {}, "response_too_large"};
  responder_->respond(error.status, "application/json", error_json(error));
  return false;
}

void CompletionStream::on_done(const actors::RequestDone& done) {
  ticket_.reset();
  if (responder_->closed()) return;
  if (settings_.stream) return finish_stream(done);
  const std::string body = response_body(meta_, final_choices(done), Usage{done.prompt_tokens, done.completion_tokens, done.spec_drafted, done.spec_accepted});
  if (body.size() > context_->options.max_response_bytes) {
    refuse_too_large();
    return;
  }
  responder_->respond(200, "application/json", body);
}

void CompletionStream::on_error(const std::string& message) {
  ticket_.reset();
  if (responder_->closed()) return;
  const bool shutting_down = context_->shutting_down.load();
  const bool lost = actors::is_engine_unavailable(message);
  ApiError error{shutting_down || lost ? 503 : 500, message, {}, lost ? std::string(actors::kEngineUnavailable) : ""};
  if (actors::is_invalid_request(message)) error = bad_request(message, {});  // e.g. a schema that does not compile
  if (!settings_.stream) {
    responder_->respond(error.status, "application/json", error_json(error));
    return;
  }
  responder_->send_event(error_json(error));
  responder_->end_stream();
}

}  // namespace pagoda::net
