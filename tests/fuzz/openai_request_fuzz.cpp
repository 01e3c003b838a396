// Fuzz target: the OpenAI request parser (net/openai_request), completions
// and chat. The first byte picks the route (even: /v1/completions, odd:
// /v1/chat/completions); the rest is the body.
// Invariants: every body gets either a request or an ApiError with a 4xx
// status and a message; an accepted request's sampling options validate and
// its prompt matches its route (completions: text or ids; chat: messages).
#include "fuzz_util.hpp"
#include "net/openai_request.hpp"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const net::ApiKind kind = data[0] % 2 == 0 ? net::ApiKind::completion : net::ApiKind::chat;
  const std::string_view body = fuzz::as_text(data + 1, size - 1);
  net::ParsedRequest parsed = net::parse_openai_request(kind, body, "smollm2");
  if (parsed.error) {
    const net::ApiError& e = *parsed.error;
    FUZZ_CHECK(e.status >= 400 && e.status < 500, "a bad body is a 4xx");
    FUZZ_CHECK(!e.message.empty(), "an error has a message");
    return 0;
  }
  const net::OpenAiRequest& r = parsed.request;
  FUZZ_CHECK(r.kind == kind, "the request keeps its route");
  FUZZ_CHECK(r.generate.sampling.validate().ok(), "accepted sampling options are valid");
  if (kind == net::ApiKind::chat) {
    FUZZ_CHECK(!r.generate.messages.empty(), "an accepted chat request has messages");
  } else {
    FUZZ_CHECK(r.generate.messages.empty(), "a completion request has no messages");
  }
  FUZZ_CHECK(r.top_logprobs >= 0, "top_logprobs is not negative");
  return 0;
}
