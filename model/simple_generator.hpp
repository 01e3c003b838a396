// SimpleGenerator: one request at a time, the minimal loop the CLI's
// `pagoda generate` uses until the engine (actors/) replaces it. It runs the
// same LlamaModel::forward as the engine: the prompt is prefilled in chunks
// of at most max_num_batched_tokens, then one decode step per new token, each
// token drawn by Backend::sample (greedy, or temperature/top-k/top-p/min-p
// with penalties, seeded per request). KV blocks are given out sequentially
// (logical block b is physical block b) from a cache the generator owns; the
// cache is (re)made when a request needs more blocks than it has.
//
// Thread-safety: none (one generate() at a time, on the thread that owns the
// model). Must not outlive the model.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "gpu/device_buffer.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/ops.hpp"
#include "gpu/result.hpp"
#include "model/forward_batch.hpp"
#include "model/llama_model.hpp"

namespace pagoda::model {

struct GenerateOptions {
  int32_t max_new_tokens = 128;
  // Greedy by default; set temperature > 0 (and seed) to sample. The step
  // and history fields are filled in by the generator.
  gpu::SamplingRowParams sampling{.temperature = 0.0f};
  bool ignore_eos = false;              // true: the config's eos ids do not stop
  std::vector<int32_t> stop_token_ids;  // extra ids that stop (kept in the output)
  // Called with each new token; returning false stops generation.
  std::function<bool(int32_t token)> on_token;
};

enum class FinishReason { kLength, kStop, kCallback, kContextFull };
const char* finish_reason_name(FinishReason r);  // "length", "stop", "callback", "context"

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens (a stop token included)
  std::vector<float> logprobs;  // raw logprob of each
  FinishReason finish = FinishReason::kLength;
  int32_t prompt_tokens = 0;
  double prefill_seconds = 0;  // prompt prefill and the first token
  double decode_seconds = 0;   // every later token
  // Tokens after the first per decode second (0 when fewer than 2 tokens).
  double decode_tokens_per_second() const {
    return tokens.size() > 1 && decode_seconds > 0 ? double(tokens.size() - 1) / decode_seconds
                                                   : 0.0;
  }
};

class SimpleGenerator {
 public:
  explicit SimpleGenerator(LlamaModel& model) : model_(model) {}

  // prompt: 1..max_model_len token ids. Errors: an empty or too long prompt,
  // an out-of-vocabulary id, a failed allocation or forward.
  Result<GenerateResult> generate(std::span<const int32_t> prompt, const GenerateOptions& options);

 private:
  Result<void> prepare(int32_t max_len);
  Result<int32_t> sample(const float* device_logits, int32_t step, int32_t prompt_len,
                         int32_t output_len, const GenerateOptions& options, float* logprob);

  LlamaModel& model_;
  gpu::KvCache cache_;
  int32_t cache_tokens_ = 0;        // capacity of cache_ in tokens
  std::vector<int32_t> block_table_;
  gpu::DeviceBuffer history_;       // [capacity] prompt + output ids
  gpu::DeviceBuffer sample_io_;     // one SamplingRowParams, token, logprob
  ForwardBatch batch_;
};

}  // namespace pagoda::model
