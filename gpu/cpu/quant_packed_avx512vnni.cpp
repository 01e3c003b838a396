// The AVX-512 VNNI (vpdpbusd on zmm) variant of the packed-layout kernel
// (gpu/cpu/quant_packed.hpp; body in quant_packed_zmm.hpp). Called only when
// cpu_features().avx512_vnni (cpuid and the OS-enabled zmm/opmask state).
#include <immintrin.h>

// GCC 12 warns inside its own headers that _mm512_cvtph_ps / _mm512_cvtepi32_ps
// read an "uninitialized" pass-through operand (their unmasked forms ignore it).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>

#include "gpu/cpu/quant_packed.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define PAGODA_VNNI 1

namespace pagoda::gpu::cpu::detail {

namespace {
#include "gpu/cpu/quant_packed_zmm.hpp"
}  // namespace

PAGODA_SIMD void packed_tile_avx512vnni(const LinearWeight& w, const ActBlock* act, float* y,
                                  int64_t m0, int64_t m1, int64_t g0, int64_t g1) {
  tile_any(w, act, y, m0, m1, g0, g1);
}

}  // namespace pagoda::gpu::cpu::detail
