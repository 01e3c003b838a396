// The AVX-VNNI (VEX vpdpbusd on ymm) variant of the packed-layout kernel
// (gpu/cpu/quant_packed.hpp; body in quant_packed_ymm.hpp). Called only when
// cpu_features().avx_vnni (cpuid and the OS-enabled ymm state).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "gpu/cpu/quant_packed.hpp"
#include "gpu/quant_format.hpp"

#define PAGODA_SIMD __attribute__((target("avx2,fma,f16c,avxvnni")))
#define PAGODA_VNNI 1

namespace pagoda::gpu::cpu::detail {

namespace {
#include "gpu/cpu/quant_packed_ymm.hpp"
}  // namespace

PAGODA_SIMD void packed_tile_avxvnni(const LinearWeight& w, const ActBlock* act, float* y,
                                 int64_t m0, int64_t m1, int64_t g0, int64_t g1) {
  tile_any(w, act, y, m0, m1, g0, g1);
}

}  // namespace pagoda::gpu::cpu::detail
