// The AVX-512 VNNI variant of quant_matmul's tile kernel
// (QuantIsa::Avx512Vnni): EVEX vpdpbusd on ymm (AVX512_VNNI + VL), with the
// 32 vector registers of AVX-512 allowing larger register tiles (4 weight
// rows × 2-4 activation rows: 16 accumulators; 2 weight rows for a single
// activation row, as 4 measured ~8% slower in decode). The lane layout, and so
// every result bit, is that of the other variants (quant_tile_simd.hpp).
// Functions carry the target attribute; quant_matmul calls this only when
// cpu_features().avx512_vnni (cpuid and the OS-enabled zmm/opmask state).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "gpu/cpu/quant_matmul.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define PAGODA_VNNI 1
#define PAGODA_DPBUSD(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define PAGODA_NR_DECODE 2
#define PAGODA_NR_BATCH 4

namespace pagoda::gpu::cpu::detail {

namespace {
#include "gpu/cpu/quant_tile_simd.hpp"
}  // namespace

PAGODA_SIMD void quant_tile_avx512vnni(const LinearWeight& w, const ActBlock* act, float* y,
                                       int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  tile_any(w, act, y, m0, m1, n0, n1);
}

}  // namespace pagoda::gpu::cpu::detail
