// ServerContext: what every part of the front end shares for one `pagoda
// serve` process: the engine, the options, and the live counters that limits
// and /metrics read. Created by cli_serve before the listener starts and kept
// alive (shared_ptr) by every session. Thread-safe: options are immutable
// after start; counters are atomics; the engine is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/engine.hpp"
#include "net/client_limits.hpp"

namespace pagoda::net {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string api_key;                       // empty: no auth
  std::vector<std::string> allowed_origins;  // empty: same host as the server only
  std::vector<std::string> allowed_hosts;    // Host names served besides localhost, IP literals, `host`
  bool public_metrics = false;               // /metrics without the API key
  std::string web_root;                      // static files served at /
  std::string served_model_name;             // /v1/models id; empty: engine.model_name()
  std::string tool_call_parser;              // tool-call format (net/tool_format.hpp); empty: detected
  size_t io_threads = 2;
  size_t max_body_bytes = size_t(1) << 20;   // HTTP request body
  size_t max_frame_bytes = size_t(1) << 20;  // one WebSocket message
  int32_t max_prompt_tokens = 0;             // 0: the model's context - 1
  int32_t max_requests_per_connection = 16;  // in flight at once
  int32_t max_requests_per_client = 0;       // in flight at once per client address (0: no cap, the default)
  int32_t max_waiting = 256;                 // engine waiting groups at which new requests get 429 (0: no cap)
  size_t max_response_bytes = size_t(4) << 20;  // a non-streamed completion's body (about)
  int32_t max_connections = 256;
  size_t max_queued_bytes = size_t(8) << 20;  // per session's outgoing queue
  std::chrono::seconds idle_timeout{300};     // no bytes either way on keep-alive / WS
  std::chrono::seconds header_timeout{30};    // half-open / slow request headers
  std::chrono::milliseconds kv_interval{250};  // min period of `kv` snapshot frames
};

struct ServerContext {
  std::shared_ptr<actors::EngineClient> engine;
  ServerOptions options;
  std::atomic<bool> ready{false};          // /health: 503 until the engine is up
  std::atomic<bool> shutting_down{false};  // SIGINT/SIGTERM seen: finish_reason "shutdown"
  std::atomic<int32_t> connections{0};
  std::atomic<uint64_t> http_requests{0};
  std::atomic<uint64_t> requests_rejected{0};  // limit / auth / validation errors
  std::shared_ptr<ClientLimits> clients = std::make_shared<ClientLimits>();  // in-flight per client address

  // The max prompt length in tokens after defaults.
  int32_t prompt_token_limit() const {
    const int32_t ctx = engine ? engine->max_model_len() - 1 : 0;
    return options.max_prompt_tokens > 0 ? std::min(options.max_prompt_tokens, ctx) : ctx;
  }
  std::string model_id() const {
    return !options.served_model_name.empty() ? options.served_model_name
                                              : (engine ? engine->model_name() : std::string());
  }
};

}  // namespace pagoda::net
