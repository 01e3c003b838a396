// The AVX-VNNI variant of quant_matmul's tile kernel (QuantIsa::AvxVnni):
// VEX-encoded vpdpbusd on ymm (Alder Lake and later, Zen 5). Functions carry
// target("avx2,fma,f16c,avxvnni"); quant_matmul calls this only when
// cpu_features().avx_vnni. Body: quant_tile_simd.hpp (16 ymm registers: the
// AVX2 tile shape).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c,avxvnni")))
#define PAGODA_VNNI 1
#define PAGODA_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s))
#define PAGODA_NR_DECODE 2
#define PAGODA_NR_BATCH 2

namespace pagoda::gpu::cpu::detail {

namespace {
#include "gpu/cpu/quant_tile_simd.hpp"
}  // namespace

PAGODA_SIMD void quant_tile_avxvnni(const LinearWeight& w, const ActBlock* act, float* y,
                                    int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  tile_any(w, act, y, m0, m1, n0, n1);
}

}  // namespace pagoda::gpu::cpu::detail
