#include "gpu/cpu/half_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "gpu/cpu/quant_packed.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cpu {

namespace {

bool is_half(WeightFormat f) { return f == WeightFormat::F16 || f == WeightFormat::BF16; }

}  // namespace

Result<LinearWeight> pack_half_weight(const LinearWeight& w, std::vector<uint8_t>& out) {
  if (!is_half(w.format) || w.layout != WeightLayout::kRows) {
    return make_error("pack_half_weight: needs F16 or BF16 weights in the row layout");
  }
  if (w.k % 32 != 0 || w.n <= 0 || w.data == nullptr) {
    return make_error("pack_half_weight: bad weight shape");
  }
  const int64_t nb = w.k / 32;
  out.assign(size_t(half_packed_bytes(w.n, w.k)), 0);
  const auto* src = static_cast<const uint16_t*>(w.data);
  for (int64_t n = 0; n < w.n; ++n) {
    const int64_t g = n / 16, r = n % 16;
    for (int64_t k = 0; k < w.k; ++k) {
      const int64_t off = (g * nb + k / 32) * kHalfTileBytes + 2 * (16 * (k % 32) + r);
      std::memcpy(out.data() + off, src + n * w.k + k, 2);
    }
  }
  return LinearWeight{w.format, w.n, w.k, out.data(), WeightLayout::kPacked16};
}

namespace detail {

void half_tile_scalar(const LinearWeight& w, const float* x, float* y, int64_t m0, int64_t m1,
                      int64_t g0, int64_t g1) {
  const int64_t nb = w.k / 32;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const bool bf16 = w.format == WeightFormat::BF16;
  for (int64_t m = m0; m < m1; ++m) {
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t r = 0; r < 16 && g * 16 + r < w.n; ++r) {
        float acc = 0.0f;
        for (int64_t k = 0; k < w.k; ++k) {
          uint16_t h;
          std::memcpy(&h, base + (g * nb + k / 32) * kHalfTileBytes + 2 * (16 * (k % 32) + r), 2);
          acc = std::fma(bf16 ? bf16_to_fp32(h) : fp16_to_fp32(h), x[m * w.k + k], acc);
        }
        y[m * w.n + g * 16 + r] = acc;
      }
    }
  }
}

}  // namespace detail

namespace {

detail::HalfTileFn half_kernel(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Avx512Bw:
    case QuantIsa::Avx512Vnni: return &detail::half_tile_avx512;
    case QuantIsa::Avx2:
    case QuantIsa::AvxVnni: return &detail::half_tile_avx2;
    case QuantIsa::Scalar: break;
  }
  return &detail::half_tile_scalar;
}

}  // namespace

Result<void> half_matmul(const LinearWeight& w, const float* x, float* y, int64_t M, QuantIsa isa,
                         ThreadPool& pool) {
  if (!is_half(w.format) || w.layout != WeightLayout::kPacked16 || w.k % 32 != 0) {
    return make_error("half_matmul: needs a packed F16 or BF16 weight");
  }
  if (!quant_isa_supported(isa)) {
    return make_error("half_matmul: " + std::string(isa_name(isa)) + ": " +
                      quant_isa_unsupported_reason(isa));
  }
  if (M <= 0) return {};
  const detail::HalfTileFn kernel = half_kernel(isa);
  for_each_group_tile(pool, M, (w.n + 15) / 16, M == 1 ? 4 : 2,
                      [&](int64_t m0, int64_t m1, int64_t g0, int64_t g1) {
                        kernel(w, x, y, m0, m1, g0, g1);
                      });
  return {};
}

}  // namespace pagoda::gpu::cpu
