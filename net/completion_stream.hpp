// CompletionStream: the RequestSink that turns one engine request into an
// OpenAI answer on a Responder: a whole JSON response, or an SSE stream of
// chunks.
//
// Streaming (stream: true): begin() starts the event stream (and, for chat,
// sends each choice's first delta {role:"assistant", content:""}); every
// TokenDelta with text (or with a token, when logprobs were asked for)
// becomes one chunk for its choice; on_done sends one chunk per choice with
// its finish_reason, then the usage chunk (choices: []) when include_usage,
// then "[DONE]". Beam search streams no tokens: on_done sends each returned
// beam's whole text with its finish_reason in one chunk per beam.
//
// Tool calls (settings.tools.parse, chat, not beam search): each choice's
// text goes through a ToolCallStream; streamed, its deltas replace the text
// deltas (content outside calls, then each call's first delta and argument
// fragments; a token's logprobs ride on its first delta, or on an empty one
// when the parser holds the token's text back); whole, the final text is
// split into content and message.tool_calls. finish_reason "tool_calls"
// when a choice called a tool and stopped normally.
//
// Finish reasons: "stop", "length"; an abort while the server shuts down is
// "shutdown" (not an OpenAI value: clients see why the text is cut), any
// other abort "abort" (only visible to someone still listening).
// Errors (engine on_error; the route validated the request before submit):
// non-streaming, a 500 (503 while shutting down) with OpenAI's error JSON;
// streaming (the 200 and the SSE headers are already out), one
// `data: {"error":{...}}` event (the openai client raises APIError on it)
// and the stream ends without [DONE].
//
// Size cap (non-streaming): the body being accumulated is estimated per token
// (text, and each logprob candidate's token text plus its JSON); past
// ServerOptions::max_response_bytes the request is refused at once: a 400
// response_too_large (use stream: true) and on_token returns false (the
// engine cancels it and frees what it held). The final body is checked too.
//
// Disconnect = cancel: on_token returns false once the responder is closed
// or refuses an event (the engine then cancels the request); the route also
// registers Responder::on_close to cancel the RequestHandle.
//
// Threading: begin() runs on the session strand before Engine::submit; the
// sink callbacks then run on an actor thread, one at a time (engine
// contract), so the state needs no lock. Responder calls are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "net/http_exchange.hpp"
#include "net/openai_response.hpp"
#include "net/server_context.hpp"
#include "net/tool_call_stream.hpp"
#include "net/tool_prompt.hpp"

namespace pagoda::net {

struct StreamSettings {
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  int32_t n = 1;
  bool beam = false;
  ToolPlan tools;  // chat: parse tool calls out of each choice's text
};

class CompletionStream : public actors::RequestSink {
 public:
  CompletionStream(std::shared_ptr<ServerContext> context, std::shared_ptr<Responder> responder,
                   ResponseMeta meta, StreamSettings settings);

  // Streaming only (no-op otherwise): starts the SSE response.
  void begin();
  // The client's in-flight slot (ClientLimits), released when the request ends.
  void hold(ClientLimits::Ticket ticket) { ticket_ = std::move(ticket); }

  bool on_token(const actors::TokenDelta& delta) override;
  void on_done(const actors::RequestDone& done) override;
  void on_error(const std::string& message) override;

  // The API name of a finish reason (see above).
  static std::string finish_name(actors::FinishReason reason, bool shutting_down);

 private:
  TokenLogprob token_logprob(const actors::TokenDelta& delta) const;
  std::string token_text(int32_t id) const;
  void finish_stream(const actors::RequestDone& done);
  std::vector<ChoiceOut> final_choices(const actors::RequestDone& done);
  bool refuse_too_large();  // answers response_too_large; returns false
  bool send_tool_deltas(const actors::TokenDelta& delta, bool with_logprob);

  std::shared_ptr<ServerContext> context_;
  std::shared_ptr<Responder> responder_;
  ResponseMeta meta_;
  StreamSettings settings_;
  std::vector<ChoiceOut> choices_;  // per sample: text so far (non-streaming) / token text offset
  size_t body_estimate_ = 0;        // non-streaming: bytes of the body so far (about)
  bool refused_ = false;            // response_too_large answered: refuse every later token
  ClientLimits::Ticket ticket_;
  std::vector<ToolCallStream> tool_streams_;  // streaming with tools: one per choice
};

}  // namespace pagoda::net
