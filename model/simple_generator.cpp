#include "model/simple_generator.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>

namespace pagoda::model {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kCallback: return "callback";
    case FinishReason::kContextFull: return "context";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Where the sampler's row parameters and outputs sit in sample_io_.
constexpr size_t kTokenOffset = (sizeof(gpu::SamplingRowParams) + 7) / 8 * 8;
constexpr size_t kLogprobOffset = kTokenOffset + sizeof(int32_t);
constexpr size_t kSampleIoBytes = kLogprobOffset + sizeof(float);

}  // namespace

Result<void> SimpleGenerator::prepare(int32_t max_len) {
  gpu::Backend& backend = model_.backend();
  if (cache_tokens_ >= max_len) return {};
  const gpu::KvCacheSpec spec = model_.kv_cache_spec();
  const int32_t blocks = (max_len + spec.block_size - 1) / spec.block_size;
  cache_ = gpu::KvCache();  // free the old cache first
  auto cache = backend.create_kv_cache(spec, blocks);
  if (!cache) return cache.error();
  cache_ = std::move(cache).value();
  auto history = backend.allocate(size_t(blocks) * size_t(spec.block_size) * sizeof(int32_t));
  if (!history) return history.error();
  history_ = std::move(history).value();
  if (sample_io_.empty()) {
    auto io = backend.allocate(kSampleIoBytes);
    if (!io) return io.error();
    sample_io_ = std::move(io).value();
  }
  block_table_.resize(size_t(blocks));
  std::iota(block_table_.begin(), block_table_.end(), 0);  // sequential blocks
  cache_tokens_ = blocks * spec.block_size;
  return {};
}

Result<int32_t> SimpleGenerator::sample(const float* device_logits, int32_t step,
                                        int32_t prompt_len, int32_t output_len,
                                        const GenerateOptions& options, float* logprob) {
  gpu::Backend& backend = model_.backend();
  gpu::SamplingRowParams row = options.sampling;
  row.step = uint64_t(step);
  row.num_top_logprobs = 0;
  row.prompt_offset = 0;
  row.prompt_len = prompt_len;
  row.output_offset = prompt_len;
  row.output_len = output_len;
  if (auto up = backend.upload(sample_io_, 0, &row, sizeof row); !up) return up.error();
  auto* io = sample_io_.as<uint8_t>();
  gpu::SamplingParams sp;
  sp.logits = device_logits;
  sp.rows = reinterpret_cast<const gpu::SamplingRowParams*>(io);
  sp.history = history_.as<const int32_t>();
  sp.num_rows = 1;
  sp.vocab_size = model_.config().vocab_size;
  sp.tokens = reinterpret_cast<int32_t*>(io + kTokenOffset);
  sp.logprobs = reinterpret_cast<float*>(io + kLogprobOffset);
  backend.sample(sp);
  uint8_t out[kSampleIoBytes - kTokenOffset];
  if (auto down = backend.download(sample_io_, kTokenOffset, out, sizeof out); !down) {
    return down.error();
  }
  int32_t token;
  std::memcpy(&token, out, sizeof token);
  std::memcpy(logprob, out + sizeof token, sizeof *logprob);
  return token;
}

Result<GenerateResult> SimpleGenerator::generate(std::span<const int32_t> prompt,
                                                 const GenerateOptions& options) {
  const ModelConfig& c = model_.config();
  const int32_t max_model_len = model_.limits().max_model_len;
  const int32_t P = int32_t(prompt.size());
  if (P < 1 || P >= max_model_len) {
    return make_error("generate: the prompt has " + std::to_string(P) +
                      " tokens; allowed 1.." + std::to_string(max_model_len - 1));
  }
  const int32_t max_len = int32_t(std::min<int64_t>(int64_t(P) + std::max(options.max_new_tokens, 0),
                                                    max_model_len));
  if (auto ok = prepare(max_len); !ok) return ok.error();
  gpu::Backend& backend = model_.backend();
  if (auto up = backend.upload(history_, 0, prompt.data(), size_t(P) * sizeof(int32_t)); !up) {
    return up.error();
  }
  GenerateResult res;
  res.prompt_tokens = P;
  if (options.max_new_tokens <= 0) return res;
  const int32_t bs = model_.kv_cache_spec().block_size;
  const int32_t chunk = model_.limits().max_tokens;
  auto t0 = Clock::now();
  const float* logits = nullptr;
  for (int32_t pos = 0; pos < P; pos += chunk) {  // chunked prefill
    const int32_t n = std::min(chunk, P - pos);
    batch_.clear(int32_t(block_table_.size()));
    batch_.add_sequence(prompt.subspan(size_t(pos), size_t(n)), pos, block_table_, bs,
                        /*want_logits=*/pos + n == P);
    auto out = model_.forward_device(batch_, cache_);
    if (!out) return out.error();
    logits = *out;
  }
  auto is_stop = [&](int32_t tok) {
    const auto& extra = options.stop_token_ids;
    return (!options.ignore_eos && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(),
                                             tok) != c.eos_token_ids.end()) ||
           std::find(extra.begin(), extra.end(), tok) != extra.end();
  };
  for (;;) {
    const int32_t out_len = int32_t(res.tokens.size());
    float logprob = 0;
    auto tok = sample(logits, out_len, P, out_len, options, &logprob);
    if (!tok) return tok.error();
    res.tokens.push_back(*tok);
    res.logprobs.push_back(logprob);
    if (res.tokens.size() == 1) {
      res.prefill_seconds = seconds_since(t0);
      t0 = Clock::now();
    }
    const int32_t len = P + int32_t(res.tokens.size());  // tokens in the sequence
    if (options.on_token && !options.on_token(*tok)) {
      res.finish = FinishReason::kCallback;
      break;
    }
    if (is_stop(*tok)) {
      res.finish = FinishReason::kStop;
      break;
    }
    if (int32_t(res.tokens.size()) >= options.max_new_tokens) break;  // kLength
    if (len >= max_len) {
      res.finish = FinishReason::kContextFull;
      break;
    }
    if (auto up = backend.upload(history_, size_t(len - 1) * sizeof(int32_t), &*tok,
                                 sizeof(int32_t));
        !up) {
      return up.error();
    }
    batch_.clear(int32_t(block_table_.size()));
    const int32_t last = *tok;
    batch_.add_sequence(std::span<const int32_t>(&last, 1), len - 1, block_table_, bs);
    auto out = model_.forward_device(batch_, cache_);
    if (!out) return out.error();
    logits = *out;
  }
  if (res.tokens.size() > 1) res.decode_seconds = seconds_since(t0);
  return res;
}

}  // namespace pagoda::model
