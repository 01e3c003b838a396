// HttpServer: the Beast listener. One port serves HTTP/1.1 (keep-alive) and
// upgrades /v1/ws to WebSocket. Runs `options.io_threads` Asio threads; each
// session has one strand and one write in flight, with a bounded outgoing
// queue (ServerOptions::max_queued_bytes: over it the session is closed and
// its requests cancelled). Checks the API key, the WebSocket Origin
// allow-list, max connections, body / frame sizes and timeouts, then hands
// API paths to the HttpHandler, /v1/ws to make_ws_protocol, and the rest to
// the static files of options.web_root.
//
// Over max_connections a connection is still accepted, its first request is
// read and answered 503 (OpenAI error JSON, Connection: close); while
// max(max_connections, 64) such refused connections are already open, a new
// one is closed without an answer. Session
// details: net/http_session.hpp (HTTP, SSE, timeouts), net/ws_session.hpp.
#pragma once

#include <functional>
#include <memory>

#include "gpu/result.hpp"
#include "net/http_exchange.hpp"
#include "net/server_context.hpp"
#include "net/ws_channel.hpp"

namespace pagoda::net {

// Makes the handler of one accepted /v1/ws connection (called on its strand).
using WsHandlerFactory = std::function<std::unique_ptr<WsHandler>(std::shared_ptr<WsChannel>)>;

class HttpServer {
 public:
  // Binds and starts listening (port 0: an ephemeral port, see port()).
  // Errors: the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> start(std::shared_ptr<ServerContext> context,
                                                   std::shared_ptr<HttpHandler> api);
  // The same with another WebSocket protocol (tests); start() above uses
  // make_ws_protocol (net/http_server_start.cpp).
  static Result<std::unique_ptr<HttpServer>> start(std::shared_ptr<ServerContext> context,
                                                   std::shared_ptr<HttpHandler> api,
                                                   WsHandlerFactory ws_factory);
  ~HttpServer();  // stop() then join the I/O threads
  uint16_t port() const;
  // Closes the listener (new connections are refused); sessions go on.
  // Idempotent; any thread.
  void stop_accepting();
  // Graceful stop: stops accepting, lets queued frames flush (bounded wait),
  // closes every session (their on_close / on_closed run), joins the threads.
  // Call after the engine has been shut down so final frames are queued.
  // Idempotent; safe from any thread except an I/O thread of this server.
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::net
