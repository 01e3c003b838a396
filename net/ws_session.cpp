#include "net/ws_session.hpp"

namespace pagoda::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using error_code = boost::system::error_code;

// The handler's view of its session: weak, so a handler that outlives the
// socket (engine callbacks still arriving) only gets `false`.
class SessionChannel : public WsChannel {
 public:
  SessionChannel(std::weak_ptr<WsSession> session, std::string peer)
      : session_(std::move(session)), peer_(std::move(peer)) {}
  bool send_text(std::string frame) override {
    auto s = session_.lock();
    return s && s->offer(std::move(frame));
  }
  void close(uint16_t code, std::string reason) override {
    if (auto s = session_.lock()) s->request_close(code, std::move(reason));
  }
  size_t queued_bytes() const override {
    auto s = session_.lock();
    return s ? s->queued_bytes() : 0;
  }
  std::string peer() const override { return peer_; }

 private:
  std::weak_ptr<WsSession> session_;
  const std::string peer_;
};

}  // namespace

WsSession::WsSession(Socket socket, std::shared_ptr<const SessionEnv> env, ConnectionSlot slot)
    : ws_(std::move(socket)), env_(std::move(env)), slot_(std::move(slot)),
      kill_timer_(ws_.get_executor()) {}

WsSession::~WsSession() {
  // Normally finish() ran; this covers an io_context destroyed with handlers queued.
  if (handler_ && !ended_) handler_->on_closed();
}

void WsSession::start(Request request, std::string subprotocol) {
  slot_.attach(weak_from_this());
  const ServerOptions& options = env_->context->options;
  beast::get_lowest_layer(ws_).expires_never();  // the websocket stream has its own timeouts
  auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
  timeouts.idle_timeout = options.idle_timeout;
  ws_.set_option(timeouts);
  // The message limit is ours (on_read), not Beast's: Beast's own limit closes
  // the socket with the rest of the message unread, which resets the
  // connection and can destroy the 1009 close frame before the peer reads it.
  ws_.read_message_max(0);
  ws_.set_option(websocket::stream_base::decorator([sub = std::move(subprotocol)](websocket::response_type& res) {
    res.set(http::field::server, "pagoda");
    if (!sub.empty()) res.set(http::field::sec_websocket_protocol, sub);
  }));
  auto req = std::make_shared<Request>(std::move(request));
  ws_.async_accept(*req, [self = shared_from_this(), req](error_code ec) { self->on_accept(ec); });
}

void WsSession::graceful_stop() {
  asio::post(ws_.get_executor(), [self = shared_from_this()] {
    self->closing_ = true;
    self->start_close(uint16_t(websocket::close_code::going_away), "server shutting down", false);
  });
}

void WsSession::force_close() {
  asio::post(ws_.get_executor(), [self = shared_from_this()] { self->kill(); });
}

void WsSession::on_accept(error_code ec) {
  if (ec) return finish();
  accepted_ = true;
  error_code peer_ec;
  const auto endpoint = beast::get_lowest_layer(ws_).socket().remote_endpoint(peer_ec);
  handler_ = env_->ws_factory(
      std::make_shared<SessionChannel>(weak_from_this(), peer_ec ? std::string() : endpoint.address().to_string()));
  if (!handler_) return kill();
  do_read();
  maybe_write();
}

void WsSession::do_read() {
  reading_ = true;
  ws_.async_read_some(rbuf_, kReadChunk, [self = shared_from_this()](error_code ec, size_t) { self->on_read(ec); });
}

void WsSession::on_read(error_code ec) {
  reading_ = false;
  if (ended_) return;
  if (ec) return finish();
  if (rbuf_.size() > env_->context->options.max_frame_bytes) return reject_oversize();
  if (!ws_.is_message_done()) return do_read();
  if (ws_.got_text()) {
    const auto data = rbuf_.cdata();
    handler_->on_text(std::string_view(static_cast<const char*>(data.data()), data.size()));
  } else {
    handler_->on_binary(rbuf_.size());
  }
  rbuf_.consume(rbuf_.size());
  do_read();
}

bool WsSession::offer(std::string frame) {
  if (closing_.load()) return false;
  const size_t n = frame.size();
  const size_t total = queued_bytes_.fetch_add(n) + n;
  if (total > env_->context->options.max_queued_bytes) {
    queued_bytes_.fetch_sub(n);
    closing_ = true;
    asio::post(ws_.get_executor(), [self = shared_from_this()] {
      self->start_close(uint16_t(websocket::close_code::policy_error), "slow consumer: outgoing queue over limit",
                        true);
    });
    return false;
  }
  asio::post(ws_.get_executor(), [self = shared_from_this(), f = std::make_shared<const std::string>(std::move(frame))] {
    self->on_offer(f);
  });
  return true;
}

void WsSession::request_close(uint16_t code, std::string reason) {
  closing_ = true;
  asio::post(ws_.get_executor(), [self = shared_from_this(), code, r = std::move(reason)]() mutable {
    self->start_close(code, std::move(r), false);
  });
}

void WsSession::reject_oversize() {
  // No further reads: Beast's close drains the rest of the message, waits for
  // the peer's close and then shuts the socket down in order; the close's
  // completion (or kill_timer_) ends the session.
  rbuf_.consume(rbuf_.size());
  handler_->on_too_big();  // its error frame is posted before the close below
  request_close(uint16_t(websocket::close_code::too_big), "message over the frame limit");
}

void WsSession::on_offer(std::shared_ptr<const std::string> frame) {
  if (ended_ || close_sent_) {
    queued_bytes_.fetch_sub(frame->size());
    return;
  }
  queue_.push_back(std::move(frame));
  maybe_write();
}

void WsSession::maybe_write() {
  if (!accepted_ || writing_ || ended_ || close_sent_) return;
  if (queue_.empty()) {
    if (pending_close_) {
      close_sent_ = true;
      ws_.async_close(websocket::close_reason(websocket::close_code(pending_close_->first), pending_close_->second),
                      [self = shared_from_this()](error_code ec) {
                        if (ec) self->kill();  // else a pending read ends with `closed`
                        if (!self->reading_) self->finish();
                      });
    }
    return;
  }
  writing_ = true;
  ws_.text(true);
  ws_.async_write(asio::buffer(*queue_.front()),
                  [self = shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
}

void WsSession::on_write(error_code ec) {
  // The in-flight frame is popped only here (never freed while being written).
  writing_ = false;
  queued_bytes_.fetch_sub(queue_.front()->size());
  queue_.pop_front();
  if (ended_ || close_sent_) {
    for (const auto& f : queue_) queued_bytes_.fetch_sub(f->size());
    queue_.clear();
    return;
  }
  if (ec) return kill();
  maybe_write();
}

void WsSession::start_close(uint16_t code, std::string reason, bool drop_queue) {
  if (ended_ || pending_close_) return;
  if (reason.size() > 120) reason.resize(120);
  pending_close_.emplace(code, std::move(reason));
  if (drop_queue) {
    // Keep only the frame being written (its buffer is in use).
    while (queue_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_.fetch_sub(queue_.back()->size());
      queue_.pop_back();
    }
  }
  kill_timer_.expires_after(kCloseGrace);
  kill_timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec) self->kill();
  });
  if (!accepted_) return kill();
  maybe_write();
}

void WsSession::kill() {
  error_code ignored;
  beast::get_lowest_layer(ws_).socket().shutdown(Socket::shutdown_both, ignored);
  beast::get_lowest_layer(ws_).close();
}

void WsSession::finish() {
  if (ended_) return;
  ended_ = true;
  closing_ = true;
  kill_timer_.cancel();
  if (!writing_) {
    for (const auto& f : queue_) queued_bytes_.fetch_sub(f->size());
    queue_.clear();
  }
  kill();
  if (handler_) handler_->on_closed();
}

}  // namespace pagoda::net
