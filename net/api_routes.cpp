// The HTTP API routes (net/api_routes.hpp):
//   POST /v1/completions, POST /v1/chat/completions   (openai_request/response, completion_stream;
//                                                      chat tools: tool_request, tool_prompt)
//   GET  /v1/models, GET /v1/models/{id}
//   POST /tokenize   {prompt | messages, add_special_tokens?, model?} -> {count, max_model_len, tokens}
//   POST /detokenize {tokens, model?} -> {prompt}
//   GET  /health     200 {"status":"serving", restarts} when ready, 503 while loading,
//                    shutting down, recovering from a lost actor, or failed
//   GET  /metrics    Prometheus text (metrics_text)
// A known path with another method is a 405 with an Allow header. Every
// 4xx this handler answers counts in ServerContext::requests_rejected (the
// transport counts http_requests).
//
// One HTTP request is one engine request; the transport serves one request
// at a time per connection, so per-connection in-flight limits need nothing
// here. Per client address (ServerOptions::max_requests_per_client) a 429
// too_many_requests, and while the engine's waiting queue holds max_waiting
// groups a 429 overloaded (Retry-After: 1). Disconnect = cancel: the route registers Responder::on_close to
// cancel the engine request (CompletionStream also refuses tokens once the
// responder is closed).
#include "net/api_routes.hpp"

#include <simdjson.h>

#include <chrono>
#include <initializer_list>

#include "net/completion_stream.hpp"
#include "net/json_writer.hpp"
#include "net/metrics_text.hpp"
#include "net/openai_request.hpp"
#include "net/openai_response.hpp"
#include "net/tool_prompt.hpp"

namespace pagoda::net {
namespace {

constexpr const char* kJson = "application/json";

class ApiRoutes : public HttpHandler {
 public:
  explicit ApiRoutes(std::shared_ptr<ServerContext> context)
      : context_(std::move(context)),
        created_(std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count()) {}

  bool handle(const HttpRequest& request, std::shared_ptr<Responder> responder) override {
    const std::string& path = request.path;
    if (path == "/v1/completions" || path == "/v1/chat/completions") {
      if (!allow(request, *responder, {"POST"})) return true;
      generate(path == "/v1/completions" ? ApiKind::completion : ApiKind::chat, request, std::move(responder));
    } else if (path == "/v1/models" || path.rfind("/v1/models/", 0) == 0) {
      if (allow(request, *responder, {"GET"})) models(path, *responder);
    } else if (path == "/tokenize") {
      if (allow(request, *responder, {"POST"})) tokenize(request.body, *responder);
    } else if (path == "/detokenize") {
      if (allow(request, *responder, {"POST"})) detokenize(request.body, *responder);
    } else if (path == "/health") {
      if (allow(request, *responder, {"GET", "HEAD"})) health(*responder);
    } else if (path == "/metrics") {
      if (allow(request, *responder, {"GET", "HEAD"})) metrics(*responder);
    } else {
      return false;
    }
    return true;
  }

 private:
  void fail(Responder& responder, const ApiError& error) {
    if (error.status < 500) context_->requests_rejected.fetch_add(1, std::memory_order_relaxed);
    responder.respond(error.status, kJson, error_json(error));
  }

  bool allow(const HttpRequest& request, Responder& responder, std::initializer_list<const char*> methods) {
    std::string allowed;
    for (const char* m : methods) {
      if (request.method == m) return true;
      allowed += allowed.empty() ? m : std::string(", ") + m;
    }
    context_->requests_rejected.fetch_add(1, std::memory_order_relaxed);
    ApiError error{405, "method " + request.method + " is not allowed on " + request.path + " (use " + allowed + ")",
                   {}, "method_not_allowed"};
    responder.respond(405, kJson, error_json(error), {{"Allow", allowed}});
    return false;
  }

  // Not ready (loading) or shutting down: the error to answer, else none.
  std::optional<ApiError> unavailable() const {
    if (context_->shutting_down.load()) return ApiError{503, "the server is shutting down", {}, "shutting_down"};
    if (!context_->ready.load() || !context_->engine) {
      return ApiError{503, "the model is still loading", {}, "not_ready"};
    }
    return std::nullopt;
  }

  // The engine's waiting queue is full: the 429 to answer, else none.
  std::optional<ApiError> overloaded() const {
    const int32_t max = context_->options.max_waiting;
    if (max <= 0 || context_->engine->stats().waiting < max) return std::nullopt;
    return ApiError{429, "the server's waiting queue is full; retry later", {}, "overloaded"};
  }

  void fail_429(Responder& responder, const ApiError& error) {
    context_->requests_rejected.fetch_add(1, std::memory_order_relaxed);
    responder.respond(429, kJson, error_json(error), {{"Retry-After", "1"}});
  }

  void generate(ApiKind kind, const HttpRequest& request, std::shared_ptr<Responder> responder) {
    if (auto e = unavailable()) return fail(*responder, *e);
    ParsedRequest parsed = parse_openai_request(kind, request.body, context_->model_id());
    if (parsed.error) return fail(*responder, *parsed.error);  // a bad body is a 400 even when busy
    if (auto e = overloaded()) return fail_429(*responder, *e);
    OpenAiRequest& req = parsed.request;
    ToolPlan tools;
    if (kind == ApiKind::chat) {
      if (auto e = prepare_tools(server_tool_info(*context_), req, tools)) return fail(*responder, *e);
    }
    if (auto e = resolve_prompt(*context_, req)) return fail(*responder, *e);
    StreamSettings settings;
    settings.stream = req.stream;
    settings.include_usage = req.include_usage;
    settings.logprobs = req.logprobs;
    settings.top_logprobs = req.top_logprobs;
    settings.n = req.generate.sampling.n;
    settings.beam = req.generate.sampling.beam_width > 0;
    settings.tools = tools;
    const int32_t per_client = context_->options.max_requests_per_client;
    ClientLimits::Ticket ticket = context_->clients->acquire(request.client, per_client);
    if (!ticket) {
      return fail_429(*responder, ApiError{429, "this client already has " + std::to_string(per_client) +
                                                    " requests in flight (max_requests_per_client)",
                                           {}, "too_many_requests"});
    }
    auto sink = std::make_shared<CompletionStream>(context_, responder, make_response_meta(kind, context_->model_id()),
                                                   settings);
    sink->hold(std::move(ticket));
    sink->begin();
    req.generate.sampling.client = fair_share_client(req.generate.sampling.client, request.client);
    actors::RequestHandle handle = context_->engine->submit(std::move(req.generate), sink);
    responder->on_close([handle]() mutable { handle.cancel(); });
  }

  void write_model(JsonWriter& w) const {
    w.begin_object();
    w.key("id").value(context_->model_id());
    w.key("object").value("model");
    w.key("created").value(created_);
    w.key("owned_by").value("pagoda");
    w.key("root").value(context_->model_id());
    w.key("parent").null();
    w.key("max_model_len").value(context_->engine ? context_->engine->max_model_len() : 0);
    w.end_object();
  }

  void models(const std::string& path, Responder& responder) {
    JsonWriter w;
    if (path == "/v1/models") {
      w.begin_object().key("object").value("list").key("data").begin_array();
      write_model(w);
      w.end_array().end_object();
      return responder.respond(200, kJson, w.take());
    }
    const std::string id = path.substr(std::string("/v1/models/").size());
    if (id != context_->model_id()) {
      return fail(responder, ApiError{404, "The model `" + id + "` does not exist.", "model", "model_not_found"});
    }
    write_model(w);
    responder.respond(200, kJson, w.take());
  }

  // Parses a small admin body: an object whose fields go to `field`
  // (returns an error for a bad or unknown one).
  template <class Fn>
  std::optional<ApiError> parse_object(const std::string& body, Fn&& field) const {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    if (auto err = parser.parse(body.data(), body.size()).get(root); err != simdjson::SUCCESS) {
      return bad_request(std::string("the body is not valid JSON: ") + simdjson::error_message(err));
    }
    simdjson::dom::object obj;
    if (root.get_object().get(obj) != simdjson::SUCCESS) return bad_request("the body must be a JSON object");
    for (auto f : obj) {
      if (f.key == "model") {
        std::string_view model;
        if (f.value.is_null()) continue;
        if (f.value.get_string().get(model) != simdjson::SUCCESS) return bad_request("model must be a string", "model");
        if (model != context_->model_id()) {
          return ApiError{404, "The model `" + std::string(model) + "` does not exist.", "model", "model_not_found"};
        }
        continue;
      }
      if (auto e = field(f.key, f.value)) return e;
    }
    return std::nullopt;
  }

  void tokenize(const std::string& body, Responder& responder) {
    if (auto e = unavailable()) return fail(responder, *e);
    actors::GenerateRequest req;
    bool add_special = true, have_input = false;
    auto e = parse_object(body, [&](std::string_view key, simdjson::dom::element v) -> std::optional<ApiError> {
      if (key == "prompt") {
        have_input = true;
        return read_prompt(v, req.prompt, req.prompt_ids);
      }
      if (key == "messages") {
        have_input = true;
        return read_messages(v, req.messages);
      }
      if (key == "add_special_tokens") {
        if (v.get_bool().get(add_special) == simdjson::SUCCESS) return std::nullopt;
        return bad_request("add_special_tokens must be a boolean", "add_special_tokens");
      }
      return bad_request("unknown field '" + std::string(key) + "'", std::string(key));
    });
    if (!e && !have_input) e = bad_request("prompt or messages is required", "prompt");
    if (e) return fail(responder, *e);
    if (!server_tool_info(*context_).native) rewrite_tool_messages(req.messages, {});
    auto ids = context_->engine->tokenize(req);
    if (!ids) return fail(responder, bad_request(ids.error().message, req.messages.empty() ? "prompt" : "messages"));
    if (!add_special && req.messages.empty() && req.prompt_ids.empty()) strip_added_prefix(*ids);
    JsonWriter w;
    w.begin_object().key("count").value(int64_t(ids->size()));
    w.key("max_model_len").value(context_->engine->max_model_len());
    w.key("tokens").begin_array();
    for (int32_t id : *ids) w.value(id);
    w.end_array().end_object();
    responder.respond(200, kJson, w.take());
  }

  // add_special_tokens=false on a text prompt: drops what the tokenizer
  // adds to every text (the ids of an empty prompt, e.g. a BOS token).
  void strip_added_prefix(std::vector<int32_t>& ids) const {
    auto added = context_->engine->tokenize(actors::GenerateRequest{});
    if (!added || added->empty() || added->size() > ids.size()) return;
    if (std::equal(added->begin(), added->end(), ids.begin())) ids.erase(ids.begin(), ids.begin() + added->size());
  }

  void detokenize(const std::string& body, Responder& responder) {
    if (auto e = unavailable()) return fail(responder, *e);
    std::vector<int32_t> ids;
    bool have_tokens = false;
    auto e = parse_object(body, [&](std::string_view key, simdjson::dom::element v) -> std::optional<ApiError> {
      if (key != "tokens") return bad_request("unknown field '" + std::string(key) + "'", std::string(key));
      have_tokens = true;
      simdjson::dom::array arr;
      if (v.get_array().get(arr) != simdjson::SUCCESS) {
        return bad_request("tokens must be an array of integers", "tokens");
      }
      for (simdjson::dom::element item : arr) {
        int64_t id = 0;
        if (item.get_int64().get(id) != simdjson::SUCCESS || id < INT32_MIN || id > INT32_MAX) {
          return bad_request("tokens must be an array of integers", "tokens");
        }
        ids.push_back(int32_t(id));
      }
      return std::nullopt;
    });
    if (!e && !have_tokens) e = bad_request("tokens is required", "tokens");
    if (e) return fail(responder, *e);
    auto text = context_->engine->detokenize(ids);
    if (!text) return fail(responder, bad_request(text.error().message, "tokens"));
    JsonWriter w;
    w.begin_object().key("prompt").value(*text).end_object();
    responder.respond(200, kJson, w.take());
  }

  // 200 while the engine serves; 503 while it loads, shuts down, replaces a
  // lost actor (recovering) or after a replacement failed (failed). The
  // body names the state and the actor restarts so far.
  void health(Responder& responder) {
    if (auto e = unavailable()) return responder.respond(503, kJson, error_json(*e));
    const actors::EngineHealth h = context_->engine->health();
    if (h.state != actors::EngineState::serving) {
      const std::string state = actors::engine_state_name(h.state);
      ApiError e{503, "the engine is " + state + (h.detail.empty() ? "" : ": " + h.detail), {},
                 "engine_" + state};
      return responder.respond(503, kJson, error_json(e));
    }
    JsonWriter w;
    w.begin_object()
        .key("status").value(actors::engine_state_name(h.state))
        .key("executor_restarts").value(h.executor_restarts)
        .key("block_manager_restarts").value(h.block_manager_restarts)
        .end_object();
    responder.respond(200, kJson, w.take());
  }

  void metrics(Responder& responder) {
    ServerCounters server;
    server.connections = context_->connections.load();
    server.http_requests = context_->http_requests.load();
    server.requests_rejected = context_->requests_rejected.load();
    const actors::EngineStats stats = context_->engine ? context_->engine->stats() : actors::EngineStats{};
    std::string text = metrics_text(stats, server, context_->model_id());
    if (context_->engine) text += engine_node_metrics_text(context_->engine->engine_nodes(), context_->model_id());
    responder.respond(200, std::string(kMetricsContentType), std::move(text));
  }

  std::shared_ptr<ServerContext> context_;
  int64_t created_;
};

}  // namespace

std::shared_ptr<HttpHandler> make_api_routes(std::shared_ptr<ServerContext> context) {
  return std::make_shared<ApiRoutes>(std::move(context));
}

}  // namespace pagoda::net
