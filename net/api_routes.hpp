// The HTTP API: OpenAI-compatible routes (/v1/completions,
// /v1/chat/completions, /v1/models) and the server's own (/tokenize,
// /detokenize, /health, /metrics). Implemented in openai_*.cpp,
// admin_routes.cpp and metrics_text.cpp.
//
// Auth is the transport's job (it checks the API key before calling handle()
// for every path except /health, /metrics and static files).
#pragma once

#include <memory>

#include "net/http_exchange.hpp"
#include "net/server_context.hpp"

namespace pagoda::net {

// Thread-safe: one handler serves every session.
std::shared_ptr<HttpHandler> make_api_routes(std::shared_ptr<ServerContext> context);

}  // namespace pagoda::net
