// The contract between the WebSocket transport (net/ws_session.*, Beast) and
// the /v1/ws protocol (net/ws_protocol.*).
//
// Threading: WsHandler methods are called on the session's strand, one at a
// time. WsChannel may be used from any thread; it posts onto the strand.
//
// Ownership: the session owns the handler (unique_ptr) and the socket; the
// channel refers to the session weakly. on_closed() is called exactly once,
// when the socket ends for any reason (peer close, error, timeout, slow
// consumer, shutdown); the handler then cancels every request it started.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace pagoda::net {

class WsChannel {
 public:
  virtual ~WsChannel() = default;
  // Queues one text frame. Returns false when the socket is closed or the
  // outgoing queue is over the limit (the session then closes with 1008 and
  // calls on_closed()).
  virtual bool send_text(std::string frame) = 0;
  // Closes the socket with `code` (RFC 6455) and a short reason.
  virtual void close(uint16_t code, std::string reason) = 0;
  // Bytes queued and not yet written (for rate-limiting the `kv` stream).
  virtual size_t queued_bytes() const = 0;
  // The peer's address (per-client request limits); empty when unknown.
  virtual std::string peer() const { return {}; }
};

class WsHandler {
 public:
  virtual ~WsHandler() = default;
  virtual void on_text(std::string_view frame) = 0;
  // A binary frame: the protocol answers an error frame (not a close).
  virtual void on_binary(size_t size) = 0;
  // The transport rejected an oversize message (it closes with 1009 after).
  virtual void on_too_big() = 0;
  virtual void on_closed() = 0;
};

}  // namespace pagoda::net
