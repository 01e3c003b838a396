// CPU twin of SiLU(gate) * up over the packed [gate | up] rows (SiluMulParams).
#include <algorithm>
#include <cmath>

#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu::cpu {

void silu_mul(const SiluMulParams& p, ThreadPool& pool) {
  const size_t inter = size_t(p.intermediate);
  const size_t min_rows = std::max<size_t>(1, 16384 / std::max<size_t>(inter, 1));
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      const float* gate = p.x + t * 2 * inter;
      const float* up = gate + inter;
      float* out = p.out + t * inter;
      for (size_t i = 0; i < inter; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
      }
    }
  }, min_rows);
}

}  // namespace pagoda::gpu::cpu
