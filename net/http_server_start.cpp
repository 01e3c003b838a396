// HttpServer::start with the /v1/ws protocol of net/ws_protocol.hpp; kept in
// its own translation unit so that tests using the factory overload do not
// link the protocol.
#include "net/http_server.hpp"
#include "net/ws_protocol.hpp"

namespace pagoda::net {

Result<std::unique_ptr<HttpServer>> HttpServer::start(std::shared_ptr<ServerContext> context,
                                                      std::shared_ptr<HttpHandler> api) {
  WsHandlerFactory factory = [context](std::shared_ptr<WsChannel> channel) {
    return make_ws_protocol(context, std::move(channel));
  };
  return start(std::move(context), std::move(api), std::move(factory));
}

}  // namespace pagoda::net
