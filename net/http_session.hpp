// HttpSession: one HTTP/1.1 connection (Beast parser, raw Asio socket).
//
// Reading: one async_read_some is kept pending whenever possible and bytes go
// into a buffer fed to a request_parser (body_limit = max_body_bytes; over it
// 413 and close). The buffer is bounded at every parser state: body bytes are
// consumed as they come (eager), and what the parser cannot consume yet (a
// partial header block, chunk-size line or trailer section) may be at most
// kMaxUnparsed bytes, else 431 and close (Beast 1.81 bounds only the header
// block, header_limit); the buffer itself never exceeds kMaxBuffered.
// Framing: Transfer-Encoding other than exactly `chunked`, or with
// Content-Length, is a 400 and close (request_policy.hpp: smuggling). While a response is pending the next request is NOT parsed
// (pipelined bytes wait in the buffer, at most kPipelineBytes, after which
// reading pauses), but the read stays pending so that a peer closing
// mid-response (EOF or reset) is noticed at once: the session closes and the
// response's on_close callbacks run (disconnect = cancel).
//
// Writing: every byte goes through one queue of serialized strings, touched
// only on the strand, with at most one async_write in flight. Bytes queued but
// not written are counted (atomic); an SSE event that would push the count
// over max_queued_bytes closes the connection (slow consumer).
//
// Timeouts (one steady_timer): idle keep-alive connections close after
// idle_timeout; a request must arrive completely within header_timeout of
// its first byte (slow-loris safe); a write that makes no progress for
// idle_timeout closes the connection; while waiting for the handler (engine)
// no timeout applies.
//
// Routing (on the strand): first the admission rules (Host, Origin,
// Content-Type: request_policy.hpp), the CORS headers set on the responder,
// OPTIONS answered as a preflight; /v1/ws upgrades (API key) hand the socket
// to a WsSession; other paths need the API key unless public (/health,
// /metrics with --public-metrics) or a static file; then api->handle(),
// static files, 404.
//
// A session over max_connections (`reject`) answers its first request 503
// and closes. Thread-safety: public methods may be called from any thread.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "net/connection_registry.hpp"
#include "net/session_env.hpp"

namespace pagoda::net {

class SessionResponder;

class HttpSession : public Connection, public std::enable_shared_from_this<HttpSession> {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  static constexpr size_t kPipelineBytes = 64 * 1024;
  static constexpr size_t kReadChunk = 16 * 1024;
  static constexpr size_t kHeaderLimit = 16 * 1024;  // the header block
  static constexpr size_t kMaxUnparsed = 32 * 1024;  // bytes the parser holds back
  static constexpr size_t kMaxBuffered = kPipelineBytes + kReadChunk;

  HttpSession(Socket socket, std::shared_ptr<const SessionEnv> env, ConnectionSlot slot, bool reject);
  ~HttpSession() override;
  void start();
  void graceful_stop() override;
  void force_close() override;

  // For SessionResponder (any thread): queues serialized bytes of response
  // `owner`; `ends` marks the response's last bytes; `bounded` applies the
  // max_queued_bytes limit (SSE events). Returns false when the connection is
  // closed or over the limit (then it is being closed).
  bool offer(const SessionResponder* owner, std::string bytes, bool ends, bool bounded);
  bool is_closed() const { return closed_.load(); }

 private:
  using Clock = std::chrono::steady_clock;
  using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  void do_read();
  void on_read(boost::system::error_code ec, size_t n);
  void parse();
  void on_parse_error(boost::system::error_code ec);
  void refuse(int status, std::string_view message, std::string_view code);
  void dispatch();
  void route(HttpRequest& request);
  bool try_upgrade(Request& req, const HttpRequest& request);
  void answer(int status, std::string_view message, std::string_view code);
  void on_offer(const SessionResponder* owner, std::shared_ptr<const std::string> bytes, bool ends);
  void end_exchange();
  void maybe_write();
  void on_write(boost::system::error_code ec);
  void begin_linger();
  void handoff();
  void close_now();
  void update_deadline();
  void arm(Clock::time_point when);
  void on_timer(boost::system::error_code ec);

  Socket socket_;
  std::shared_ptr<const SessionEnv> env_;
  ConnectionSlot slot_;
  const bool reject_;
  boost::asio::steady_timer timer_;
  std::string client_;  // the peer's address
  boost::beast::flat_buffer buffer_{kMaxBuffered};
  std::optional<Parser> parser_;
  std::shared_ptr<SessionResponder> current_;  // the pending response, if any
  std::optional<Request> upgrade_;             // waiting for the queue to drain
  std::string ws_subprotocol_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  std::atomic<size_t> queued_bytes_{0};
  std::atomic<bool> closed_{false};
  // Strand-only state.
  bool reading_ = false, writing_ = false, dead_ = false, stopping_ = false;
  bool close_after_flush_ = false, lingering_ = false, continue_sent_ = false, header_checked_ = false;
  Clock::time_point request_started_, write_started_, last_activity_, armed_for_;
};

}  // namespace pagoda::net
