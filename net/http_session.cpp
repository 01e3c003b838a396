#include "net/http_session.hpp"

#include <boost/beast/websocket/rfc6455.hpp>

#include <algorithm>
#include <cctype>

#include "net/access_control.hpp"
#include "net/http_errors.hpp"
#include "net/http_target.hpp"
#include "net/request_policy.hpp"
#include "net/session_responder.hpp"
#include "net/static_files.hpp"
#include "net/ws_session.hpp"

namespace pagoda::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using error_code = boost::system::error_code;

constexpr std::chrono::seconds kLinger{2};  // drain after an error answer, then close

template <class Fields>
HeaderList raw_fields(const Fields& fields) {
  HeaderList out;
  for (const auto& f : fields) out.emplace_back(std::string(f.name_string()), std::string(f.value()));
  return out;
}

std::string peer_address(const boost::asio::ip::tcp::socket& socket) {
  error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  return ec ? std::string() : endpoint.address().to_string();
}

}  // namespace

HttpSession::HttpSession(Socket socket, std::shared_ptr<const SessionEnv> env, ConnectionSlot slot,
                         bool reject)
    : socket_(std::move(socket)), env_(std::move(env)), slot_(std::move(slot)), reject_(reject),
      timer_(socket_.get_executor()), client_(peer_address(socket_)) {}

HttpSession::~HttpSession() {
  // Normally close_now() fired it; this covers an io_context destroyed with
  // the session's handlers still queued.
  if (current_) current_->fire_close();
}

void HttpSession::start() {
  slot_.attach(weak_from_this());
  asio::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    self->last_activity_ = Clock::now();
    self->update_deadline();
    self->do_read();
  });
}

void HttpSession::graceful_stop() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->dead_) return;
    self->stopping_ = true;
    if (!self->current_) {
      self->close_after_flush_ = true;
      self->maybe_write();
    }
  });
}

void HttpSession::force_close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->close_now(); });
}

// ---- reading -------------------------------------------------------------

void HttpSession::do_read() {
  if (reading_ || dead_ || upgrade_) return;
  if (current_ && buffer_.size() >= kPipelineBytes) return;  // resumes at end_exchange
  const size_t room = std::min(kReadChunk, buffer_.max_size() - buffer_.size());
  if (room == 0) return;  // not reached: parse() refuses more than kMaxUnparsed
  reading_ = true;
  socket_.async_read_some(buffer_.prepare(room),
                          [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); });
}

void HttpSession::on_read(error_code ec, size_t n) {
  reading_ = false;
  if (dead_) return;
  if (upgrade_) return maybe_write();  // the read was cancelled for the hand-off
  if (ec) {
    // The peer is gone (EOF, reset) or the socket failed. A response still
    // being produced is cancelled; an answer already queued is flushed.
    if (current_ || lingering_ || parser_ || !writing_) return close_now();
    close_after_flush_ = true;
    return;
  }
  buffer_.commit(n);
  last_activity_ = Clock::now();
  if (lingering_) {
    buffer_.consume(buffer_.size());
  } else if (!current_) {
    parse();
  }
  update_deadline();
  do_read();
}

void HttpSession::parse() {
  while (!current_ && !dead_ && !close_after_flush_ && !upgrade_ && buffer_.size() > 0) {
    if (!parser_) {
      parser_.emplace();
      parser_->body_limit(env_->context->options.max_body_bytes);
      parser_->header_limit(std::uint32_t(kHeaderLimit));
      parser_->eager(true);
      request_started_ = Clock::now();
      continue_sent_ = false;
      header_checked_ = false;
    }
    error_code ec;
    const size_t used = parser_->put(buffer_.data(), ec);
    buffer_.consume(used);
    if (ec && ec != http::error::need_more) return on_parse_error(ec);
    if (parser_->is_header_done() && !header_checked_) {
      header_checked_ = true;
      if (auto r = framing_refusal(raw_fields(parser_->get()))) return refuse(r->status, r->message, r->code);
    }
    if (parser_->is_done()) {
      dispatch();
      continue;
    }
    if (parser_->is_header_done() && !continue_sent_) {
      continue_sent_ = true;
      auto expect = parser_->get().find(http::field::expect);
      if (expect != parser_->get().end() && lower(std::string_view(expect->value())) == "100-continue") {
        queue_.push_back(std::make_shared<const std::string>("HTTP/1.1 100 Continue\r\n\r\n"));
        queued_bytes_ += queue_.back()->size();
        maybe_write();
      }
    }
    if (ec || used == 0) break;  // need more bytes
  }
  if (parser_ && !current_ && !dead_ && buffer_.size() > kMaxUnparsed) {
    refuse(431, "a header block, chunk-size line or trailer section exceeds " + std::to_string(kMaxUnparsed) +
                    " bytes", "header_too_large");
  }
}

void HttpSession::refuse(int status, std::string_view message, std::string_view code) {
  parser_.reset();
  env_->context->requests_rejected.fetch_add(1);
  current_ = std::make_shared<SessionResponder>(weak_from_this(), false, false);
  answer(status, message, code);
}

void HttpSession::on_parse_error(error_code ec) {
  if (ec == http::error::body_limit) {
    refuse(413, "request body exceeds " + std::to_string(env_->context->options.max_body_bytes) + " bytes",
           "body_too_large");
  } else if (ec == http::error::header_limit) {
    refuse(431, "the header block exceeds " + std::to_string(kHeaderLimit) + " bytes", "header_too_large");
  } else {
    refuse(400, "malformed HTTP request: " + ec.message(), "bad_request");
  }
}

// ---- routing -------------------------------------------------------------

void HttpSession::dispatch() {
  Request req = parser_->release();
  parser_.reset();
  env_->context->http_requests.fetch_add(1);
  const bool keep_alive = req.keep_alive() && !stopping_ && !reject_;
  current_ = std::make_shared<SessionResponder>(weak_from_this(), keep_alive, req.method() == http::verb::head);
  update_deadline();
  if (reject_) {
    return answer(503, "the server is at its connection limit (max_connections); try again later",
                  "too_many_connections");
  }
  std::optional<Target> target = parse_target(req.target());
  if (!target) return answer(400, "malformed request target", "bad_request");
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.path = std::move(target->path);
  request.query = std::move(target->query);
  request.client = client_;
  for (const auto& field : req) {
    std::string& slot = request.headers[lower(std::string_view(field.name_string()))];
    slot = slot.empty() ? std::string(field.value()) : slot + ", " + std::string(field.value());
  }
  const ServerOptions& options = env_->context->options;
  if (auto r = admission_refusal(request, options)) {
    env_->context->requests_rejected.fetch_add(1);
    return answer(r->status, r->message, r->code);
  }
  if (request.method == "OPTIONS") {
    return current_->respond(204, "text/plain", "", preflight_headers(request, options));
  }
  current_->add_headers(cors_headers(request, options));
  if (request.path == "/v1/ws") {
    if (!boost::beast::websocket::is_upgrade(req)) {
      return answer(426, "/v1/ws is a WebSocket endpoint: send an Upgrade: websocket request",
                    "upgrade_required");
    }
    try_upgrade(req, request);
    return;
  }
  request.body = std::move(req.body());
  route(request);
}

void HttpSession::route(HttpRequest& request) {
  const ServerContext& ctx = *env_->context;
  const bool authorized =
      is_public_path(request.path, ctx.options.public_metrics) || bearer_authorized(request.headers, ctx.options.api_key);
  if (authorized) {
    bool handled = false;
    try {
      handled = env_->api->handle(request, current_);
    } catch (const std::exception& e) {
      // A handler bug must not take the server down; answer 500 if nothing was sent.
      current_->respond(500, "application/json", error_body(500, e.what(), "internal_error"));
      return;
    }
    if (handled) return;
  }
  if (std::optional<StaticFile> file = load_static_file(ctx.options.web_root, request.method, request.path)) {
    current_->respond(200, file->content_type, std::move(file->body), std::move(file->headers));
    return;
  }
  if (!authorized) {
    env_->context->requests_rejected.fetch_add(1);
    return answer(401, "missing or invalid API key (use Authorization: Bearer KEY)", "invalid_api_key");
  }
  answer(404, "no route for " + request.method + " " + request.path, "not_found");
}

bool HttpSession::try_upgrade(Request& req, const HttpRequest& request) {
  const ServerOptions& options = env_->context->options;
  auto header = [&](const char* name) {
    auto it = request.headers.find(name);
    return it == request.headers.end() ? std::string_view() : std::string_view(it->second);
  };
  if (!origin_allowed(header("origin"), header("host"), options.allowed_origins)) {
    env_->context->requests_rejected.fetch_add(1);
    answer(403, "WebSocket Origin not allowed", "origin_not_allowed");
    return false;
  }
  WsAuth auth = ws_authorize(options.api_key, header("sec-websocket-protocol"), request.query);
  if (!auth.ok) {
    env_->context->requests_rejected.fetch_add(1);
    answer(401, "missing or invalid API key (use the subprotocol bearer.KEY or ?api_key=KEY)",
           "invalid_api_key");
    return false;
  }
  current_.reset();
  ws_subprotocol_ = std::move(auth.subprotocol);
  upgrade_.emplace(std::move(req));
  maybe_write();  // hands off once earlier responses are flushed
  return true;
}

void HttpSession::answer(int status, std::string_view message, std::string_view code) {
  current_->respond(status, "application/json", error_body(status, message, code));
}

// ---- writing -------------------------------------------------------------

bool HttpSession::offer(const SessionResponder* owner, std::string bytes, bool ends, bool bounded) {
  if (closed_.load()) return false;
  const size_t n = bytes.size();
  const size_t total = queued_bytes_.fetch_add(n) + n;
  if (bounded && total > env_->context->options.max_queued_bytes) {
    queued_bytes_.fetch_sub(n);
    force_close();  // slow consumer
    return false;
  }
  asio::post(socket_.get_executor(),
             [self = shared_from_this(), owner, b = std::make_shared<const std::string>(std::move(bytes)), ends] {
               self->on_offer(owner, b, ends);
             });
  return true;
}

void HttpSession::on_offer(const SessionResponder* owner, std::shared_ptr<const std::string> bytes, bool ends) {
  if (dead_ || owner != current_.get()) {
    queued_bytes_.fetch_sub(bytes->size());
    return;
  }
  queue_.push_back(std::move(bytes));
  if (ends) end_exchange();
  maybe_write();
}

void HttpSession::end_exchange() {
  if (!current_->keep_alive() || stopping_) close_after_flush_ = true;
  current_.reset();
  if (!close_after_flush_) parse();  // a pipelined request may be waiting
  update_deadline();
  do_read();
}

void HttpSession::maybe_write() {
  if (writing_ || dead_) return;
  if (queue_.empty()) {
    if (upgrade_) {
      // Bytes a client sends before the 101 answer are not carried over.
      if (reading_) {
        error_code ignored;
        socket_.cancel(ignored);
        return;
      }
      return handoff();
    }
    if (close_after_flush_ && !current_) begin_linger();
    update_deadline();
    return;
  }
  writing_ = true;
  write_started_ = Clock::now();
  update_deadline();
  asio::async_write(socket_, asio::buffer(*queue_.front()),
                    [self = shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
}

void HttpSession::on_write(error_code ec) {
  // The in-flight buffer is never freed before this point (close_now keeps
  // the queue while writing_), see caf-beast-notes.md §7.
  writing_ = false;
  queued_bytes_.fetch_sub(queue_.front()->size());
  queue_.pop_front();
  if (dead_) {
    for (const auto& b : queue_) queued_bytes_.fetch_sub(b->size());
    queue_.clear();
    return;
  }
  if (ec) return close_now();
  last_activity_ = Clock::now();
  maybe_write();
}

// ---- endings -------------------------------------------------------------

void HttpSession::begin_linger() {
  if (lingering_ || dead_) return;
  if (stopping_) return close_now();
  // Half-close, then read and discard until the peer closes (at most kLinger),
  // so that unread request bytes do not turn our close into a reset that
  // would destroy the answer before the client reads it.
  lingering_ = true;
  error_code ignored;
  socket_.shutdown(Socket::shutdown_send, ignored);
  buffer_.consume(buffer_.size());
  arm(Clock::now() + kLinger);
  do_read();
}

void HttpSession::handoff() {
  dead_ = true;  // this HTTP session is done; the socket lives on
  closed_ = true;
  timer_.cancel();
  auto ws = std::make_shared<WsSession>(std::move(socket_), env_, std::move(slot_));
  ws->start(std::move(*upgrade_), std::move(ws_subprotocol_));
  upgrade_.reset();
}

void HttpSession::close_now() {
  if (dead_) return;
  dead_ = true;
  closed_ = true;
  timer_.cancel();
  error_code ignored;
  socket_.shutdown(Socket::shutdown_both, ignored);
  socket_.close(ignored);
  if (!writing_) {
    for (const auto& b : queue_) queued_bytes_.fetch_sub(b->size());
    queue_.clear();
  }
  if (auto pending = std::move(current_)) pending->fire_close();
}

// ---- timeouts ------------------------------------------------------------

void HttpSession::update_deadline() {
  if (dead_ || lingering_) return;
  const ServerOptions& o = env_->context->options;
  if (writing_) arm(write_started_ + o.idle_timeout);
  else if (parser_) arm(request_started_ + o.header_timeout);
  else if (current_ || upgrade_) arm(Clock::time_point::max());
  else arm(last_activity_ + o.idle_timeout);
}

void HttpSession::arm(Clock::time_point when) {
  if (when == armed_for_) return;
  armed_for_ = when;
  timer_.expires_at(when);
  if (when == Clock::time_point::max()) return;
  timer_.async_wait([self = shared_from_this()](error_code ec) { self->on_timer(ec); });
}

void HttpSession::on_timer(error_code ec) {
  if (ec == asio::error::operation_aborted || dead_) return;
  if (timer_.expiry() <= Clock::now()) close_now();
}

}  // namespace pagoda::net
