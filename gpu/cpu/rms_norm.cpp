// CPU twin of RMSNorm with the optional fused residual add (RmsNormParams in
// gpu/ops.hpp). The sum of squares uses 8 independent fp32 lanes (vectorisable,
// deterministic), combined in double.
#include <algorithm>
#include <cmath>

#include "gpu/cpu/cpu_ops.hpp"

namespace pagoda::gpu::cpu {

namespace {

float sum_of_squares(const float* x, size_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t j = 0; j < 8; ++j) lane[j] += x[i + j] * x[i + j];
  }
  double total = 0.0;
  for (float l : lane) total += l;
  for (; i < n; ++i) total += double(x[i]) * x[i];
  return float(total);
}

void norm_row(const float* x, const float* w, float* out, size_t n, float eps) {
  const float inv = 1.0f / std::sqrt(sum_of_squares(x, n) / float(n) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = (x[i] * inv) * w[i];
}

}  // namespace

void rms_norm(const RmsNormParams& p, ThreadPool& pool, QuantizeFn quantize,
              detail::ActBlock* act) {
  const size_t n = size_t(p.hidden);
  const size_t min_rows = std::max<size_t>(1, 16384 / std::max<size_t>(n, 1));
  pool.parallel_for(size_t(std::max(p.num_tokens, 0)), [&](size_t begin, size_t end) {
    for (size_t t = begin; t < end; ++t) {
      const float* x = p.x + t * n;
      float* out = p.out + t * n;
      if (p.residual != nullptr) {
        float* r = p.residual + t * n;
        for (size_t i = 0; i < n; ++i) r[i] += x[i];
        norm_row(r, p.weight, out, n, p.eps);
      } else {
        norm_row(x, p.weight, out, n, p.eps);
      }
      if (quantize != nullptr) quantize(out, 1, int64_t(n), act + t * (n / 32));
    }
  }, min_rows);
}

}  // namespace pagoda::gpu::cpu
