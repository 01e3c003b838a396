// HttpServer: the Beast listener. One port serves HTTP/1.1 (keep-alive) and
// upgrades /v1/ws to WebSocket. Runs `options.io_threads` Asio threads; each
// session has one strand and one write in flight, with a bounded outgoing
// queue (ServerOptions::max_queued_bytes: over it the session is closed and
// its requests cancelled). Checks the API key, the WebSocket Origin
// allow-list, max connections, body / frame sizes and timeouts, then hands
// API paths to the HttpHandler, /v1/ws to make_ws_protocol, and the rest to
// the static files of options.web_root.
#pragma once

#include <memory>

#include "gpu/result.hpp"
#include "net/http_exchange.hpp"
#include "net/server_context.hpp"

namespace pagoda::net {

class HttpServer {
 public:
  // Binds and starts listening (port 0: an ephemeral port, see port()).
  // Errors: the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> start(std::shared_ptr<ServerContext> context,
                                                   std::shared_ptr<HttpHandler> api);
  ~HttpServer();  // stop() then join the I/O threads
  uint16_t port() const;
  // Graceful stop: stops accepting, lets queued frames flush (bounded wait),
  // closes every session (their on_close / on_closed run), joins the threads.
  // Call after the engine has been shut down so final frames are queued.
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::net
