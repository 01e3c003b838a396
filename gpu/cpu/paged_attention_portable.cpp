// The portable variant of the paged-attention kernels (attn::Kernels, see
// paged_attention_kernels.hpp): plain C++ built for baseline x86-64, written
// in fixed-width lane loops so that the compiler vectorises them with SSE2.
// Runs everywhere; any head_dim. Its arithmetic is the pre-SIMD CPU twin's:
// dot products sum 8 lanes over d and add them as ((0+4)+(1+5))+((2+6)+(3+7)),
// weights are std::exp(s - m) added to the running sum key by key, P.V adds
// w * v key by key; so with blocks of <= kChunk keys (block size 8 or 16) it
// gives that code's bits.
#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/cpu/paged_attention_kernels.hpp"

namespace pagoda::gpu::cpu::attn {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float dot(const float* a, const float* b, int32_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t j = 0; j < 8; ++j) lane[j] += a[i + j] * b[i + j];
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7])) +
         tail;
}

void scores(const float* const* q, int32_t nh, const float* k, int32_t n, int32_t D, float scale,
            float* s) {
  for (int32_t h = 0; h < nh; ++h) {
    float* sh = s + h * kChunk;
    for (int32_t l = 0; l < n; ++l) sh[l] = dot(q[h], k + int64_t{l} * D, D) * scale;
    for (int32_t l = n; l < kChunk; ++l) sh[l] = kNegInf;
  }
}

void exp16(const float* x, float* y) {
  for (int32_t l = 0; l < kChunk; ++l) y[l] = std::exp(x[l]);
}

void weights(float* s, int32_t nh, float* m, float* l, float* alpha) {
  for (int32_t h = 0; h < nh; ++h) {
    float* sh = s + h * kChunk;
    const float m_new = std::max(m[h], *std::max_element(sh, sh + kChunk));
    if (m_new == kNegInf) {  // no key (only with -inf scores): nothing changes
      std::fill_n(sh, kChunk, 0.0f);
      alpha[h] = 1.0f;
      continue;
    }
    alpha[h] = m_new == m[h] ? 1.0f : std::exp(m[h] - m_new);  // 0 on the first step
    l[h] *= alpha[h];
    for (int32_t j = 0; j < kChunk; ++j) {
      sh[j] = std::exp(sh[j] - m_new);  // exactly 0 for -inf
      l[h] += sh[j];
    }
    m[h] = m_new;
  }
}

void pv(float* const* acc, const float* alpha, const float* w, int32_t nh, const float* v,
        int32_t n, int32_t D) {
  for (int32_t h = 0; h < nh; ++h) {
    scale_in_place(acc[h], alpha[h], D);
    for (int32_t j = 0; j < n; ++j) axpy(acc[h], w[h * kChunk + j], v + int64_t{j} * D, D);
  }
}

void softcap(float* s, int32_t nh, int32_t n, float cap) {
  for (int32_t h = 0; h < nh; ++h) {
    for (int32_t l = 0; l < n; ++l) s[h * kChunk + l] = cap * std::tanh(s[h * kChunk + l] / cap);
  }
}

}  // namespace

const Kernels& portable_kernels() {
  static const Kernels k{&scores, &weights, &pv, &scale_in_place, &exp16, 1, nullptr, nullptr,
                         &softcap, &widen_bf16};
  return k;
}

}  // namespace pagoda::gpu::cpu::attn
