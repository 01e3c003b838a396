// The /v1/ws protocol (docs/protocol.md): JSON text frames parsed with
// simdjson, many requests multiplexed per socket by a client-chosen id.
#pragma once

#include <memory>

#include "net/server_context.hpp"
#include "net/ws_channel.hpp"

namespace pagoda::net {

// One handler per WebSocket connection, owned by its session; its methods
// run on the session strand.
std::unique_ptr<WsHandler> make_ws_protocol(std::shared_ptr<ServerContext> context,
                                            std::shared_ptr<WsChannel> channel);

}  // namespace pagoda::net
