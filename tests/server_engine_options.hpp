// The small CPU engine the network-layer tests share (api_routes_test,
// openai_api_test, ws_protocol_test, server_client_test): the real model,
// CPU backend, quantized weights (fast), 64 MiB of KV, 32 sequences,
// 256 tokens per step. Header-only.
#pragma once

#include <string>

#include "actors/engine.hpp"
#include "scheduling_mode.hpp"

namespace pagoda::test {

inline actors::EngineOptions server_engine_options(const std::string& model_path) {
  actors::EngineOptions o;
  o.model_path = model_path;
  o.backend = gpu::BackendKind::kCpu;
  o.precision = model::WeightPrecision::kQuantized;
  o.kv_cache_bytes = 64 << 20;
  o.max_num_seqs = 32;
  o.max_num_batched_tokens = 256;
  o.async_scheduling = async_scheduling_under_test();
  o.prepare_ahead = o.async_scheduling;  // as cpu_engine_options
  return o;
}

}  // namespace pagoda::test
