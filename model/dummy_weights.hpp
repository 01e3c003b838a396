// Dummy weights (--load-format dummy): random weights of a ModelConfig's shape,
// made in host memory and placed in the backend exactly as load_llama_weights
// places real ones (model/llama_weights.hpp), so the forward pass, the engine
// and the server run unchanged at any model size without a checkpoint.
//
// Values (amplitudes chosen so activations stay O(1) through the layers):
//  - linear weights W[N, K]: uniform in ±sqrt(3/K) (unit-variance outputs for
//    unit-RMS inputs); lm_head 4x that, so that the next-token distribution is
//    peaked and greedy choices are not near-ties;
//  - biases (qwen2): uniform ±0.1; norm weights: 1 + uniform ±0.1;
//  - the token embedding: uniform ±1;
//  - MoE (ModelConfig::num_experts > 0): a router [E, H] and per expert
//    gate|up [2 Ie, H] and down [H, Ie], linear weights as above.
// Float values are rounded to bf16, so DummyDtype kAuto/kBf16/kF32 hold the
// same numbers on every backend (CUDA BF16 and CPU fp32 run the same model).
// kQ8_0 / kQ4_0 draw random quants with a fixed per-tensor scale
// (Q8_0: d = a/127, quants in [-127, 127]; Q4_0: d = a/8, nibbles 0..15).
//
// Determinism: element i of tensor t is a pure function of (seed, t, i)
// (a counter-based hash), so the weights do not depend on the thread count or
// the order of generation. Generation runs on up to 16 host threads.
//
// Errors: an invalid config, a block dtype (q8_0 / q4_0) with
// WeightPrecision::kExact on the CPU backend (it would dequantize every weight
// to fp32), a K not a multiple of 32 for a block dtype, a backend allocation
// or upload failure. Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <span>

#include "gpu/backend.hpp"
#include "gpu/result.hpp"
#include "model/llama_weights.hpp"
#include "model/model_config.hpp"

namespace pagoda::model {

// options.dummy_dtype, options.dummy_seed, options.precision and
// options.progress apply; options.load_format is not looked at.
Result<LlamaWeights> make_dummy_llama_weights(const ModelConfig& config, gpu::Backend& backend,
                                              const WeightLoadOptions& options);

// The generator itself (exposed for tests): out[i] = bf16-rounded uniform
// value in ±amplitude of element (offset + i) of tensor `tensor`.
void dummy_uniform(uint64_t seed, uint64_t tensor, uint64_t offset, float amplitude,
                   std::span<float> out);

}  // namespace pagoda::model
