// CPU twin of the sampler (SamplingParams in gpu/ops.hpp). Rows are spread
// over min(R, threads) workers, each with its own grow-only scratch; a row's
// result depends only on its logits, params, seed and step.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/sampling_simd.hpp"
#include "gpu/philox.hpp"

namespace pagoda::gpu::cpu {

namespace {

using Worker = SamplingScratch::Worker;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// The AVX2 reductions unless the CPU lacks them or PAGODA_CPU_ISA=scalar.
const bool kSimd = best_quant_isa() != QuantIsa::Scalar;
// Tokens this far below the max carry < V * e^-40 of the mass: never inside a
// top_p < 1 nucleus, so the top_p sort may skip them (their mass still counts).
constexpr double kNucleusWindow = 40.0;

uint32_t next_generation(Worker& w) {
  if (++w.generation == 0) {
    std::fill(w.stamp.begin(), w.stamp.end(), 0u);
    w.generation = 1;
  }
  return w.generation;
}

// Tokens whose mask bit is clear become -inf (SamplingRowParams::mask_words).
void apply_mask(const SamplingParams& p, const SamplingRowParams& rp, float* z) {
  if (rp.mask_words <= 0) return;
  const auto* words = reinterpret_cast<const uint32_t*>(p.history + rp.mask_offset);
  const int32_t V = p.vocab_size;
  int32_t w = 0;
  if (kSimd) {  // the whole words inside the vocabulary; the scalar loop takes the rest
    w = std::min(rp.mask_words, V / 32);
    detail::mask_words_avx2(z, words, w);
  }
  for (; w < rp.mask_words && w * 32 < V; ++w) {
    const uint32_t bits = words[w];
    if (bits == ~uint32_t(0)) continue;
    const int32_t end = std::min(V, w * 32 + 32);
    for (int32_t t = w * 32; t < end; ++t) {
      if (((bits >> (t & 31)) & 1u) == 0) z[t] = kNegInf;
    }
  }
  for (int32_t t = rp.mask_words * 32; t < V; ++t) z[t] = kNegInf;  // past the mask: not allowed
}

// z := raw with repetition, then frequency and presence penalties applied,
// then the logit biases and the banned tokens at -inf. A masked row's raw
// comes masked already (sample_row): -inf stays -inf through every one of
// these, so masking first is the same as masking last.
void apply_penalties(const SamplingParams& p, const SamplingRowParams& rp, const float* raw,
                     Worker& w) {
  const int32_t V = p.vocab_size;
  std::copy(raw, raw + V, w.z.begin());
  const int32_t* prompt = p.history + rp.prompt_offset;
  const int32_t* output = p.history + rp.output_offset;
  auto valid = [V](int32_t t) { return t >= 0 && t < V; };
  if (rp.repetition_penalty != 1.0f) {
    const uint32_t gen = next_generation(w);
    auto penalise = [&](int32_t t) {
      if (!valid(t) || w.stamp[size_t(t)] == gen) return;
      w.stamp[size_t(t)] = gen;
      float& z = w.z[size_t(t)];
      z = z > 0.0f ? z / rp.repetition_penalty : z * rp.repetition_penalty;
    };
    for (int32_t i = 0; i < rp.prompt_len; ++i) penalise(prompt[i]);
    for (int32_t i = 0; i < rp.output_len; ++i) penalise(output[i]);
  }
  if (rp.frequency_penalty != 0.0f || rp.presence_penalty != 0.0f) {
    const uint32_t gen = next_generation(w);
    for (int32_t i = 0; i < rp.output_len; ++i) {
      const int32_t t = output[i];
      if (!valid(t)) continue;
      w.z[size_t(t)] -= rp.frequency_penalty;
      if (w.stamp[size_t(t)] != gen) {
        w.stamp[size_t(t)] = gen;
        w.z[size_t(t)] -= rp.presence_penalty;
      }
    }
  }
  const int32_t* bias = p.history + rp.bias_offset;
  for (int32_t i = 0; i < rp.bias_len; ++i) {
    const int32_t t = bias[2 * i];
    float b;
    std::memcpy(&b, &bias[2 * i + 1], sizeof b);
    if (valid(t)) w.z[size_t(t)] += b;
  }
  const int32_t* banned = p.history + rp.banned_offset;
  for (int32_t i = 0; i < rp.banned_len; ++i) {
    if (valid(banned[i])) w.z[size_t(banned[i])] = kNegInf;
  }
}

int32_t argmax(const float* x, int32_t n) {
  if (kSimd) return detail::argmax_avx2(x, n);
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

// log sum exp over x[0, n), accumulated in double (AVX2: float exps, see
// sampling_simd.hpp; else double exps).
// mx: the largest value of x (x[argmax(x, n)]), known to the caller.
double log_sum_exp(const float* x, int32_t n, float mx) {
  if (mx == kNegInf) return kNegInf;
  if (kSimd && std::isfinite(mx)) return double(mx) + std::log(detail::sum_exp_avx2(x, n, mx));
  double sum = 0.0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  return double(mx) + std::log(sum);
}

// Keeps in w.index[0, n) the survivors of min_p, then top_k; returns n.
int32_t min_p_top_k(const SamplingRowParams& rp, const float* z, int32_t V, float zmax,
                    Worker& w) {
  const double floor_z = rp.min_p > 0.0f ? double(zmax) + std::log(double(rp.min_p))
                                         : -std::numeric_limits<double>::infinity();
  int32_t n = 0;
  for (int32_t i = 0; i < V; ++i) {
    if (z[i] != kNegInf && double(z[i]) >= floor_z) w.index[size_t(n++)] = i;
  }
  if (rp.top_k > 0 && rp.top_k < n) {
    auto first = w.index.begin();
    std::nth_element(first, first + (rp.top_k - 1), first + n,
                     [z](int32_t a, int32_t b) { return z[a] > z[b]; });
    const float kth = z[w.index[size_t(rp.top_k - 1)]];
    int32_t kept = 0;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t t = w.index[size_t(i)];
      if (z[t] >= kth) w.index[size_t(kept++)] = t;
    }
    n = kept;
  }
  return n;
}

// Narrows w.index[0, n) to the top_p nucleus (threshold semantics); returns n.
int32_t top_p(const SamplingRowParams& rp, const float* z, float zmax, int32_t n, Worker& w) {
  if (!(rp.top_p < 1.0f) || n <= 1) return n;
  double total = 0.0;
  int32_t window = 0;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t t = w.index[size_t(i)];
    total += std::exp(double(z[t]) - zmax);
    if (double(z[t]) >= double(zmax) - kNucleusWindow) w.index[size_t(window++)] = t;
  }
  // The out-of-window survivors are dropped here: the nucleus never reaches them.
  auto first = w.index.begin();
  std::sort(first, first + window, [z](int32_t a, int32_t b) {
    return z[a] > z[b] || (z[a] == z[b] && a < b);
  });
  const double target = double(rp.top_p) * total;
  double cum = 0.0;
  int32_t last = window - 1;
  for (int32_t i = 0; i < window; ++i) {
    cum += std::exp(double(z[w.index[size_t(i)]]) - zmax);
    if (cum >= target) {
      last = i;
      break;
    }
  }
  const float threshold = z[w.index[size_t(last)]];
  int32_t kept = last + 1;
  while (kept < window && z[w.index[size_t(kept)]] >= threshold) ++kept;  // ties survive
  return kept;
}

// The exponential race over the survivors: argmax exp(z - zmax) / E, E = -log u.
int32_t race(const SamplingRowParams& rp, const float* z, float zmax, int32_t n, const Worker& w) {
  int32_t best = -1;
  float best_score = -1.0f;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t t = w.index[size_t(i)];
    const float u = philox_sampling_uniform(rp.seed, rp.step, uint32_t(t));
    const float score = std::exp(z[t] - zmax) / -std::log(u);
    if (score > best_score || (score == best_score && t < best)) {
      best = t;
      best_score = score;
    }
  }
  return best;
}

// The logprob of a value under a log-sum-exp: -inf for a -inf value (a token
// that cannot occur), also when every value is -inf (lse -inf: never NaN).
float logprob_of(float value, double lse) {
  return value == kNegInf ? kNegInf : float(double(value) - lse);
}

// The n best entries of x (value descending, ties by lower index) as logprobs.
// masked: x is a masked row's (its -inf entries are not candidates: -1).
void top_candidates(const float* x, int32_t V, double lse, int32_t n, int32_t* tokens,
                    float* logprobs, int32_t stride, bool masked) {
  n = std::clamp(n, 0, std::min(stride, V));
  int32_t count = 0;
  for (int32_t i = 0; i < V; ++i) {
    if (count == n && (n == 0 || !(x[i] > x[tokens[n - 1]]))) continue;
    int32_t pos = std::min(count, n - 1);
    while (pos > 0 && x[i] > x[tokens[pos - 1]]) {
      tokens[pos] = tokens[pos - 1];
      --pos;
    }
    tokens[pos] = i;
    count = std::min(count + 1, n);
  }
  for (int32_t j = 0; j < n; ++j) {
    logprobs[j] = logprob_of(x[tokens[j]], lse);
    if (masked && x[tokens[j]] == kNegInf) tokens[j] = -1;  // fewer candidates than n
  }
  for (int32_t j = n; j < stride; ++j) {
    tokens[j] = -1;
    logprobs[j] = kNegInf;
  }
}

void sample_row(const SamplingParams& p, int32_t r, Worker& w) {
  const SamplingRowParams& rp = p.rows[r];
  const int32_t V = p.vocab_size;
  const float* raw = p.logits + int64_t{r} * V;
  if (rp.mask_words > 0) {  // a masked row's logprobs: the raw logits over its allowed tokens
    w.masked.assign(raw, raw + V);
    apply_mask(p, rp, w.masked.data());
    raw = w.masked.data();
  }
  apply_penalties(p, rp, raw, w);
  float* z = w.z.data();
  int32_t token;
  float zmax;  // the largest z (found once, reused by the log-softmax)
  if (rp.temperature < kGreedyTemperature) {
    token = argmax(z, V);
    zmax = z[token];
  } else {
    for (int32_t i = 0; i < V; ++i) z[i] /= rp.temperature;
    zmax = z[argmax(z, V)];
    int32_t n = min_p_top_k(rp, z, V, zmax, w);
    n = top_p(rp, z, zmax, n, w);
    token = n > 0 ? race(rp, z, zmax, n, w) : argmax(z, V);
  }
  const float* dist = p.logprob_mode == LogprobMode::kRaw ? raw : z;
  const double lse = log_sum_exp(dist, V, dist == z ? zmax : dist[argmax(dist, V)]);
  p.tokens[r] = token;
  p.logprobs[r] = logprob_of(dist[token], lse);
  if (p.top_tokens != nullptr) {
    top_candidates(dist, V, lse, rp.num_top_logprobs, p.top_tokens + int64_t{r} * p.top_stride,
                   p.top_logprobs + int64_t{r} * p.top_stride, p.top_stride, rp.mask_words > 0);
  }
}

}  // namespace

void sample(const SamplingParams& p, ThreadPool& pool, SamplingScratch& scratch) {
  if (p.num_rows <= 0 || p.vocab_size <= 0) return;
  const size_t workers = std::min<size_t>(size_t(p.num_rows), pool.size());
  if (scratch.workers.size() < workers) scratch.workers.resize(workers);
  for (size_t i = 0; i < workers; ++i) {
    Worker& w = scratch.workers[i];
    if (w.z.size() < size_t(p.vocab_size)) {
      w.z.resize(size_t(p.vocab_size));
      w.index.resize(size_t(p.vocab_size));
      w.stamp.resize(size_t(p.vocab_size), 0u);
    }
  }
  pool.parallel_for(workers, [&](size_t begin, size_t end) {
    for (size_t wi = begin; wi < end; ++wi) {
      for (size_t r = wi; r < size_t(p.num_rows); r += workers) {
        sample_row(p, int32_t(r), scratch.workers[wi]);
      }
    }
  });
}

}  // namespace pagoda::gpu::cpu
