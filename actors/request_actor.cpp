// The request actor (see request_actor.hpp). Beam search requests stream no
// tokens: each step's SeqEvent carries the ranked beams, which go to
// RequestSink::on_beams with their text (decoded whole, special tokens
// skipped); the last one's n best become RequestDone::beams.
#include "actors/request_actor.hpp"

#include <algorithm>

#include "actors/messages.hpp"
#include "model/incremental_decoder.hpp"
#include "model/json_value.hpp"

namespace pagoda::actors {

std::string release_text(std::string& held, const std::vector<std::string>& stops, bool* matched) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, held.find(s));
  *matched = first != std::string::npos;
  if (*matched) {
    std::string out = held.substr(0, first);
    held.clear();
    return out;
  }
  size_t keep = 0;
  for (const std::string& s : stops) {
    for (size_t k = std::min(s.size() - 1, held.size()); k > keep; --k) {
      if (held.compare(held.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held.substr(0, held.size() - keep);
  held.erase(0, held.size() - keep);
  return out;
}

Result<std::shared_ptr<const RequestContext>> make_request_context(const model::ModelText& text,
                                                                   int32_t vocab,
                                                                   std::vector<int32_t> eos_ids) {
  auto ctx = std::make_shared<RequestContext>();
  ctx->tokenizer = text.tokenizer;
  if (!eos_ids.empty()) {
    ctx->constraints = std::make_shared<ConstraintFactory>(text.tokenizer, vocab, std::move(eos_ids));
  }
  ctx->bos_token = text.bos_token;
  ctx->eos_token = text.eos_token;
  ctx->vocab_size = vocab;
  if (!text.chat_template.empty()) {
    Result<model::ChatTemplate> t = model::ChatTemplate::compile(text.chat_template);
    if (!t) return t.error();
    ctx->chat_template.emplace(std::move(t).value());
  }
  return std::shared_ptr<const RequestContext>(std::move(ctx));
}

Result<std::string> context_detokenize(const RequestContext& ctx, const std::vector<int32_t>& ids) {
  for (int32_t id : ids) {
    if (id < 0 || id >= ctx.vocab_size) {
      return make_error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                        std::to_string(ctx.vocab_size) + ")");
    }
  }
  return ctx.tokenizer->decode(ids, false);
}

namespace {

// One message as the template's dict: role, content, and the tool fields
// that are set (tool_calls parsed from its JSON).
Result<model::jinja::Value> chat_message_value(const ChatMessage& m) {
  using model::jinja::Value;
  model::jinja::Dict d;
  d.set(Value::string("role"), Value::string(m.role));
  d.set(Value::string("content"), Value::string(m.content));
  if (!m.tool_calls_json.empty()) {
    Result<Value> calls = model::parse_json(m.tool_calls_json);
    if (!calls) return make_error("tool_calls: " + calls.error().message);
    d.set(Value::string("tool_calls"), std::move(*calls));
  }
  if (!m.tool_call_id.empty()) d.set(Value::string("tool_call_id"), Value::string(m.tool_call_id));
  if (!m.name.empty()) d.set(Value::string("name"), Value::string(m.name));
  return Value::dict(std::move(d));
}

}  // namespace

Result<std::vector<int32_t>> request_prompt_ids(const RequestContext& ctx, const GenerateRequest& r) {
  if (!r.prompt_ids.empty()) {
    for (int32_t id : r.prompt_ids) {
      if (id < 0 || id >= ctx.vocab_size) return make_error("prompt id out of the vocabulary");
    }
    return r.prompt_ids;
  }
  if (r.messages.empty()) return ctx.tokenizer->encode(r.prompt, true);
  Result<std::string> text = render_chat_prompt(ctx, r);
  if (!text) return text.error();
  return ctx.tokenizer->encode(*text, false);
}

Result<std::string> render_chat_prompt(const RequestContext& ctx, const GenerateRequest& r, std::optional<std::tm> now) {
  if (!ctx.chat_template) return make_error("the model has no chat template");
  std::vector<model::jinja::Value> msgs;
  for (const ChatMessage& m : r.messages) {
    Result<model::jinja::Value> msg = chat_message_value(m);
    if (!msg) return msg.error();
    msgs.push_back(std::move(*msg));
  }
  model::ChatRenderInput in;
  in.messages = model::jinja::Value::list(std::move(msgs));
  if (!r.tools_json.empty()) {
    Result<model::jinja::Value> tools = model::parse_json(r.tools_json);
    if (!tools) return make_error("tools: " + tools.error().message);
    in.tools = std::move(*tools);
  }
  in.bos_token = ctx.bos_token;
  in.eos_token = ctx.eos_token;
  in.now = now;
  return ctx.chat_template->render(in);
}

namespace {

struct SampleStream {
  std::unique_ptr<model::IncrementalDecoder> decoder;
  std::string held;
  bool done = false;
};

struct RequestState {
  caf::actor scheduler;
  std::shared_ptr<const RequestContext> ctx;
  std::shared_ptr<RequestSink> sink;
  RequestId id = 0;
  SamplingOptions options;
  std::vector<SampleStream> samples;
  bool beam = false;                        // beam search: no samples, ranked beams
  std::vector<BeamHypothesis> last_beams;   // the latest ranked beams
  bool beam_final = false;                  // done.beams holds the result
  RequestDone done;
  std::string error;
  bool ended = false;  // the sink got its last call
};

using Self = caf::stateful_actor<RequestState>*;

void end_with_error(Self self, const std::string& message) {
  if (!self->state.ended) self->state.sink->on_error(message);
  self->state.ended = true;
  self->quit();
}

// Beam search: done.beams := the n best of the latest ranked beams (live
// ones, when the search did not end, finish with abort).
void set_beam_result(RequestState& st) {
  st.done.beams.clear();
  st.done.finish.clear();
  st.done.completion_tokens = 0;
  for (const BeamHypothesis& h : st.last_beams) {
    if (int32_t(st.done.beams.size()) >= st.options.n) break;
    if (st.beam_final && h.finish == FinishReason::none) continue;
    st.done.beams.push_back(h);
    if (st.done.beams.back().finish == FinishReason::none) st.done.beams.back().finish = FinishReason::abort;
    st.done.finish.push_back(st.done.beams.back().finish);
    st.done.completion_tokens += int32_t(h.token_ids.size());
  }
}

// Beam search: the ranked beams of one step, to the sink; the final ones
// become the result.
void on_beam_event(Self self, const SeqEvent& ev) {
  auto& st = self->state;
  if (ev.finish == FinishReason::error && st.error.empty()) st.error = ev.error;
  if (!ev.beam) return;
  BeamsUpdate u;
  for (const BeamResult& r : ev.beams) {
    BeamHypothesis h;
    h.token_ids = r.tokens;
    h.text = st.ctx->tokenizer->decode(r.tokens, /*skip_special=*/true);
    h.cumulative_logprob = r.cumulative_logprob;
    h.score = r.score;
    h.finish = r.finish;
    u.beams.push_back(std::move(h));
  }
  st.sink->on_beams(u);
  st.last_beams = std::move(u.beams);
  st.beam_final = ev.beam_final;
  if (ev.beam_final) set_beam_result(st);
}

// Cancels the group (the consumer is gone or asked); reports abort if it can.
void cancel(Self self, bool tell_sink) {
  auto& st = self->state;
  self->send(st.scheduler, cancel_atom::value, st.id);
  if (st.beam && !st.beam_final) set_beam_result(st);
  if (tell_sink && !st.ended) {
    for (size_t i = 0; i < st.samples.size(); ++i) {
      if (!st.samples[i].done) st.done.finish[i] = FinishReason::abort;
    }
    st.sink->on_done(st.done);
  }
  st.ended = true;
  self->quit();
}

bool emit(Self self, int32_t index, std::string text, const SeqEvent* ev) {
  TokenDelta d;
  d.index = index;
  d.text = std::move(text);
  if (ev != nullptr) {
    d.token_id = ev->sample.token;
    d.logprob = ev->sample.logprob;
    d.top_tokens = ev->sample.top_tokens;
    d.top_logprobs = ev->sample.top_logprobs;
  } else if (d.text.empty()) {
    return true;
  }
  return self->state.sink->on_token(d);
}

// A finished sample: flush what the decoder and the stop-string check held.
bool flush(Self self, int32_t index, FinishReason reason) {
  auto& st = self->state;
  SampleStream& s = st.samples[size_t(index)];
  s.done = true;
  st.done.finish[size_t(index)] = reason;
  s.held += s.decoder->finish();
  bool matched = false;
  std::string text = release_text(s.held, st.options.stop, &matched);
  if (!matched) text += s.held;
  if (matched) st.done.finish[size_t(index)] = FinishReason::stop;
  return emit(self, index, std::move(text), nullptr);
}

bool on_event(Self self, const SeqEvent& ev) {
  auto& st = self->state;
  if (ev.index < 0 || size_t(ev.index) >= st.samples.size()) return true;
  SampleStream& s = st.samples[size_t(ev.index)];
  if (s.done) return true;
  if (ev.has_token) {
    ++st.done.completion_tokens;
    st.done.spec_drafted = ev.spec_drafted;  // cumulative; speculation runs with n = 1 only
    st.done.spec_accepted = ev.spec_accepted;
    s.decoder->push(ev.sample.token, s.held);
    bool matched = false;
    std::string text = release_text(s.held, st.options.stop, &matched);
    if (!emit(self, ev.index, std::move(text), &ev)) return false;
    if (matched) {
      s.done = true;
      st.done.finish[size_t(ev.index)] = FinishReason::stop;
      self->send(st.scheduler, finish_atom::value, st.id, ev.index);
      return true;
    }
  }
  if (ev.finish == FinishReason::error && st.error.empty()) st.error = ev.error;
  if (ev.finish != FinishReason::none) return flush(self, ev.index, ev.finish);
  return true;
}

void on_batch(Self self, const EventBatch& batch) {
  auto& st = self->state;
  for (const SeqEvent& ev : batch.events) {
    if (st.ended) return;
    if (ev.group_done && st.beam && !st.beam_final) {
      if (!st.error.empty()) return end_with_error(self, st.error);
      set_beam_result(st);  // ended without a result (e.g. cancelled): abort
    }
    if (ev.group_done) {
      const bool failed = st.done.completion_tokens == 0 &&
                          std::any_of(st.done.finish.begin(), st.done.finish.end(),
                                      [](FinishReason r) { return r == FinishReason::error; });
      if (failed) return end_with_error(self, st.error.empty() ? "request failed" : st.error);
      st.sink->on_done(st.done);
      st.ended = true;
      self->quit();
      return;
    }
    if (st.beam) {
      on_beam_event(self, ev);
      continue;
    }
    if (!on_event(self, ev)) return cancel(self, /*tell_sink=*/false);
  }
}

caf::behavior request_fn(Self self, caf::actor scheduler, std::shared_ptr<const RequestContext> ctx,
                         RequestId id, GenerateRequest req, std::shared_ptr<RequestSink> sink) {
  auto& st = self->state;
  st.scheduler = std::move(scheduler);
  st.ctx = std::move(ctx);
  st.sink = std::move(sink);
  st.id = id;
  st.options = req.sampling;
  Result<std::vector<int32_t>> ids = request_prompt_ids(*st.ctx, req);
  if (!ids) {
    end_with_error(self, ids.error().message);
    return {};
  }
  if (auto ok = st.options.validate(); !ok) {
    end_with_error(self, ok.error().message);
    return {};
  }
  st.done.prompt_tokens = int32_t(ids->size());
  st.beam = st.options.beam_width > 0;
  if (!st.beam) st.done.finish.assign(size_t(st.options.n), FinishReason::none);
  for (int32_t i = 0; !st.beam && i < st.options.n; ++i) {
    SampleStream s;
    s.decoder = std::make_unique<model::IncrementalDecoder>(st.ctx->tokenizer, true);
    st.samples.push_back(std::move(s));
  }
  self->monitor(st.scheduler);
  self->set_down_handler([self](caf::down_msg&) { end_with_error(self, "the engine stopped"); });
  AddGroup add{id, std::move(ids).value(), st.options, nullptr};
  const bool constrained = st.options.constraint.active() || st.options.token_mask.active();
  if (!constrained || !st.ctx->constraints) {
    self->send(st.scheduler, add_atom::value, std::move(add));
  } else {
    // Compiled off this thread; the answer comes back as (compiled_atom, ...).
    auto box = std::make_shared<AddGroup>(std::move(add));
    st.ctx->constraints->prepare(st.options, [me = caf::actor_cast<caf::actor>(self), box](Result<ConstraintProgramPtr> r) {
      if (r) box->constraint = std::move(r).value();
      caf::anon_send(me, compiled_atom::value, box, r ? std::string() : r.error().message);
    });
  }
  return {
      [self](compiled_atom, const std::shared_ptr<AddGroup>& add, const std::string& error) {
        if (!error.empty()) return end_with_error(self, error);
        self->send(self->state.scheduler, add_atom::value, std::move(*add));
      },
      [self](events_atom, const EventBatch& batch) { on_batch(self, batch); },
      [self](cancel_atom) { cancel(self, /*tell_sink=*/true); },
      [self](fail_atom, const std::string& message) {
        self->send(self->state.scheduler, cancel_atom::value, self->state.id);
        end_with_error(self, message);
      },
  };
}

}  // namespace

caf::actor spawn_request_actor(caf::actor_system& sys, caf::actor scheduler,
                               std::shared_ptr<const RequestContext> context, RequestId id,
                               GenerateRequest request, std::shared_ptr<RequestSink> sink) {
  return sys.spawn(request_fn, std::move(scheduler), std::move(context), id, std::move(request),
                   std::move(sink));
}

}  // namespace pagoda::actors
