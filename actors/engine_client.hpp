// EngineClient: the interface the network layer serves from, implemented by
// the in-process Engine (actors/engine.hpp) and by RemoteEngine
// (actors/scale_out/remote_engine.hpp). Contracts are Engine's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actors/engine_types.hpp"
#include "gpu/result.hpp"

namespace pagoda::actors {

// What the network layer needs of an engine: the in-process Engine below, or
// a RemoteEngine (actors/scale_out/remote_engine.hpp) that routes requests to engine
// nodes. Every method has Engine's contract (see there).
class EngineClient {
 public:
  virtual ~EngineClient() = default;
  virtual void shutdown() = 0;
  virtual RequestHandle submit(GenerateRequest request, std::shared_ptr<RequestSink> sink) = 0;
  virtual EngineStats stats() = 0;
  virtual KvSnapshot kv_snapshot() = 0;
  virtual Result<std::vector<int32_t>> tokenize(const GenerateRequest& request) const = 0;
  virtual Result<std::string> detokenize(const std::vector<int32_t>& ids) const = 0;
  virtual std::string model_name() const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual const EngineOptions& options() const = 0;
  virtual int32_t num_kv_blocks() const = 0;
  virtual int32_t max_model_len() const = 0;
  // The engine nodes behind a front end (empty: the engine is in-process).
  virtual std::vector<EngineNodeInfo> engine_nodes() const { return {}; }
  // The engine's supervision state (a front end: serving; its nodes are
  // reported by engine_nodes()). Never blocks on actors.
  virtual EngineHealth health() { return {}; }
  // The Jinja source of the chat template requests are rendered with
  // (empty: the model has none). The front end reads it to pick a tool-call
  // format (net/tool_format.hpp). Thread-safe.
  virtual std::string chat_template_source() const { return {}; }

  // Blocking, over submit(): runs every prompt (concurrently) and returns in
  // order. Never call it from a RequestSink callback.
  std::vector<GenerateResult> generate(const std::vector<std::string>& prompts,
                                       const SamplingOptions& sampling);
  std::vector<GenerateResult> generate(std::vector<GenerateRequest> requests);
};

}  // namespace pagoda::actors
