// `pagoda serve MODEL`: the HTTP/WebSocket server on one port.
// `pagoda serve [MODEL] --engines HOST:PORT,...`: the same front end over
// remote engine nodes (actors/scale_out/remote_engine.hpp; MODEL gives the tokenizer,
// default: the first node's model path). `pagoda engine MODEL --listen
// HOST:PORT`: an engine node (actors/scale_out/engine_node.hpp), with the same server
// on --port for its own /health and /metrics. docs/scaling.md.
//
// Start-up order: the listener starts first with ServerContext::ready false
// (so /health answers 503 while the model loads), then the engine; only when
// ctx->engine is set is `ready` published (release store; handlers load it
// with acquire before touching the engine). Then one line
// `pagoda: serving MODEL on http://HOST:PORT` goes to stdout (flushed; with
// --port 0 it names the real port): clients may wait for it.
//
// Shutdown on SIGINT/SIGTERM: the signals are blocked in every thread (the
// mask is set before any thread starts) and the main thread waits for them
// with sigwait. Then: shutting_down = true, stop accepting, engine->shutdown()
// (every open request ends with finish_reason "shutdown"), server->stop()
// (flushes, bounded, and closes sessions), exit code 0.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "actors/engine.hpp"
#include "actors/scale_out/engine_node.hpp"
#include "actors/scale_out/remote_engine.hpp"
#include "gpu/cpu/host_memory.hpp"
#include "gpu/device.hpp"
#include "net/api_routes.hpp"
#include "net/cli.hpp"
#include "net/http_server.hpp"
#include "net/tool_format.hpp"

namespace pagoda::net {
namespace {

struct ServeArgs {
  EngineRuntimeArgs runtime;
  std::string model, precision = "quantized", backend = "auto";
  std::string load_format = "auto", dummy_dtype = "auto";
  ServerOptions server;
  uint64_t kv_cache_memory = 0;  // 0: gpu::cpu::kv_cache_budget decides
  int max_num_seqs = 64, max_num_batched_tokens = 512, max_model_len = 0;
  int idle_timeout_s = 300, header_timeout_s = 30;
  std::string engines;  // serve: remote engine nodes instead of an in-process engine
  std::string listen;   // engine: where the node's entry actor is published
  actors::RouterConfig router;
  std::string scheduling_policy = "fair";
  double fair_prompt_weight = 1.0, fair_output_weight = 2.0;
  bool no_urgent_prefill = false;
  std::vector<std::string> client_weights;  // CLIENT=WEIGHT
};

// --client-weight CLIENT=WEIGHT entries into the fair policy's shares.
Result<void> parse_client_weights(const std::vector<std::string>& entries, actors::FairShareConfig& c) {
  for (const std::string& e : entries) {
    const size_t eq = e.rfind('=');
    double w = 0.0;
    if (eq == std::string::npos || eq == 0) {
      return make_error("--client-weight takes CLIENT=WEIGHT (got '" + e + "')");
    }
    try {
      size_t used = 0;
      w = std::stod(e.substr(eq + 1), &used);
      if (used != e.size() - eq - 1) w = 0.0;
    } catch (const std::exception&) {
      w = 0.0;
    }
    if (!(w > 0.0) || !std::isfinite(w)) {
      return make_error("--client-weight: the weight must be > 0 (got '" + e + "')");
    }
    c.client_weights[e.substr(0, eq)] = w;
  }
  return {};
}

// <repo>/web: next to the binary's parent (build/pagoda -> ./web), or under
// the working directory. Empty when none has an index.html.
std::string default_web_root() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / "web");
    }
  }
  candidates.push_back(fs::current_path(ec) / "web");
  for (const fs::path& c : candidates) {
    if (fs::is_regular_file(c / "index.html", ec)) return c.string();
  }
  return {};
}

Result<actors::EngineOptions> engine_options(const ServeArgs& a) {
  actors::EngineOptions o;
  o.model_path = a.model;
  if (a.backend == "cpu") o.backend = gpu::BackendKind::kCpu;
  else if (a.backend == "cuda") o.backend = gpu::BackendKind::kCuda;
  else if (a.backend != "auto") return make_error("--backend must be auto, cpu or cuda (got '" + a.backend + "')");
  o.precision = a.precision == "exact" ? model::WeightPrecision::kExact : model::WeightPrecision::kQuantized;
  o.load_format = *model::parse_load_format(a.load_format);  // CLI11 checked the names
  o.dummy_dtype = *model::parse_dummy_dtype(a.dummy_dtype);
  const bool cpu_run =
      a.backend == "cpu" || (a.backend == "auto" && gpu::probe_devices().device_count == 0);
  const gpu::cpu::KvBudget kv = gpu::cpu::kv_cache_budget(a.kv_cache_memory, cpu_run);
  o.kv_cache_bytes = kv.bytes;
  std::cerr << "pagoda: kv cache budget " << (kv.bytes >> 20) << " MiB (" << kv.how << ")\n";
  o.max_num_seqs = a.max_num_seqs;
  o.max_num_batched_tokens = a.max_num_batched_tokens;
  o.max_model_len = a.max_model_len;
  apply_engine_runtime_options(a.runtime, o);
  o.scheduling_policy = *actors::parse_scheduling_policy(a.scheduling_policy);  // CLI11 checked the names
  o.fair_share.prompt_weight = a.fair_prompt_weight;
  o.fair_share.output_weight = a.fair_output_weight;
  o.urgent_prefill_alone = !a.no_urgent_prefill;
  if (!(a.fair_prompt_weight >= 0.0) || !(a.fair_output_weight >= 0.0)) {
    return make_error("--fair-prompt-weight and --fair-output-weight must be >= 0");
  }
  if (auto ok = parse_client_weights(a.client_weights, o.fair_share); !ok) return ok.error();
  return o;
}

// The engine behind the server: remote nodes (--engines), or in-process
// (then published as a node with --listen; *node holds it).
Result<std::shared_ptr<actors::EngineClient>> start_engine(const ServeArgs& a,
                                                           std::unique_ptr<actors::EngineNode>* node) {
  if (!a.engines.empty()) {
    auto nodes = actors::parse_node_list(a.engines);
    if (!nodes) return nodes.error();
    actors::RemoteEngineOptions o{a.model, std::move(*nodes), a.router, std::max<size_t>(a.runtime.actor_threads, 1)};
    auto remote = actors::RemoteEngine::start(o);
    if (!remote) return remote.error();
    return std::shared_ptr<actors::EngineClient>(std::move(*remote));
  }
  std::vector<actors::NodeAddress> where;
  if (!a.listen.empty()) {
    auto parsed = actors::parse_node_list(a.listen);
    if (!parsed) return make_error("--listen: " + parsed.error().message);
    if (parsed->size() != 1) return make_error("--listen takes one HOST:PORT");
    where = std::move(*parsed);
  }
  Result<actors::EngineOptions> opts = engine_options(a);
  if (!opts) return opts.error();
  Result<std::unique_ptr<actors::Engine>> engine = actors::Engine::start(*opts);
  if (!engine) return engine.error();
  std::shared_ptr<actors::Engine> local(std::move(*engine));
  if (!where.empty()) {
    const actors::NodeAddress& at = where.front();
    auto started = actors::EngineNode::start(local, actors::EngineNodeOptions{at.host, at.port});
    if (!started) return started.error();
    *node = std::move(*started);
    std::cout << "pagoda: engine node on " << at.host << ":" << (*node)->port() << std::endl;
  }
  return std::shared_ptr<actors::EngineClient>(std::move(local));
}

Result<void> run_serve(ServeArgs a) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // inherited by every thread started below

  if (a.server.api_key.empty()) {
    if (const char* env = std::getenv("PAGODA_API_KEY")) a.server.api_key = env;
  }
  if (a.server.web_root.empty()) a.server.web_root = default_web_root();
  a.server.idle_timeout = std::chrono::seconds(a.idle_timeout_s);
  a.server.header_timeout = std::chrono::seconds(a.header_timeout_s);

  auto ctx = std::make_shared<ServerContext>();
  ctx->options = a.server;
  Result<std::unique_ptr<HttpServer>> server = HttpServer::start(ctx, make_api_routes(ctx));
  if (!server) return server.error();
  const std::string url = "http://" + a.server.host + ":" + std::to_string((*server)->port());
  std::cerr << "pagoda: listening on " << url << ", loading " << a.model << "\n";

  std::unique_ptr<actors::EngineNode> node;
  Result<std::shared_ptr<actors::EngineClient>> engine = start_engine(a, &node);
  if (!engine) {
    (*server)->stop();
    return engine.error();
  }
  ctx->engine = std::move(*engine);
  {
    const int64_t blocks = ctx->engine->num_kv_blocks(), bs = ctx->engine->options().block_size;
    std::cerr << "pagoda: kv cache: " << blocks << " blocks of " << bs << " tokens (" << blocks * bs
              << " tokens; --kv-cache-dtype " << a.runtime.kv_cache_dtype << ")\n";
  }
  ctx->ready.store(true, std::memory_order_release);
  std::cout << "pagoda: serving " << ctx->engine->model_name() << " on " << url << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "pagoda: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down\n";
  ctx->shutting_down.store(true);
  (*server)->stop_accepting();
  if (node) node->stop();  // front ends see the node go: they retry or end its requests
  ctx->engine->shutdown();
  (*server)->stop();
  std::cerr << "pagoda: stopped\n";
  return {};
}

void add_limit_options(CLI::App* cmd, ServeArgs& a) {
  ServerOptions& s = a.server;
  cmd->add_option("--io-threads", s.io_threads, "Asio I/O threads");
  cmd->add_option("--max-body-bytes", s.max_body_bytes, "Largest HTTP request body");
  cmd->add_option("--max-frame-bytes", s.max_frame_bytes, "Largest WebSocket message");
  cmd->add_option("--max-prompt-tokens", s.max_prompt_tokens, "Longest prompt (0: the model's context - 1)");
  cmd->add_option("--max-requests-per-connection", s.max_requests_per_connection,
                  "Requests in flight per connection");
  cmd->add_option("--max-connections", s.max_connections, "Open connections at most");
  cmd->add_option("--max-queued-bytes", s.max_queued_bytes,
                  "Outgoing bytes queued per connection before it is dropped as a slow consumer");
  cmd->add_option("--idle-timeout", a.idle_timeout_s, "Seconds an idle connection stays open");
  cmd->add_option("--header-timeout", a.header_timeout_s, "Seconds a request may take to arrive");
  cmd->add_option("--max-requests-per-client", s.max_requests_per_client,
                  "Opt-in hard cap: generate requests in flight per client address, all connections "
                  "together (default 0: no cap; the scheduling policy shares the slots)");
  cmd->add_option("--max-waiting", s.max_waiting,
                  "Requests waiting in the engine at which new ones get 429 overloaded (0: no cap)");
  cmd->add_option("--max-response-bytes", s.max_response_bytes, "Largest non-streamed completion body");
}

void add_route_options(CLI::App* cmd, actors::RouterConfig& r) {
  cmd->add_option("--route-prefix-weight", r.weights.prefix, "Routing: weight of a node's cached prompt prefix");
  cmd->add_option("--route-load-weight", r.weights.load, "Routing: weight of a node's load (waiting + running)");
  cmd->add_option("--route-free-weight", r.weights.free, "Routing: weight of a node's free KV blocks");
  cmd->add_option("--engine-connect-timeout", r.connect_timeout_s, "Seconds to connect to an engine node");
  cmd->add_option("--engine-report-timeout", r.report_timeout_s,
                  "Seconds an engine node may take to answer a load poll (3 misses: out of routing)");
  cmd->add_option("--engine-max-retries", r.max_retries,
                  "Times a request that streamed nothing is retried on another node after its node is lost")
      ->check(CLI::Range(0, 16));
}

// The options `serve` and `engine` share (everything but MODEL and the mode).
void add_server_options(CLI::App* cmd, ServeArgs* a) {
  cmd->add_option("--host", a->server.host, "Address to listen on");
  cmd->add_option("--port", a->server.port, "Port to listen on (0: any free port)");
  cmd->add_option("--api-key", a->server.api_key, "Require this key (default: env PAGODA_API_KEY)");
  cmd->add_option("--allowed-origin", a->server.allowed_origins,
                  "Origin allowed for HTTP and WebSocket, answered with CORS (repeatable; default: the server's own host)");
  cmd->add_option("--allowed-host", a->server.allowed_hosts,
                  "Host header name served besides localhost, IP literals and --host (repeatable; * = any)");
  cmd->add_flag("--public-metrics", a->server.public_metrics, "Serve /metrics without the API key");
  cmd->add_option("--web-root", a->server.web_root, "Static files served at / (default: <repo>/web)");
  cmd->add_option("--served-model-name", a->server.served_model_name, "Model id in the API");
  cmd->add_option("--tool-call-parser", a->server.tool_call_parser,
                  "Tool-call format of the model's answers: hermes, llama3_json or mistral "
                  "(default: detected from the chat template)")
      ->check([](const std::string& v) {
        return v.empty() || parse_tool_format(v) ? std::string() : "must be hermes, llama3_json or mistral";
      });
  cmd->add_option("--backend", a->backend, "auto, cpu or cuda");
  cmd->add_option("--precision", a->precision, "quantized (default: GGUF blocks, faster) or exact (fp32)")
      ->check(CLI::IsMember({"exact", "quantized"}));
  add_load_format_options(cmd, a->load_format, a->dummy_dtype);
  add_engine_runtime_options(cmd, a->runtime);
  cmd->add_option("--kv-cache-memory", a->kv_cache_memory,
                  "KV cache budget in bytes (default: 30% of available memory on the CPU)");
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "Sequences per step at most");
  cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "Tokens per step at most");
  cmd->add_option("--max-model-len", a->max_model_len, "Context length (0: the model's)");
  add_limit_options(cmd, *a);
  cmd->add_option("--scheduling-policy", a->scheduling_policy,
                  "Admission order: fcfs, fair (per-client virtual token counters; default) or priority "
                  "(the request's `priority`, lower first; may preempt larger values)")
      ->check(CLI::IsMember({"fcfs", "fair", "priority"}));
  cmd->add_option("--fair-prompt-weight", a->fair_prompt_weight, "fair: service charged per prompt token");
  cmd->add_option("--fair-output-weight", a->fair_output_weight, "fair: service charged per generated token");
  cmd->add_flag("--no-urgent-prefill", a->no_urgent_prefill,
                "fair, CPU: admit a client's single waiting request beside the running rows (default: "
                "its prompt in a step of its own while another client has a queue)");
  cmd->add_option("--client-weight", a->client_weights,
                  "fair: CLIENT=WEIGHT, the client's share (repeatable; CLIENT is user:NAME from the "
                  "request's `user`, or addr:IP; default 1)");
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI API) and WebSocket");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("model", a->model,
                  "A .gguf file or a HuggingFace model directory (with --engines: its tokenizer; default: the nodes')");
  cmd->add_option("--engines", a->engines,
                  "Run the front end over these engine nodes (HOST:PORT,...; `pagoda engine`) instead of in-process");
  add_server_options(cmd, a.get());
  add_route_options(cmd, a->router);
  cmd->callback([a, &exit_code] {
    Result<void> r = a->model.empty() && a->engines.empty()
                         ? Result<void>(make_error("MODEL is required (or --engines HOST:PORT,...)"))
                         : run_serve(*a);
    if (!r) {
      std::cerr << "pagoda serve: " << r.error().message << "\n";
      exit_code = 1;
    }
  });
}

void add_engine_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("engine", "Run an engine node for `pagoda serve --engines` (docs/scaling.md)");
  auto a = std::make_shared<ServeArgs>();
  a->server.port = 0;
  cmd->add_option("model", a->model, "A .gguf file or a HuggingFace model directory")->required();
  cmd->add_option("--listen", a->listen,
                  "HOST:PORT of the node's entry actor (CAF middleman: no TLS or auth, bind a private address)")
      ->required();
  add_server_options(cmd, a.get());
  cmd->callback([a, &exit_code] {
    if (Result<void> r = run_serve(*a); !r) {
      std::cerr << "pagoda engine: " << r.error().message << "\n";
      exit_code = 1;
    }
  });
}

}  // namespace pagoda::net
