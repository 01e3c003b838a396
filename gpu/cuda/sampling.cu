// CUDA sampler (SamplingParams, gpu/ops.hpp; gpu-notes §5): one CTA of 512
// threads per row, no sort, deterministic.
//  1. z := logits with penalties (repetition once per distinct history token,
//     written idempotently from the raw logit; frequency/presence applied by
//     the thread holding a token's first output occurrence, in the CPU twin's
//     order of fp32 subtractions).
//  2. greedy: argmax (lowest index on ties). Otherwise z /= temperature, then
//     survivors are filtered by thresholds found with bitwise searches over
//     order-preserving keys of z: min_p is analytic; top_k keeps key >= the
//     largest t with count(key >= t) >= k (the k-th largest value, ties kept);
//     top_p keeps key >= the largest t with mass(key >= t) >= top_p * mass
//     (mass in double), which is the CPU twin's sorted-prefix threshold.
//  3. exponential race argmax exp(z - zmax) / -log(u), u from gpu/philox.hpp,
//     exp and log computed in double and rounded to fp32 (so that they agree
//     with the host's correctly rounded expf/logf almost always).
// Reductions are deterministic (fixed blockDim), so a row's token depends only
// on (its logits, params, seed, step). Logprobs: log-softmax in double of the
// raw or processed row; top-N candidates by repeated argmax passes.
#include <climits>
#include <cmath>

#include "gpu/cuda/block_reduce.cuh"
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/philox.hpp"

namespace pagoda::gpu::cuda {

namespace {

constexpr int kThreads = 512;

struct Shared {
  float f[32];
  int32_t i[32];
  double d[32];
  ArgMax a[32];
};

// Monotone map of floats to uint32 (larger float, larger key); -0 maps like +0.
__device__ __forceinline__ uint32_t order_key(float z) {
  const uint32_t u = __float_as_uint(z == 0.0f ? 0.0f : z);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

__device__ void apply_penalties(const SamplingParams& p, const SamplingRowParams& rp,
                                const float* raw, float* z) {
  const int32_t V = p.vocab_size;
  const int32_t* prompt = p.history + rp.prompt_offset;
  const int32_t* output = p.history + rp.output_offset;
  if (rp.repetition_penalty != 1.0f) {
    const int32_t n = rp.prompt_len + rp.output_len;
    for (int32_t i = threadIdx.x; i < n; i += kThreads) {
      const int32_t t = i < rp.prompt_len ? prompt[i] : output[i - rp.prompt_len];
      if (t < 0 || t >= V) continue;
      const float x = raw[t];  // same value from every thread holding t
      z[t] = x > 0.0f ? x / rp.repetition_penalty : x * rp.repetition_penalty;
    }
    __syncthreads();
  }
  if (rp.frequency_penalty != 0.0f || rp.presence_penalty != 0.0f) {
    for (int32_t i = threadIdx.x; i < rp.output_len; i += kThreads) {
      const int32_t t = output[i];
      if (t < 0 || t >= V) continue;
      bool first = true;
      for (int32_t j = 0; j < i && first; ++j) first = output[j] != t;
      if (!first) continue;
      int32_t count = 1;
      for (int32_t j = i + 1; j < rp.output_len; ++j) count += output[j] == t ? 1 : 0;
      float v = z[t];
      v -= rp.frequency_penalty;  // the first occurrence: frequency, then presence
      v -= rp.presence_penalty;
      for (int32_t c = 1; c < count; ++c) v -= rp.frequency_penalty;
      z[t] = v;
    }
    __syncthreads();
  }
  if (rp.bias_len > 0) {  // distinct ids per row (the executor dedups), so no races
    const int32_t* bias = p.history + rp.bias_offset;
    for (int32_t i = threadIdx.x; i < rp.bias_len; i += kThreads) {
      const int32_t t = bias[2 * i];
      if (t >= 0 && t < V) z[t] += __int_as_float(bias[2 * i + 1]);
    }
    __syncthreads();
  }
  if (rp.banned_len > 0) {
    const int32_t* banned = p.history + rp.banned_offset;
    for (int32_t i = threadIdx.x; i < rp.banned_len; i += kThreads) {
      const int32_t t = banned[i];
      if (t >= 0 && t < V) z[t] = -INFINITY;
    }
    __syncthreads();
  }
  if (rp.mask_words > 0) {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(p.history + rp.mask_offset);
    for (int32_t t = threadIdx.x; t < V; t += kThreads) {
      const int32_t w = t >> 5;
      const bool allowed = w < rp.mask_words && ((words[w] >> (t & 31)) & 1u) != 0u;
      if (!allowed) z[t] = -INFINITY;
    }
    __syncthreads();
  }
}

// Argmax of x[i] over the i with pred(x[i]) (lowest index on ties); INT_MAX if none.
template <class Pred>
__device__ ArgMax block_argmax(const float* x, int32_t n, Pred pred, Shared& sh) {
  const ArgMax none{-INFINITY, INT_MAX};
  ArgMax best = none;
  for (int32_t i = threadIdx.x; i < n; i += kThreads) {
    if (pred(i, x[i])) best = better(best, ArgMax{x[i], i});
  }
  return block_reduce(best, ArgMaxOp{}, none, sh.a);
}

template <class Pred>
__device__ int32_t block_count(const float* x, int32_t n, Pred pred, Shared& sh) {
  int32_t c = 0;
  for (int32_t i = threadIdx.x; i < n; i += kThreads) c += pred(x[i]) ? 1 : 0;
  return block_reduce(c, SumOp{}, 0, sh.i);
}

// Sum of exp(z - zmax) in double over the z with pred(z).
template <class Pred>
__device__ double block_mass(const float* x, int32_t n, float zmax, Pred pred, Shared& sh) {
  double m = 0.0;
  for (int32_t i = threadIdx.x; i < n; i += kThreads) {
    if (pred(x[i])) m += exp(double(x[i]) - double(zmax));
  }
  return block_reduce(m, SumOp{}, 0.0, sh.d);
}

__device__ float block_max(const float* x, int32_t n, Shared& sh) {
  float m = -INFINITY;
  for (int32_t i = threadIdx.x; i < n; i += kThreads) m = fmaxf(m, x[i]);
  return block_reduce(m, MaxOp{}, -INFINITY, sh.f);
}

// Steps 2-3 for temperature >= kGreedyTemperature; z is divided in place.
__device__ int32_t sample_tempered(const SamplingRowParams& rp, float* z, int32_t V,
                                   Shared& sh) {
  for (int32_t i = threadIdx.x; i < V; i += kThreads) z[i] = z[i] / rp.temperature;
  __syncthreads();
  const auto all = [](int32_t, float) { return true; };
  const float zmax = block_max(z, V, sh);
  const double floor_z = rp.min_p > 0.0f ? double(zmax) + log(double(rp.min_p)) : -INFINITY;
  const auto alive = [&](float x) { return x != -INFINITY && double(x) >= floor_z; };
  const int32_t n = block_count(z, V, alive, sh);
  if (n == 0) return block_argmax(z, V, all, sh).index;
  uint32_t tk = 0;  // top_k: keep key >= tk
  if (rp.top_k > 0 && rp.top_k < n) {
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = tk | (1u << bit);
      const auto above = [&](float x) { return alive(x) && order_key(x) >= cand; };
      if (block_count(z, V, above, sh) >= rp.top_k) tk = cand;
    }
  }
  const auto alive2 = [&](float x) { return alive(x) && order_key(x) >= tk; };
  uint32_t tp = 0;  // top_p: keep key >= tp
  if (rp.top_p < 1.0f && block_count(z, V, alive2, sh) > 1) {
    const double target = double(rp.top_p) * block_mass(z, V, zmax, alive2, sh);
    const uint32_t kmax = order_key(zmax);  // the max always survives
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t cand = tp | (1u << bit);
      if (cand > kmax) continue;
      const auto above = [&](float x) { return alive2(x) && order_key(x) >= cand; };
      if (block_mass(z, V, zmax, above, sh) >= target) tp = cand;
    }
  }
  const ArgMax none{-1.0f, INT_MAX};
  ArgMax best = none;
  for (int32_t i = threadIdx.x; i < V; i += kThreads) {
    const float x = z[i];
    if (!alive2(x) || order_key(x) < tp) continue;
    const float e = float(exp(double(x - zmax)));
    const float u = philox_sampling_uniform(rp.seed, rp.step, uint32_t(i));
    const float lg = float(log(double(u)));
    best = better(best, ArgMax{e / -lg, i});
  }
  return block_reduce(best, ArgMaxOp{}, none, sh.a).index;
}

// log-sum-exp of x in double: max + log(sum exp(x - max)).
__device__ double block_lse(const float* x, int32_t V, Shared& sh) {
  const float mx = block_max(x, V, sh);
  if (mx == -INFINITY) return -INFINITY;
  const auto all = [](float) { return true; };
  return double(mx) + log(block_mass(x, V, mx, all, sh));
}

// Whether the row's token mask allows token i (rows without a mask: every token).
__device__ __forceinline__ bool mask_allows(const SamplingParams& p, const SamplingRowParams& rp, int32_t i) {
  if (rp.mask_words <= 0) return true;
  const int32_t w = i >> 5;
  const uint32_t* words = reinterpret_cast<const uint32_t*>(p.history + rp.mask_offset);
  return w < rp.mask_words && ((words[w] >> (i & 31)) & 1u) != 0u;
}

// block_lse over the tokens the row's mask allows.
__device__ double block_lse_masked(const SamplingParams& p, const SamplingRowParams& rp, const float* x,
                                   int32_t V, Shared& sh) {
  float mx = -INFINITY;
  for (int32_t i = threadIdx.x; i < V; i += kThreads) {
    if (mask_allows(p, rp, i)) mx = fmaxf(mx, x[i]);
  }
  mx = block_reduce(mx, MaxOp{}, -INFINITY, sh.f);
  if (mx == -INFINITY) return -INFINITY;
  double m = 0.0;
  for (int32_t i = threadIdx.x; i < V; i += kThreads) {
    if (mask_allows(p, rp, i)) m += exp(double(x[i]) - double(mx));
  }
  return double(mx) + log(block_reduce(m, SumOp{}, 0.0, sh.d));
}

// The logprob of a value under a log-sum-exp: -inf for a -inf value, also when
// every value is -inf (lse -inf: never NaN). The CPU twin's rule.
__device__ __forceinline__ float logprob_of(float value, double lse) {
  return value == -INFINITY ? -INFINITY : float(double(value) - lse);
}

__device__ void top_candidates(const SamplingParams& p, const SamplingRowParams& rp,
                               const float* x, double lse, Shared& sh) {
  const int32_t V = p.vocab_size;
  const int32_t n = max(0, min(rp.num_top_logprobs, min(p.top_stride, V)));
  int32_t* tokens = p.top_tokens + int64_t{blockIdx.x} * p.top_stride;
  float* logprobs = p.top_logprobs + int64_t{blockIdx.x} * p.top_stride;
  float prev_value = INFINITY;
  int32_t prev_index = -1;
  for (int32_t j = 0; j < n; ++j) {  // next in (value desc, index asc) order
    const auto after = [&](int32_t i, float v) {
      return (v < prev_value || (v == prev_value && i > prev_index)) && mask_allows(p, rp, i);
    };
    const ArgMax best = block_argmax(x, V, after, sh);
    prev_value = best.value;
    prev_index = best.index;
    if (threadIdx.x == 0) {  // fewer candidates than n (a masked row): -1 / -inf
      const bool none = best.index == INT_MAX || (rp.mask_words > 0 && best.value == -INFINITY);
      tokens[j] = none ? -1 : best.index;
      logprobs[j] = none ? -INFINITY : logprob_of(best.value, lse);
    }
  }
  for (int32_t j = n + threadIdx.x; j < p.top_stride; j += kThreads) {
    tokens[j] = -1;
    logprobs[j] = -INFINITY;
  }
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const SamplingParams p,
                                                          float* zbuf /*[R, V]*/) {
  __shared__ Shared sh;
  const int32_t V = p.vocab_size;
  const SamplingRowParams rp = p.rows[blockIdx.x];
  const float* raw = p.logits + int64_t{blockIdx.x} * V;
  float* z = zbuf + int64_t{blockIdx.x} * V;
  for (int32_t i = threadIdx.x; i < V; i += kThreads) z[i] = raw[i];
  __syncthreads();
  apply_penalties(p, rp, raw, z);
  int32_t token;
  if (rp.temperature < kGreedyTemperature) {
    token = block_argmax(z, V, [](int32_t, float) { return true; }, sh).index;
  } else {
    token = sample_tempered(rp, z, V, sh);
  }
  __syncthreads();
  const float* dist = p.logprob_mode == LogprobMode::kRaw ? raw : z;
  // A masked row's raw logprobs are over its allowed tokens (z already is).
  const double lse = dist == raw && rp.mask_words > 0 ? block_lse_masked(p, rp, dist, V, sh)
                                                      : block_lse(dist, V, sh);
  if (threadIdx.x == 0) {
    // A token the mask forbids (drawn only when the row allows none) is -inf in
    // the masked raw row, as in the CPU twin; so is any -inf value (never NaN).
    const float value = dist == raw && !mask_allows(p, rp, token) ? -INFINITY : dist[token];
    p.tokens[blockIdx.x] = token;
    p.logprobs[blockIdx.x] = logprob_of(value, lse);
  }
  if (p.top_tokens != nullptr) top_candidates(p, rp, dist, lse, sh);
}

}  // namespace

size_t sampling_scratch_bytes(const SamplingParams& p) {
  if (p.num_rows <= 0 || p.vocab_size <= 0) return 0;
  return size_t(p.num_rows) * size_t(p.vocab_size) * sizeof(float);
}

Result<void> launch_sample(const SamplingParams& p, void* scratch, cudaStream_t stream) {
  if (p.num_rows <= 0 || p.vocab_size <= 0) return {};
  sample_kernel<<<unsigned(p.num_rows), kThreads, 0, stream>>>(p, static_cast<float*>(scratch));
  return check_launch("sample");
}

}  // namespace pagoda::gpu::cuda
