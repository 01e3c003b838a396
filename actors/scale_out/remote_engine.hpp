// RemoteEngine: the EngineClient of a scale-out front end (`pagoda serve
// --engines HOST:PORT,...`, docs/scaling.md). It loads only the model's text
// side (tokenizer, chat template) and runs the request actors under a router
// actor (actors/scale_out/engine_router.hpp) that sends each request to one of the
// engine nodes (actors/scale_out/engine_node.hpp) over CAF's io middleman.
//
// start() connects to every node (each attempt bounded by connect_timeout_s)
// and fails, naming each node's error, unless at least one is up; nodes that
// are down keep being retried and join when they answer. stats() sums the
// nodes' latest reports (TTFT/ITL histograms stay on the nodes' /metrics);
// kv_snapshot() has no blocks (the KV map is per node: see the nodes).
//
// Thread-safety: as Engine (submit, stats, tokenize, cancel from any thread;
// one owner thread builds and destroys the actor system).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/engine_client.hpp"
#include "actors/scale_out/engine_router.hpp"

namespace pagoda::actors {

struct RemoteEngineOptions {
  std::string model_path;  // tokenizer + chat template; empty: the first node's model path
  std::vector<NodeAddress> nodes;
  RouterConfig router;
  size_t actor_threads = 2;
};

// "host:port,host:port" -> addresses. Errors name the bad entry.
Result<std::vector<NodeAddress>> parse_node_list(const std::string& list);

class RemoteEngine : public EngineClient {
 public:
  static Result<std::unique_ptr<RemoteEngine>> start(const RemoteEngineOptions& options);
  ~RemoteEngine() override;  // = shutdown()
  RemoteEngine(const RemoteEngine&) = delete;
  RemoteEngine& operator=(const RemoteEngine&) = delete;

  void shutdown() override;
  RequestHandle submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) override;
  EngineStats stats() override;
  KvSnapshot kv_snapshot() override;
  Result<std::vector<int32_t>> tokenize(const GenerateRequest& request) const override;
  Result<std::string> detokenize(const std::vector<int32_t>& ids) const override;
  std::string model_name() const override;
  int32_t vocab_size() const override;
  std::string chat_template_source() const override;
  const EngineOptions& options() const override;
  int32_t num_kv_blocks() const override;
  int32_t max_model_len() const override;
  std::vector<EngineNodeInfo> engine_nodes() const override;

  // Every node as the router sees it now.
  std::vector<NodeStatus> nodes() const;

  struct Impl;

 private:
  explicit RemoteEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::actors
