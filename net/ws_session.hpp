// WsSession: one WebSocket connection on /v1/ws, taken over from an
// HttpSession after the upgrade checks (Origin, API key) passed.
//
// Accepts with timeout::suggested(server) (idle_timeout from the options,
// keep-alive pings) and reads each message in chunks of kReadChunk; a message
// over max_frame_bytes gets handler->on_too_big(), its error frame, and a close
// with 1009 after which the rest of the message is drained (never a reset that
// could lose the close frame). Echoes the chosen
// subprotocol (bearer.KEY). Text frames go to handler->on_text, binary ones to
// handler->on_binary. The handler's WsChannel queues frames on the strand with
// one write in flight; queued bytes over max_queued_bytes close the socket
// with 1008 (slow consumer). on_closed() runs exactly once, when the read loop
// ends for any reason. A close that cannot be sent within kCloseGrace (peer
// not reading) closes the TCP socket. Thread-safety: public methods may be
// called from any thread (they post onto the strand).
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "net/connection_registry.hpp"
#include "net/session_env.hpp"

namespace pagoda::net {

class WsSession : public Connection, public std::enable_shared_from_this<WsSession> {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  static constexpr std::chrono::seconds kCloseGrace{2};
  static constexpr size_t kReadChunk = 64 * 1024;  // bytes appended to rbuf_ per read

  WsSession(Socket socket, std::shared_ptr<const SessionEnv> env, ConnectionSlot slot);
  ~WsSession() override;
  // Answers the upgrade `request` (101) and starts reading.
  void start(Request request, std::string subprotocol);
  void graceful_stop() override;
  void force_close() override;

  // For the channel (any thread).
  bool offer(std::string frame);
  void request_close(uint16_t code, std::string reason);
  size_t queued_bytes() const { return queued_bytes_.load(); }

 private:
  void on_accept(boost::system::error_code ec);
  void do_read();
  void on_read(boost::system::error_code ec);
  void reject_oversize();
  void on_offer(std::shared_ptr<const std::string> frame);
  void maybe_write();
  void on_write(boost::system::error_code ec);
  void start_close(uint16_t code, std::string reason, bool drop_queue);
  void kill();
  void finish();

  boost::beast::websocket::stream<boost::beast::tcp_stream> ws_;
  std::shared_ptr<const SessionEnv> env_;
  ConnectionSlot slot_;
  boost::asio::steady_timer kill_timer_;
  boost::beast::flat_buffer rbuf_;
  std::unique_ptr<WsHandler> handler_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  std::atomic<size_t> queued_bytes_{0};
  std::atomic<bool> closing_{false};  // no more frames accepted
  // Strand-only state.
  bool accepted_ = false, writing_ = false, reading_ = false, close_sent_ = false, ended_ = false;
  std::optional<std::pair<uint16_t, std::string>> pending_close_;
};

}  // namespace pagoda::net
