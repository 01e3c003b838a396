// SessionEnv: what every session of one HttpServer shares (immutable after
// start): the server context, the API handler, the WebSocket protocol factory
// and the connection registry.
#pragma once

#include <memory>

#include "net/connection_registry.hpp"
#include "net/http_exchange.hpp"
#include "net/http_server.hpp"
#include "net/server_context.hpp"

namespace pagoda::net {

struct SessionEnv {
  std::shared_ptr<ServerContext> context;
  std::shared_ptr<HttpHandler> api;
  WsHandlerFactory ws_factory;
  std::shared_ptr<ConnectionRegistry> registry;
};

}  // namespace pagoda::net
