// Fuzz target: the /v1/ws frame handler (net/ws_protocol) behind a fake
// channel, with no engine (the context says "not ready" or "shutting down"),
// so every frame is parsed and answered by the protocol itself: generate
// frames are refused at admission, cancel of an unknown id, kv subscribe and
// unsubscribe, malformed JSON, binary and oversize frames, close.
//
// Input: frames separated by the two bytes 0x00 0x01. A frame starting with
// 0x02 is a binary frame of that length, one starting with 0x03 an oversize
// frame. The first byte sets the context: bit 0 ready, bit 1 shutting down,
// bit 2 the channel refuses frames after the 4th (a closed socket).
// Invariants: every frame the server sends is a JSON object with a string
// "type"; the handler answers each text frame that is not a kv
// (un)subscribe with exactly one frame while the channel is open.
#include <simdjson.h>

#include "fuzz_util.hpp"
#include "net/server_context.hpp"
#include "net/ws_protocol.hpp"

using namespace pagoda;

namespace {

class CheckingChannel final : public net::WsChannel {
 public:
  explicit CheckingChannel(size_t refuse_after) : refuse_after_(refuse_after) {}
  bool send_text(std::string frame) override {
    simdjson::dom::element doc;
    FUZZ_CHECK(parser_.parse(frame).get(doc) == simdjson::SUCCESS, "server frames are JSON");
    std::string_view type;
    FUZZ_CHECK(doc["type"].get(type) == simdjson::SUCCESS, "server frames have a string type");
    if (sent_ >= refuse_after_) return false;
    ++sent_;
    return true;
  }
  void close(uint16_t, std::string) override {}
  size_t queued_bytes() const override { return 0; }
  size_t sent() const { return sent_; }

 private:
  simdjson::dom::parser parser_;
  size_t refuse_after_;
  size_t sent_ = 0;
};

// A kv_subscribe / kv_unsubscribe frame (answered by no frame of its own).
bool is_kv_frame(std::string_view frame) {
  static simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view type;
  if (parser.parse(frame.data(), frame.size()).get(doc) != simdjson::SUCCESS) return false;
  if (doc["type"].get(type) != simdjson::SUCCESS) return false;
  return type == "kv_subscribe" || type == "kv_unsubscribe";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto ctx = std::make_shared<net::ServerContext>();
  ctx->ready = (data[0] & 1) != 0;
  ctx->shutting_down = (data[0] & 2) != 0;
  ctx->options.served_model_name = "fuzz";
  auto channel = std::make_shared<CheckingChannel>((data[0] & 4) ? 4 : SIZE_MAX);
  auto handler = net::make_ws_protocol(ctx, channel);
  const std::string_view in = fuzz::as_text(data + 1, size - 1);
  for (std::string_view frame : fuzz::split_all(in, std::string_view("\x00\x01", 2))) {
    const size_t before = channel->sent();
    if (!frame.empty() && frame[0] == '\x02') {
      handler->on_binary(frame.size());
    } else if (!frame.empty() && frame[0] == '\x03') {
      handler->on_too_big();
    } else {
      handler->on_text(frame);
      if (!is_kv_frame(frame) && !(data[0] & 4)) {
        FUZZ_CHECK(channel->sent() == before + 1, "one answer per frame");
      }
    }
  }
  handler->on_closed();
  handler.reset();
  return 0;
}
