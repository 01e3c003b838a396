// CPU twin of rotary position embedding (RopeParams in gpu/ops.hpp). Angles are
// computed in double (position * inv_freq) once per token and shared by all
// heads; the rotation itself is fp32.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu::cpu {

namespace {

constexpr int32_t kMaxPairs = 256;  // rotary_dim <= 512

void rotate_heads(float* x, int32_t num_heads, int32_t head_dim, int32_t pairs, RopeStyle style,
                  const float* cos_t, const float* sin_t) {
  for (int32_t h = 0; h < num_heads; ++h) {
    float* v = x + int64_t{h} * head_dim;
    if (style == RopeStyle::kNeox) {
      for (int32_t i = 0; i < pairs; ++i) {
        const float a = v[i], b = v[i + pairs];
        v[i] = a * cos_t[i] - b * sin_t[i];
        v[i + pairs] = b * cos_t[i] + a * sin_t[i];
      }
    } else {
      for (int32_t i = 0; i < pairs; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cos_t[i] - b * sin_t[i];
        v[2 * i + 1] = b * cos_t[i] + a * sin_t[i];
      }
    }
  }
}

}  // namespace

namespace detail {

void rope_token(const RopeParams& p, size_t t, float* cos_t, float* sin_t) {
  const int32_t pairs = p.rotary_dim / 2;
  const double pos = p.positions[t];
  for (int32_t i = 0; i < pairs; ++i) {
    const double angle = pos * double(p.inv_freq[i]);
    cos_t[i] = float(std::cos(angle)) * p.scale;
    sin_t[i] = float(std::sin(angle)) * p.scale;
  }
  rotate_heads(p.q + int64_t(t) * p.q_stride, p.num_q_heads, p.head_dim, pairs, p.style, cos_t,
               sin_t);
  if (p.k != nullptr) {
    rotate_heads(p.k + int64_t(t) * p.k_stride, p.num_kv_heads, p.head_dim, pairs, p.style,
                 cos_t, sin_t);
  }
}

}  // namespace detail

namespace {

size_t rope_min_rows(const RopeParams& p) {
  const size_t per_token = size_t(p.num_q_heads + p.num_kv_heads) * size_t(p.rotary_dim);
  return std::max<size_t>(1, 16384 / std::max<size_t>(per_token, 1));
}

}  // namespace

void rope(const RopeParams& p, ThreadPool& pool) {
  assert(p.rotary_dim % 2 == 0 && p.rotary_dim <= p.head_dim && p.rotary_dim / 2 <= kMaxPairs);
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    float cos_t[kMaxPairs], sin_t[kMaxPairs];
    for (size_t t = begin; t < end; ++t) detail::rope_token(p, t, cos_t, sin_t);
  }, rope_min_rows(p));
}

void rope_kv_write(const RopeParams& r, const KvCacheWriteParams& w, ThreadPool& pool) {
  assert(r.rotary_dim % 2 == 0 && r.rotary_dim <= r.head_dim && r.rotary_dim / 2 <= kMaxPairs);
  assert(r.num_tokens == w.num_tokens);
  pool.parallel_for(size_t(std::max(r.num_tokens, 0)), [&](size_t begin, size_t end) {
    float cos_t[kMaxPairs], sin_t[kMaxPairs];
    for (size_t t = begin; t < end; ++t) {
      detail::rope_token(r, t, cos_t, sin_t);
      detail::kv_write_token(w, t);
    }
  }, rope_min_rows(r));
}

}  // namespace pagoda::gpu::cpu
