// CPU twins of GELU(gate) * up (GeluMulParams, PyTorch's tanh approximation)
// and of scale_cap (ScaleCapParams). Scalar std::tanh per element: Gemma's
// MLP is one of several matmul-bound steps per layer, so this pass is not
// vectorised by hand. Each element's result depends only on its own inputs.
#include <algorithm>
#include <cmath>

#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu::cpu {

void gelu_tanh_mul(const GeluMulParams& p, ThreadPool& pool) {
  const size_t inter = size_t(p.intermediate);
  const size_t min_rows = std::max<size_t>(1, 16384 / std::max<size_t>(inter, 1));
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      const float* gate = p.x + t * 2 * inter;  // [I], then up [I]
      const float* up = gate + inter;
      float* out = p.out + t * inter;           // [I]
      for (size_t i = 0; i < inter; ++i) {
        const float g = gate[i];
        const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
        out[i] = 0.5f * g * (1.0f + std::tanh(inner)) * up[i];
      }
    }
  }, min_rows);
}

void scale_cap(const ScaleCapParams& p, ThreadPool& pool) {
  const float scale = p.scale, cap = p.cap;
  pool.parallel_for(size_t(std::max<int64_t>(p.n, 0)), [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const float v = p.x[i] * scale;
      p.x[i] = cap > 0.0f ? cap * std::tanh(v / cap) : v;
    }
  }, 4096);
}

}  // namespace pagoda::gpu::cpu
