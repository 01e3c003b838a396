// BF16 skinny GEMM for decode: y[M, N] = x[M, K] . W[N, K]^T (+ bias) for
// 1 <= M <= 8, the memory-bound case where cuBLAS leaves bandwidth unused.
// Index math: GemvPlan<R, U> (decode_plan.hpp), R = gemv_rows_per_warp(M),
// U = gemv_unroll(M). Each warp streams its R rows of W once, 16 bytes per
// lane per load (__ldcs: read once, evict first), with U x R loads in flight
// per lane, and multiplies every
// weight chunk with the M rows of x (x stays in L1/L2: M * K elements).
// fp32 accumulation; x is rounded to bf16 first (an fp32 x on load, exactly
// like matmul.cu's conversion for cuBLAS), so the inputs are those of the
// cuBLAS path; only the summation order differs. After the K loop the lanes'
// partial sums are combined by xor butterflies (the loop is warp-uniform:
// every lane reaches the shuffles) and lane r * M + m writes y[m, row r].
// The arithmetic of row m does not depend on M: a row's result is bitwise
// the same in every batch of size <= 8.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>

#include "gpu/cuda/block_reduce.cuh"
#include "gpu/cuda/cuda_check.cuh"
#include "gpu/cuda/cuda_ops.cuh"
#include "gpu/cuda/decode_plan.hpp"
#include "gpu/cuda/device_vec.cuh"

namespace pagoda::gpu::cuda {

namespace {

using Plan = GemvPlan<>;  // the R-independent constants and index math

struct GemvArgs {
  const __nv_bfloat16* w;  // [N, K]
  const void* x;           // [M, K] rows x_stride elements apart (float or bf16)
  int64_t x_stride;
  const float* bias;       // [N] or nullptr
  float* y;                // [M, N]
  int64_t n, k;  // W's [N, K]
};

__device__ __forceinline__ float round_to_bf16(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

// The 8 x values of chunk c of row m, as fp32 holding bf16 values.
__device__ __forceinline__ void load_x8(const float* x, int64_t at, float (&f)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(x + at);
  const float4 b = *reinterpret_cast<const float4*>(x + at + 4);
  f[0] = round_to_bf16(a.x); f[1] = round_to_bf16(a.y);
  f[2] = round_to_bf16(a.z); f[3] = round_to_bf16(a.w);
  f[4] = round_to_bf16(b.x); f[5] = round_to_bf16(b.y);
  f[6] = round_to_bf16(b.z); f[7] = round_to_bf16(b.w);
}

__device__ __forceinline__ void load_x8(const __nv_bfloat16* x, int64_t at, float (&f)[8]) {
  Raw8<__nv_bfloat16> r;
  load8(x + at, r);
  to_float8(r, f);
}

template <int M, class XT>
__global__ void __launch_bounds__(Plan::kThreads) gemv_kernel(const GemvArgs a) {
  constexpr int R = gemv_rows_per_warp(M), U = gemv_unroll(M);
  static_assert(R * M <= 32, "one lane per (row, m) output");
  const GemvPlan<R, U> plan{a.n, a.k};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = plan.row_begin(blockIdx.x, warp);
  if (row0 >= plan.n) return;  // the whole warp; no block-level sync follows
  const int64_t chunks = plan.chunks();
  const uint4* wrow[R];
  bool row_ok[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    row_ok[r] = row0 + r < plan.n;
    wrow[r] = reinterpret_cast<const uint4*>(a.w) + (row_ok[r] ? row0 + r : row0) * chunks;
  }
  const XT* x = static_cast<const XT*>(a.x);
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  }
  const int64_t iters = plan.iterations();
  for (int64_t it = 0; it < iters; ++it) {  // warp-uniform
    Raw8<__nv_bfloat16> wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = plan.chunk_of(it, u, lane);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wv[u][r].u = (c < chunks && row_ok[r]) ? __ldcs(wrow[r] + c) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = plan.chunk_of(it, u, lane);
      if (c >= chunks) continue;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) to_float8(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        load_x8(x, m * a.x_stride + c * Plan::kVec, xf);
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][m] = fmaf(wf[r][e], xf[e], acc[r][m]);
        }
      }
    }
  }
  // Every lane is here: the butterflies leave the full sums in all lanes.
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = warp_reduce(acc[r][m], SumOp{});
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      if (lane == r * M + m && row_ok[r]) {
        const int64_t row = row0 + r;
        a.y[m * plan.n + row] = acc[r][m] + (a.bias != nullptr ? a.bias[row] : 0.0f);
      }
    }
  }
}

template <int M, class XT>
void launch_m(const GemvArgs& a, cudaStream_t stream) {
  const GemvPlan<gemv_rows_per_warp(M), gemv_unroll(M)> plan{a.n, a.k};
  gemv_kernel<M, XT><<<unsigned(plan.num_ctas()), Plan::kThreads, 0, stream>>>(a);
}

template <class XT>
void launch_typed(const GemvArgs& a, int64_t m, cudaStream_t stream) {
  switch (m) {
    case 1: launch_m<1, XT>(a, stream); break;
    case 2: launch_m<2, XT>(a, stream); break;
    case 3: launch_m<3, XT>(a, stream); break;
    case 4: launch_m<4, XT>(a, stream); break;
    case 5: launch_m<5, XT>(a, stream); break;
    case 6: launch_m<6, XT>(a, stream); break;
    case 7: launch_m<7, XT>(a, stream); break;
    default: launch_m<8, XT>(a, stream); break;
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

const char* gemv_unsupported(const MatmulParams& p, const void* x, int64_t x_stride,
                             bool x_bf16) {
  const LinearWeight& w = p.weight;
  if (w.format != WeightFormat::BF16) return "weight is not BF16";
  if (p.m < 1 || p.m > Plan::kMaxM) return "M outside 1..8";
  if (w.n <= 0 || w.k <= 0 || w.k % Plan::kVec != 0) return "K is not a multiple of 8";
  if (x_stride < w.k) return "x row stride below K";
  if (!aligned16(w.data)) return "weight not 16-byte aligned";
  const int64_t x_bytes = x_bf16 ? 2 : 4;
  if (!aligned16(x) || (x_stride * x_bytes) % 16 != 0) return "x rows not 16-byte aligned";
  if (p.y == nullptr) return "no output";
  if (Plan{w.n, w.k}.num_ctas() > INT_MAX) return "N too large for the grid";  // R = 2: the most
  return nullptr;
}

Result<void> launch_gemv(const MatmulParams& p, const void* x, int64_t x_stride, bool x_bf16,
                         cudaStream_t stream) {
  if (const char* why = gemv_unsupported(p, x, x_stride, x_bf16)) {
    return make_error(std::string("cuda gemv: ") + why);
  }
  GemvArgs a{static_cast<const __nv_bfloat16*>(p.weight.data), x, x_stride, p.bias, p.y,
             p.weight.n, p.weight.k};
  if (x_bf16) {
    launch_typed<__nv_bfloat16>(a, p.m, stream);
  } else {
    launch_typed<float>(a, p.m, stream);
  }
  return check_launch("gemv");
}

}  // namespace pagoda::gpu::cuda
