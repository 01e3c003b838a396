// CPU twin of SiLU(gate) * up over the packed [gate | up] rows (SiluMulParams).
// With AVX2 + FMA (unless PAGODA_CPU_ISA=scalar) 8 lanes at a time through
// exp_avx2: sigmoid(g) from e = exp(-|g|) as 1/(1+e) (g >= 0) or e/(1+e),
// which never overflows; the tail of a row and other CPUs use std::exp. Each
// element's path depends only on its index in the row, never on the batch.
#include <algorithm>
#include <cmath>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/cpu_ops.hpp"
#include "gpu/cpu/exp_avx2.hpp"

namespace pagoda::gpu::cpu {

namespace {

void silu_row_scalar(const float* gate, const float* up, float* out, size_t from, size_t n) {
  for (size_t i = from; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

__attribute__((target("avx2,fma"))) void silu_row_avx2(const float* gate, const float* up,
                                                       float* out, size_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 neg_abs = _mm256_or_ps(g, sign);  // -|g|
    const __m256 e = detail::exp_avx2(neg_abs);  // 0 below -87
    const __m256 num = _mm256_blendv_ps(one, e, g);  // sign bit of g set: e
    const __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(g, s), _mm256_loadu_ps(up + i)));
  }
  silu_row_scalar(gate, up, out, i, n);
}

const bool kSimd = best_quant_isa() != QuantIsa::Scalar;

}  // namespace

void silu_mul(const SiluMulParams& p, ThreadPool& pool, QuantizeFn quantize,
              detail::ActBlock* act) {
  const size_t inter = size_t(p.intermediate);
  const size_t min_rows = std::max<size_t>(1, 16384 / std::max<size_t>(inter, 1));
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      const float* gate = p.x + t * 2 * inter;
      const float* up = gate + inter;
      float* out = p.out + t * inter;
      if (kSimd) {
        silu_row_avx2(gate, up, out, inter);
      } else {
        silu_row_scalar(gate, up, out, 0, inter);
      }
      if (quantize != nullptr) quantize(out, 1, int64_t(inter), act + t * (inter / 32));
    }
  }, min_rows);
}

}  // namespace pagoda::gpu::cpu
