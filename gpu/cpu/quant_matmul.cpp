#include "gpu/cpu/quant_matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "gpu/cpu/gemm_f32.hpp"
#include "gpu/cpu/half_matmul.hpp"
#include "gpu/cpu/quant_packed.hpp"
#include "gpu/quant_format.hpp"

namespace pagoda::gpu::cpu {

namespace detail {

namespace {

// Blocks whose largest magnitude is below this quantize to zero.
constexpr float kTinyBlock = 1e-30f;

void quantize_block(const float* x, ActBlock& out) {
  float amax = 0.0f;
  bool finite = true;
  for (int j = 0; j < kQuantBlock; ++j) {
    finite = finite && std::isfinite(x[j]);
    amax = std::max(amax, std::fabs(x[j]));
  }
  if (!finite) {
    out = ActBlock{std::nanf(""), std::nanf(""), 0, 0, {}};
    return;
  }
  if (amax < kTinyBlock) {  // keeps d normal and 1/d finite
    out = ActBlock{0.0f, 0.0f, 0, 0, {}};
    return;
  }
  const float d = amax / 127.0f;
  const float id = 1.0f / d;
  int sum = 0, sum_lo = 0;
  for (int j = 0; j < kQuantBlock; ++j) {
    // |x·id| <= 127 up to one rounding; the clamp only guards that rounding.
    const float q = std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f);
    out.qs[j] = static_cast<int8_t>(q);
    sum += out.qs[j];
    if (j < 16) sum_lo += out.qs[j];
  }
  out.d = d;
  out.s = d * static_cast<float>(sum);
  out.sum = sum;
  out.sum_lo = sum_lo;
}

// Weight quant j of a block as a signed integer (Q4_1: the unsigned nibble).
template <WeightFormat F>
int weight_quant(const uint8_t* block, int j) {
  if constexpr (F == WeightFormat::Q8_0) {
    return reinterpret_cast<const BlockQ8_0*>(block)->qs[j];
  } else {
    const uint8_t* qs = F == WeightFormat::Q4_0 ? reinterpret_cast<const BlockQ4_0*>(block)->qs
                                                : reinterpret_cast<const BlockQ4_1*>(block)->qs;
    const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
    return F == WeightFormat::Q4_0 ? nib - 8 : nib;
  }
}

// Dot product of one weight row (nb blocks) with one activation row, in the
// fixed 8-lane order that every SIMD variant uses (quant_tile_simd.hpp):
// lane l sums the exact integer products of elements 4l..4l+3 and
// accumulates fma(d_w·d_a, P_l, acc_l) block by block; the lanes are then
// added as ((0+4)+(2+6)) + ((1+5)+(3+7)); Q4_1 adds Σ fma(m_w, s_a).
template <WeightFormat F>
float dot_row(const uint8_t* w, const ActBlock* a, int64_t nb) {
  constexpr int64_t kBytes = block_bytes(F);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float macc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w + b * kBytes;
    uint16_t dh, mh = 0;
    std::memcpy(&dh, blk, 2);
    if constexpr (F == WeightFormat::Q4_1) std::memcpy(&mh, blk + 2, 2);
    const float d = fp16_to_fp32(dh) * a[b].d;
    for (int l = 0; l < 8; ++l) {
      int32_t p = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) p += weight_quant<F>(blk, j) * a[b].qs[j];
      acc[l] = std::fma(d, static_cast<float>(p), acc[l]);
    }
    if constexpr (F == WeightFormat::Q4_1) macc = std::fma(fp16_to_fp32(mh), a[b].s, macc);
  }
  const float lo = (acc[0] + acc[4]) + (acc[2] + acc[6]);
  const float hi = (acc[1] + acc[5]) + (acc[3] + acc[7]);
  return (lo + hi) + macc;
}

}  // namespace

void quantize_activations(const float* x, int64_t M, int64_t K, ActBlock* out) {
  const int64_t nb = K / kQuantBlock;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t b = 0; b < nb; ++b) quantize_block(x + m * K + b * kQuantBlock, out[m * nb + b]);
  }
}

void quant_tile_scalar(const LinearWeight& w, const ActBlock* act, float* y, int64_t m0,
                       int64_t m1, int64_t n0, int64_t n1) {
  const int64_t nb = w.k / kQuantBlock;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = w.row_bytes();
  for (int64_t m = m0; m < m1; ++m) {
    const ActBlock* a = act + m * nb;
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* row = base + n * row_bytes;
      float v = 0.0f;
      switch (w.format) {
        case WeightFormat::Q8_0: v = dot_row<WeightFormat::Q8_0>(row, a, nb); break;
        case WeightFormat::Q4_0: v = dot_row<WeightFormat::Q4_0>(row, a, nb); break;
        case WeightFormat::Q4_1: v = dot_row<WeightFormat::Q4_1>(row, a, nb); break;
        default: break;
      }
      y[m * w.n + n] = v;
    }
  }
}

}  // namespace detail

namespace {

// Tile sizes of the parallel split: rows of x × rows of W per task.
constexpr int64_t kTileM = 64;
constexpr int64_t kTileN = 32;
// Rows of x quantized per pool chunk.
constexpr size_t kQuantizeRowsPerChunk = 16;


using TileFn = decltype(&detail::quant_tile_scalar);

TileFn tile_kernel(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Avx2: return &detail::quant_tile_avx2;
    case QuantIsa::AvxVnni: return &detail::quant_tile_avxvnni;
    case QuantIsa::Avx512Bw: return &detail::quant_tile_avx512bw;
    case QuantIsa::Avx512Vnni: return &detail::quant_tile_avx512vnni;
    case QuantIsa::Scalar: break;
  }
  return &detail::quant_tile_scalar;
}

// The packed kernels' split. One row (decode): tasks of two groups (the
// decode micro-kernel takes two at once). Batches and prefill: split over
// output columns only, so each thread reads its own part of W from memory
// once: a task is a panel of up to 4 groups (fewer when there would be less
// than 4 tasks per thread), and it runs every row over it in blocks of 64
// rows, so the panel stays in L2 while all the rows pass and a block's
// quantized activations stay in L2 across the panel's groups.
void run_packed(const LinearWeight& w, const detail::ActBlock* act, float* y, int64_t M,
                detail::PackedTileFn kernel, ThreadPool& pool) {
  const int64_t groups = (w.n + kPackRows - 1) / kPackRows;
  if (M == 1) {
    for_each_group_tile(pool, M, groups, 2, [&](int64_t m0, int64_t m1, int64_t g0, int64_t g1) {
      kernel(w, act, y, m0, m1, g0, g1);
    });
    return;
  }
  constexpr int64_t kRowBlock = 64;
  const int64_t per_task =
      std::clamp<int64_t>(groups / (4 * int64_t(pool.size())), 1, 4);
  const int64_t tasks = (groups + per_task - 1) / per_task;
  pool.parallel_for(size_t(tasks), [&](size_t t0, size_t t1) {
    const int64_t g0 = int64_t(t0) * per_task, g1 = std::min(groups, int64_t(t1) * per_task);
    for (int64_t m = 0; m < M; m += kRowBlock) kernel(w, act, y, m, std::min(M, m + kRowBlock), g0, g1);
  });
}

}  // namespace

namespace {

Result<void> check_quant(const LinearWeight& w, QuantIsa isa) {
  const bool rows_kernel = w.format == WeightFormat::Q8_0 || w.format == WeightFormat::Q4_0 ||
                           w.format == WeightFormat::Q4_1;
  const bool packed = w.layout == WeightLayout::kPacked16 && packed_tile_bytes(w.format) > 0;
  if (!rows_kernel && !packed) {
    return make_error("quant_matmul: unsupported weight format " +
                      std::string(format_name(w.format)) +
                      (packed_tile_bytes(w.format) > 0 ? " in the row layout (pack it)" : ""));
  }
  if (w.k % kQuantBlock != 0 || w.n <= 0) return make_error("quant_matmul: bad weight shape");
  if (!quant_isa_supported(isa)) {
    return make_error("quant_matmul: " + std::string(isa_name(isa)) + ": " +
                      quant_isa_unsupported_reason(isa));
  }
  return {};
}

// The tiles over quantized activations (either layout); w checked.
void run_tiles(const LinearWeight& w, const detail::ActBlock* act, float* y, int64_t M,
               QuantIsa isa, ThreadPool& pool) {
  if (w.layout == WeightLayout::kPacked16) {
    run_packed(w, act, y, M, detail::packed_tile_kernel(isa), pool);
    return;
  }
  const int64_t tiles_n = (w.n + kTileN - 1) / kTileN;
  const int64_t tiles = (M + kTileM - 1) / kTileM * tiles_n;
  const TileFn tile = tile_kernel(isa);
  pool.parallel_for(static_cast<size_t>(tiles), [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      const int64_t m0 = static_cast<int64_t>(t) / tiles_n * kTileM;
      const int64_t n0 = static_cast<int64_t>(t) % tiles_n * kTileN;
      tile(w, act, y, m0, std::min(M, m0 + kTileM), n0, std::min(w.n, n0 + kTileN));
    }
  });
}

}  // namespace

QuantizeFn activation_quantizer(QuantIsa isa) {
  switch (isa) {
    case QuantIsa::Avx2:
    case QuantIsa::AvxVnni: return &detail::quantize_activations_avx2;
    case QuantIsa::Avx512Bw:
    case QuantIsa::Avx512Vnni: return &detail::quantize_activations_avx512;
    case QuantIsa::Scalar: break;
  }
  return &detail::quantize_activations;
}

Result<void> quant_matmul_quantized(const LinearWeight& w, const detail::ActBlock* act, float* y,
                                    int64_t M, QuantIsa isa, ThreadPool& pool) {
  if (auto ok = check_quant(w, isa); !ok) return ok;
  if (M > 0) run_tiles(w, act, y, M, isa, pool);
  return {};
}

Result<void> quant_matmul(const LinearWeight& w, const float* x, float* y, int64_t M,
                          MatmulScratch& scratch, QuantIsa isa, ThreadPool& pool) {
  if (auto ok = check_quant(w, isa); !ok) return ok;
  if (M <= 0) return {};
  const int64_t K = w.k;
  detail::ActBlock* act = scratch.activation_blocks(static_cast<size_t>(M * (K / kQuantBlock)));
  const QuantizeFn quantize = activation_quantizer(isa);
  pool.parallel_for(static_cast<size_t>(M), [&](size_t m0, size_t m1) {
    quantize(x + m0 * K, static_cast<int64_t>(m1 - m0), K, act + m0 * (K / kQuantBlock));
  }, kQuantizeRowsPerChunk);
  run_tiles(w, act, y, M, isa, pool);
  return {};
}

Result<void> matmul(const LinearWeight& w, const float* x, float* y, int64_t M,
                    MatmulScratch& scratch, ThreadPool& pool) {
  switch (w.format) {
    case WeightFormat::F32:
      gemm_f32(x, static_cast<const float*>(w.data), y, M, w.n, w.k, pool);
      return {};
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
    case WeightFormat::Q4_1:
    case WeightFormat::Q5_0:  // Q5_x and IQ4_*: packed layout only (check_quant)
    case WeightFormat::Q5_1:
    case WeightFormat::IQ4_NL:
    case WeightFormat::IQ4_XS:
    case WeightFormat::Q2_K:  // and the K-quants: packed only
    case WeightFormat::Q3_K:
    case WeightFormat::Q4_K:
    case WeightFormat::Q5_K:
    case WeightFormat::Q6_K:
      return quant_matmul(w, x, y, M, scratch, best_quant_isa(), pool);
    case WeightFormat::F16:
    case WeightFormat::BF16:
      if (w.layout == WeightLayout::kPacked16) return half_matmul(w, x, y, M, best_quant_isa(), pool);
      break;
    default:
      return make_error("matmul: no CPU kernel for " + std::string(format_name(w.format)) +
                        " weights");
  }
  return make_error("matmul: " + std::string(format_name(w.format)) +
                    " weights must be packed (pack_half_weight) or converted to F32 at load");
}

}  // namespace pagoda::gpu::cpu
