// CPU linear layers: y[M, N] = x[M, K] · W[N, K]ᵀ with W as stored in the
// model file, and the one entry point `matmul` that dispatches on W's format.
//
// Two paths:
//  - exact: W in F32 (dequantized/converted once at load with
//    gpu::dequantize) -> gemm_f32 (OpenBLAS sgemm).
//  - quantized: W in Q8_0 / Q4_0 / Q4_1 (or, packed, Q5_0 / Q5_1 / IQ4_NL /
//    IQ4_XS / Q2_K .. Q6_K: gpu/cpu/quant_packed.hpp) used in place. Each 32-element block
//    of an x row is quantized to int8 with an fp32 scale d = amax/127 (and,
//    for Q4_1, the fp32 block sum s = d·Σq); per block the integer dot
//    product of the quants is exact and is scaled and accumulated in fp32:
//      Q8_0, Q4_0, Q5_0, IQ4_*:  y = Σ_b (d_w·d_x)·Σ_j q_wj·q_xj
//      Q4_1, Q5_1:               y = Σ_b (d_w·d_x)·Σ_j q_wj·q_xj + Σ_b m_w·s_x
//    Error vs. x·dequant(W)ᵀ in exact arithmetic: |x_j − d_x·q_xj| ≤
//    amax_b/254 (+ fp32 rounding), so |err| ≤ Σ_b (amax_b/254)·Σ_{j∈b}|w_j|
//    plus fp32 accumulation error (see tests/quant_matmul_test.cpp). (Blocks
//    with amax < 1e-30 are zeroed: their error is at most amax·Σ|w_j|.)
//    Five kernel variants compute this same math bit for bit (QuantIsa,
//    gpu/cpu/cpu_isa.hpp): a portable scalar one and AVX2, AVX-VNNI,
//    AVX-512 BW (no VNNI) and AVX-512 VNNI ones (each in its own translation unit with a target
//    attribute, chosen at run time by cpuid + xgetbv). The fp32 summation
//    order is fixed by the 8-lane layout described in quant_tile_simd.hpp;
//    the scalar kernel follows it, so every variant gives identical bits.
//
// A weight in WeightLayout::kPacked16 (gpu/cpu/quant_packed.hpp, what the CPU
// backend loads) goes to the packed kernels instead, with their own
// summation order (bit-exact across variants just the same).
//
// Threading: work is split over tiles of (rows of x) × (rows of W) on the
// given ThreadPool. Thread-safety: one call at a time per pool and per
// scratch (the executor thread owns both).
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/cpu/cpu_isa.hpp"
#include "gpu/cpu/thread_pool.hpp"
#include "gpu/result.hpp"
#include "gpu/weight_format.hpp"

namespace pagoda::gpu::cpu {

namespace detail {

// One quantized 32-element block of an activation row.
struct ActBlock {
  float d;         // scale: amax/127 (0 for an all-zero block)
  float s;         // d · Σ qs, rounded to fp32 (used by Q4_1, Q5_1)
  int32_t sum;     // Σ qs (the packed kernels' integer offsets; 0 for a non-finite block)
  int32_t sum_lo;  // Σ qs[0..15] (the packed K-quant kernels' 16-element sub-blocks)
  int8_t qs[32];   // round(x/d), in [-127, 127]
};
static_assert(sizeof(ActBlock) == 48);

// Quantizes x[M, K] (K % 32 == 0) into out[M, K/32]: d = amax/127 and
// q = round-to-nearest-even(x·(1/d)) in fp32. A block with amax < 1e-30 is
// stored as zeros (d = 0); a block holding a non-finite value gets d = NaN,
// so the outputs that read it are NaN.
void quantize_activations(const float* x /*[M,K]*/, int64_t M, int64_t K,
                          ActBlock* out /*[M,K/32]*/);
// The same bytes with AVX2 (requires cpu_features().avx2; quant_matmul uses
// it for Avx2 and AvxVnni) and with AVX-512 (requires cpu_features().avx512;
// used for Avx512Bw and Avx512Vnni).
void quantize_activations_avx2(const float* x /*[M,K]*/, int64_t M, int64_t K,
                               ActBlock* out /*[M,K/32]*/);
void quantize_activations_avx512(const float* x /*[M,K]*/, int64_t M, int64_t K,
                                 ActBlock* out /*[M,K/32]*/);

// Kernels: y[m, n] for m in [m0, m1), n in [n0, n1); act is [M, K/32], y is
// [M, w.n] (row stride w.n). w.format must be Q8_0, Q4_0 or Q4_1.
void quant_tile_scalar(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                       int64_t m1, int64_t n0, int64_t n1);
void quant_tile_avx2(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                     int64_t m1, int64_t n0, int64_t n1);
void quant_tile_avxvnni(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                        int64_t m1, int64_t n0, int64_t n1);
void quant_tile_avx512bw(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                         int64_t m1, int64_t n0, int64_t n1);
void quant_tile_avx512vnni(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                           int64_t m1, int64_t n0, int64_t n1);

}  // namespace detail

// Reusable, grow-only storage for the quantized activations (48 bytes per 32
// elements of x). Owned by the caller; one per calling thread.
class MatmulScratch {
 public:
  detail::ActBlock* activation_blocks(size_t count) {
    if (blocks_.size() < count) blocks_.resize(count);
    return blocks_.data();
  }

 private:
  std::vector<detail::ActBlock> blocks_;
};

// Quantized path. Requires w.format in {Q8_0, Q4_0, Q4_1} (either layout)
// or {Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K..Q6_K} (kPacked16 only: quant_packed.hpp), w.k % 32 == 0,
// x [M, w.k] and y [M, w.n] row-major, y not aliasing x; M >= 0. An Error
// (nothing written) for another format or an unsupported isa.
Result<void> quant_matmul(const LinearWeight& w, const float* x /*[M,K]*/,
                          float* y /*[M,N]*/, int64_t M, MatmulScratch& scratch,
                          QuantIsa isa = best_quant_isa(),
                          ThreadPool& pool = ThreadPool::global());

// The activation quantizer quant_matmul uses with `isa` (every one writes
// the same bytes); callers that produce x row by row (the fused norm / SiLU
// ops) quantize with it on the way and then call quant_matmul_quantized.
using QuantizeFn = void (*)(const float* x /*[M,K]*/, int64_t M, int64_t K,
                            detail::ActBlock* out /*[M,K/32]*/);
QuantizeFn activation_quantizer(QuantIsa isa = best_quant_isa());

// quant_matmul over activations already quantized by activation_quantizer
// (act [M, w.k/32]); the same requirements, errors and results.
Result<void> quant_matmul_quantized(const LinearWeight& w, const detail::ActBlock* act,
                                    float* y /*[M,N]*/, int64_t M,
                                    QuantIsa isa = best_quant_isa(),
                                    ThreadPool& pool = ThreadPool::global());

// The entry point for every linear layer: F32 -> gemm_f32 (exact); Q8_0,
// Q4_0, Q4_1 (and Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K..Q6_K packed) -> quant_matmul with the best isa; F16/BF16 packed by
// pack_half_weight -> half_matmul (gpu/cpu/half_matmul.hpp). F16/BF16 in the
// row layout are an Error here (the loader converts them to F32).
Result<void> matmul(const LinearWeight& w, const float* x /*[M,K]*/, float* y /*[M,N]*/,
                    int64_t M, MatmulScratch& scratch,
                    ThreadPool& pool = ThreadPool::global());

}  // namespace pagoda::gpu::cpu
