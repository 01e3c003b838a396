// The /v1/ws protocol handler (net/ws_protocol.hpp, docs/protocol.md).
//
// Threads: the handler's methods run on the session strand; each request's
// sink runs on actor threads; the kv stream has its own thread. What they
// share is OpenRequests (a mutex-guarded map id -> request) and the channel
// (thread-safe). The races, and why each is benign:
//   - done vs cancel: the sink erases its entry before sending `done`; a
//     cancel that finds no entry answers unknown_id (it crossed the done),
//     and RequestHandle::cancel() after the end is a no-op.
//   - done vs on_closed: on_closed takes every entry out and cancels it; a
//     sink finishing at the same time finds its entry gone and its send fails
//     on the closed channel. Either way the engine frees the blocks.
//   - accepted vs first token: `accepted` is queued on the strand before
//     submit(), so it precedes every frame of the request.
//   - entries are erased by (id, serial), so a late sink never removes a newer
//     request that reuses its id.
// Sinks hold no strong reference to the ServerContext or the Engine: a sink
// can be destroyed last on an actor thread, and ~Engine must not run there.
// The engine outlives every callback of its sinks (its actors call them and
// ~Engine waits for them), so a raw pointer is safe. The context may be gone
// by then (a handler and its context dropped while requests wind down), so
// the sink reads `shutting_down` through a weak_ptr.
#include "net/ws_protocol.hpp"

#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>

#include "actors/engine_errors.hpp"
#include "net/kv_stream.hpp"
#include "net/ws_messages.hpp"

namespace pagoda::net {
namespace {

// The open requests of one socket. Thread-safe.
class OpenRequests {
 public:
  bool contains(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.contains(id);
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }
  // Adds `id` (absent) and returns its serial.
  uint64_t add(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t serial = ++next_serial_;
    map_[id] = Entry{serial, {}};
    return serial;
  }
  void set_handle(const std::string& id, uint64_t serial, actors::RequestHandle handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(id);
    if (it != map_.end() && it->second.serial == serial) it->second.handle = std::move(handle);
  }
  void erase(const std::string& id, uint64_t serial) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(id);
    if (it != map_.end() && it->second.serial == serial) map_.erase(it);
  }
  std::optional<actors::RequestHandle> find(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(id);
    if (it == map_.end()) return std::nullopt;
    return it->second.handle;
  }
  std::vector<actors::RequestHandle> take_all() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<actors::RequestHandle> out;
    for (auto& [id, e] : map_) out.push_back(std::move(e.handle));
    map_.clear();
    return out;
  }
  KvOwnerIds owner_ids() {
    std::lock_guard<std::mutex> lock(mu_);
    KvOwnerIds out;
    for (const auto& [id, e] : map_) {
      if (e.handle.id() != 0) out.emplace_back(e.handle.id(), id);
    }
    return out;
  }

 private:
  struct Entry {
    uint64_t serial = 0;
    actors::RequestHandle handle;  // id() == 0 until submit() returned
  };
  std::mutex mu_;
  std::unordered_map<std::string, Entry> map_;
  uint64_t next_serial_ = 0;
};

// Streams one request's events as frames. Called on actor threads.
class WsSink final : public actors::RequestSink {
 public:
  WsSink(const std::shared_ptr<ServerContext>& context, std::shared_ptr<WsChannel> channel,
         std::shared_ptr<OpenRequests> open, std::string id, uint64_t serial, bool want_logprobs,
         ClientLimits::Ticket ticket)
      : ticket_(std::move(ticket)),
        context_(context),
        engine_(context->engine.get()),
        max_queued_(context->options.max_queued_bytes),
        channel_(std::move(channel)),
        open_(std::move(open)),
        id_(std::move(id)),
        serial_(serial),
        want_logprobs_(want_logprobs) {}

  bool on_token(const actors::TokenDelta& delta) override {
    if (delta.text.empty() && delta.token_id < 0) return true;  // nothing to say
    if (channel_->send_text(ws_token_frame(id_, delta, want_logprobs_, *engine_))) return true;
    open_->erase(id_, serial_);  // the socket is gone: refusing cancels the request
    return false;
  }
  // Rate-bounded: each frame lists every beam's whole text, so one per step
  // would grow quadratically with the length; `done` has the final beams.
  void on_beams(const actors::BeamsUpdate& update) override {
    const auto now = std::chrono::steady_clock::now();
    if (sent_beams_ && now - last_beams_ < kBeamsInterval) return;
    if (channel_->queued_bytes() > max_queued_ / 4) return;
    sent_beams_ = true;
    last_beams_ = now;
    channel_->send_text(ws_beams_frame(id_, update));
  }
  void on_done(const actors::RequestDone& done) override {
    ticket_.reset();
    open_->erase(id_, serial_);
    bool shutting_down = false;
    if (auto context = context_.lock()) shutting_down = context->shutting_down.load();
    channel_->send_text(ws_done_frame(id_, done, shutting_down));
  }
  void on_error(const std::string& message) override {
    ticket_.reset();
    open_->erase(id_, serial_);
    const bool lost = actors::is_engine_unavailable(message);
    channel_->send_text(
        ws_error_frame(id_, lost                                  ? WsErrorCode::engine_unavailable
                            : actors::is_invalid_request(message) ? WsErrorCode::bad_request
                                                                  : WsErrorCode::engine_error,
                       message, true));
  }

 private:
  ClientLimits::Ticket ticket_;  // this client's in-flight slot, released with the sink
  std::weak_ptr<ServerContext> context_;
  const actors::EngineClient* engine_;
  size_t max_queued_;  // the session's outgoing queue limit
  std::shared_ptr<WsChannel> channel_;
  std::shared_ptr<OpenRequests> open_;
  std::string id_;
  uint64_t serial_;
  bool want_logprobs_;
  static constexpr std::chrono::milliseconds kBeamsInterval{50};
  bool sent_beams_ = false;
  std::chrono::steady_clock::time_point last_beams_{};
};

class WsProtocol final : public WsHandler {
 public:
  WsProtocol(std::shared_ptr<ServerContext> context, std::shared_ptr<WsChannel> channel)
      : context_(std::move(context)), channel_(std::move(channel)) {
    channel_->send_text(ws_hello_frame(*context_));
  }
  ~WsProtocol() override { end_all(); }

  void on_text(std::string_view frame) override {
    if (closed_) return;
    WsCommand command = parser_.parse(frame);
    std::visit([this](auto& c) { handle(c); }, command);
  }
  void on_binary(size_t size) override {
    reject(std::nullopt, WsErrorCode::binary_frame,
           "binary frames are not supported (got " + std::to_string(size) + " bytes); send JSON text");
  }
  void on_too_big() override {
    reject(std::nullopt, WsErrorCode::frame_too_big,
           "the frame is over " + std::to_string(context_->options.max_frame_bytes) + " bytes");
  }
  void on_closed() override {
    closed_ = true;
    end_all();
  }

 private:
  // terminal: the error ends `id` (see ws_error_frame).
  void reject(const std::optional<std::string>& id, WsErrorCode code, const std::string& message,
              bool terminal = false) {
    context_->requests_rejected.fetch_add(1, std::memory_order_relaxed);
    channel_->send_text(ws_error_frame(id, code, message, terminal));
  }

  // A rejected generate frame ends its id, unless that id names an open
  // request (which goes on).
  void handle(WsBadFrame& bad) {
    const bool terminal = bad.generate && bad.id && !open_->contains(*bad.id);
    reject(bad.id, bad.code, bad.message, terminal);
  }

  void handle(WsCancel& cancel) {
    std::optional<actors::RequestHandle> handle = open_->find(cancel.id);
    if (!handle) {
      reject(cancel.id, WsErrorCode::unknown_id, "no open request has id '" + cancel.id + "'");
      return;
    }
    handle->cancel();  // its `done` (finish "abort") comes from the sink
  }

  void handle(WsKvSubscribe& kv) {
    if (!kv.subscribe) {
      kv_.reset();  // joins the stream's thread (bounded by one frame build)
      return;
    }
    if (kv_ || !context_->engine) return;
    KvStream::Options options;
    options.interval = context_->options.kv_interval;
    options.max_queued = context_->options.max_queued_bytes / 4;
    kv_ = std::make_unique<KvStream>(context_->engine, channel_, options,
                                     [open = open_] { return open->owner_ids(); });
  }

  void handle(WsGenerate& g) {
    if (auto refusal = admission(g.id)) {
      return reject(g.id, refusal->first, refusal->second, refusal->first != WsErrorCode::duplicate_id);
    }
    ClientLimits::Ticket ticket =
        context_->clients->acquire(channel_->peer(), context_->options.max_requests_per_client);
    if (!ticket) {
      return reject(g.id, WsErrorCode::too_many_requests,
                    "this client already has " + std::to_string(context_->options.max_requests_per_client) +
                        " open requests",
                    true);
    }
    auto ids = context_->engine->tokenize(g.request);
    if (!ids) return reject(g.id, WsErrorCode::bad_request, ids.error().message, true);
    if (ids->empty()) return reject(g.id, WsErrorCode::bad_request, "the prompt has no tokens", true);
    const int32_t limit = context_->prompt_token_limit();
    if (int64_t(ids->size()) > limit) {
      return reject(g.id, WsErrorCode::prompt_too_long,
                    "the prompt has " + std::to_string(ids->size()) + " tokens; the limit is " +
                        std::to_string(limit),
                    true);
    }
    start(g, std::move(ids).value(), std::move(ticket));
  }

  // Why a generate frame with this id cannot start now, if it cannot.
  std::optional<std::pair<WsErrorCode, std::string>> admission(const std::string& id) {
    if (open_->contains(id)) return {{WsErrorCode::duplicate_id, "id '" + id + "' is already in use"}};
    if (context_->shutting_down.load()) return {{WsErrorCode::shutting_down, "the server is shutting down"}};
    if (!context_->ready.load() || !context_->engine) {
      return {{WsErrorCode::not_ready, "the engine is still loading"}};
    }
    const int32_t max = context_->options.max_requests_per_connection;
    if (max > 0 && open_->size() >= size_t(max)) {
      return {{WsErrorCode::too_many_requests,
               "this socket already has " + std::to_string(max) + " open requests"}};
    }
    const int32_t max_waiting = context_->options.max_waiting;
    if (max_waiting > 0 && context_->engine->stats().waiting >= max_waiting) {
      return {{WsErrorCode::overloaded, "the server's waiting queue is full; retry later"}};
    }
    return std::nullopt;
  }

  // Registers the request, announces it, then submits it (in that order:
  // `accepted` must precede the sink's first frame).
  void start(WsGenerate& g, std::vector<int32_t> prompt_ids, ClientLimits::Ticket ticket) {
    const int32_t prompt_tokens = int32_t(prompt_ids.size());
    actors::GenerateRequest request;
    request.prompt_ids = std::move(prompt_ids);
    request.sampling = g.request.sampling;
    request.sampling.client = fair_share_client(request.sampling.client, channel_->peer());
    const uint64_t serial = open_->add(g.id);
    channel_->send_text(ws_accepted_frame(g.id, prompt_tokens, request.sampling));
    auto sink =
        std::make_shared<WsSink>(context_, channel_, open_, g.id, serial, g.want_logprobs, std::move(ticket));
    actors::RequestHandle handle = context_->engine->submit(std::move(request), std::move(sink));
    open_->set_handle(g.id, serial, std::move(handle));
  }

  // Stops the kv stream and cancels every open request (their blocks return).
  void end_all() {
    kv_.reset();
    for (actors::RequestHandle& h : open_->take_all()) h.cancel();
  }

  std::shared_ptr<ServerContext> context_;
  std::shared_ptr<WsChannel> channel_;
  std::shared_ptr<OpenRequests> open_ = std::make_shared<OpenRequests>();
  WsFrameParser parser_;
  std::unique_ptr<KvStream> kv_;
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<WsHandler> make_ws_protocol(std::shared_ptr<ServerContext> context,
                                            std::shared_ptr<WsChannel> channel) {
  return std::make_unique<WsProtocol>(std::move(context), std::move(channel));
}

}  // namespace pagoda::net
