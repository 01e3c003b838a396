// The AVX2+FMA variant of quant_matmul's tile kernel (QuantIsa::Avx2). Every
// function carries target("avx2,fma,f16c") so the rest of the build stays
// portable; quant_matmul calls it only when cpu_features().avx2. The body is
// quant_tile_simd.hpp: maddubs+madd for the integer dot products, 2 weight
// rows × up to 4 activation rows per micro-kernel (2×4 fp32 accumulators fit
// the 16 ymm registers; 4 weight rows for decode measured ~5% slower).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c")))
#define PAGODA_VNNI 0
#define PAGODA_NR_DECODE 2
#define PAGODA_NR_BATCH 2

namespace pagoda::gpu::cpu::detail {

namespace {
#include "gpu/cpu/quant_tile_simd.hpp"
}  // namespace

PAGODA_SIMD void quant_tile_avx2(const LinearWeight& w, const ActBlock* act, float* y,
                                 int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  tile_any(w, act, y, m0, m1, n0, n1);
}

}  // namespace pagoda::gpu::cpu::detail
